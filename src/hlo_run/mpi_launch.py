"""Starting the host platform's MPI ranks: `mpiexec -n N` from hlo-run, or hlo-run as one rank.

Where it sits: `backends/host.py` (and `backends/cuda.py`, one process per GPU with NCCL for the
collectives, `hlo_run.nccl_runtime`) loads a manifest for N > 1 devices through `host_executable`:

- started under an MPI launcher (`mpiexec`, `srun`: `under_mpi()` reads the variables they set),
  hlo-run is one rank: rank 0 compiles the module and sends the manifest to the others, each runs
  its device (`mpi_runtime.MpiRankExecutable`), rank 0 gathers the results, writes `--output`
  and compares; so a run spans several machines the way any MPI job does;
- otherwise it starts `mpiexec -n N python -m hlo_run.mpi_rank JOBDIR` itself (`MpiLaunch`),
  with the mpiexec of the `mpich` wheel (the `mpi` extra) next to this Python. The job directory
  holds the manifest, one argument file per device and, after the run, rank 0's results. A
  failing rank ends the job (MPI_Abort) and its one error line becomes hlo-run's error.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hlo_common.errors import HloError
from hlo_run.mpi_runtime import ERROR_PREFIX

# Variables an MPI process manager sets in every rank: (rank variable, size variable).
_LAUNCHER_VARS = (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                  ("PMIX_RANK", None), ("SLURM_PROCID", "SLURM_NTASKS"))
INSTALL_HINT = "install the `mpi` extra (pip install -e '.[mpi]': mpi4py and the mpich wheel)"


class MpiUnavailable(HloError):
    """mpiexec or mpi4py is missing."""


def under_mpi() -> bool:
    """True when this process is one rank of a job of several (started by mpiexec or srun)."""
    for rank_var, size_var in _LAUNCHER_VARS:
        if rank_var in os.environ:
            size = os.environ.get(size_var or "", "")
            return not size.isdigit() or int(size) > 1
    return False


def find_mpiexec() -> str:
    """The mpiexec beside this Python (a venv's bin, where the mpich wheel puts it)."""
    for folder in (Path(sys.executable).parent, Path(sys.prefix) / "bin"):
        candidate = folder / "mpiexec"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise MpiUnavailable(f"hlo-run runs several devices through MPI, but mpiexec is not installed "
                         f"next to {sys.executable}: {INSTALL_HINT}")


def check_mpi4py() -> None:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise MpiUnavailable(f"hlo-run runs several devices through MPI, but mpi4py is not "
                             f"installed: {INSTALL_HINT}") from None


class MpiLaunch:
    """An executable for N devices that runs each `run` as one `mpiexec -n N` job."""

    def __init__(self, manifest, name: str, replicas: int, partitions: int, verbose: bool = False,
                 platform: str = "host"):
        self.manifest, self.name, self.platform = manifest, name, platform
        self.replicas, self.partitions = replicas, partitions
        self.n = replicas * partitions
        self.verbose = verbose
        self.collective_timeout = 60.0
        self.max_while_iterations: int | None = None
        self.source_module = None
        self._profile: list[tuple[str, float]] = []
        check_mpi4py()
        self.mpiexec = find_mpiexec()

    def run(self, args: list[Any]) -> Any:
        with tempfile.TemporaryDirectory(prefix="hlo-run-mpi-") as job:
            self._write_job(Path(job), _split(args, self.n))
            self._launch(Path(job))
            with open(Path(job) / "result.pkl", "rb") as f:
                out = pickle.load(f)
        if self.verbose and out["mapping"]:
            for line in out["mapping"]:
                print(line, file=sys.stderr)
        self._profile = out["profile"]
        return _join(out["results"])

    def _write_job(self, job: Path, per_device: list[list[Any]]) -> None:
        (job / "manifest.json").write_bytes(self.manifest.to_bytes())
        for d, args in enumerate(per_device):
            with open(job / f"args.{d}.pkl", "wb") as f:
                pickle.dump(args, f, protocol=pickle.HIGHEST_PROTOCOL)
        spec = {"name": self.name, "timeout": self.collective_timeout, "verbose": self.verbose,
                "max_while_iterations": self.max_while_iterations, "replicas": self.replicas,
                "partitions": self.partitions, "platform": self.platform}
        (job / "job.json").write_text(json.dumps(spec))

    def command(self, job: Path) -> list[str]:
        return [self.mpiexec, "-n", str(self.n), sys.executable, "-m", "hlo_run.mpi_rank", str(job)]

    def _launch(self, job: Path) -> None:
        proc = subprocess.Popen(self.command(job), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, env=rank_environment())
        try:
            out, err = proc.communicate()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        text = err.decode("utf-8", "replace")
        first = job / "error.txt"  # the first failing rank's line, whatever reached stderr
        lines = first.read_text(errors="replace").splitlines() if first.is_file() else []
        lines += text.splitlines()
        errors = [line[len(ERROR_PREFIX):] for line in lines if line.startswith(ERROR_PREFIX)]
        if proc.returncode != 0 or errors or not (job / "result.pkl").is_file():
            if errors:
                raise HloError(f"{self.name}: {errors[0]}")
            last = [line for line in (text + out.decode("utf-8", "replace")).splitlines() if line.strip()]
            raise HloError(f"{self.name}: mpiexec -n {self.n} failed (exit status {proc.returncode}): "
                           f"{last[-1] if last else 'no message'}")
        for line in text.splitlines():  # the ranks' warnings
            print(line, file=sys.stderr)

    def profile(self) -> list[tuple[str, float]]:
        return self._profile

    def close(self) -> None:
        pass


def _split(args: list[Any], n: int) -> list[list[Any]]:
    """Each rank's arguments: on N > 1 devices they carry a leading device axis; one device's
    (a module run on one rank, hlo-codegen --keep-collectives) are its own."""
    from hlo_run.devices import per_device_args

    return per_device_args(args, n) if n > 1 else [list(args)]


def _join(results: list[Any]) -> Any:
    """The ranks' results stacked along a device axis (one device: its result as it is)."""
    from hlo_run.devices import stack

    return stack(results) if len(results) > 1 else results[0]


def rank_environment() -> dict[str, str]:
    """The ranks' environment: ours, with Python's output unbuffered (error lines arrive whole and
    in order) and no hash randomness differences between ranks."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def mpiexec_available() -> bool:
    try:
        find_mpiexec()
        check_mpi4py()
        return True
    except MpiUnavailable:
        return False


def host_executable(program, platform: str = "host") -> Any:
    """The executable of the host (or cuda) platform for `program` on program.devices > 1 devices
    (or on one, `Program.on_ranks`): one MPI rank per device, the same launch for both platforms."""
    from hlo_run.compile_hook import manifest_for

    if not under_mpi():
        check_mpi4py()
        find_mpiexec()  # before compiling: a missing launcher is the first thing to hear about
        manifest = manifest_for(program, platform)
        return MpiLaunch(manifest, program.name, program.replicas, program.partitions, program.verbose,
                         platform)
    return RankInJob(program, platform)


class RankInJob:
    """hlo-run started as one rank of an MPI job: rank 0 compiles, every rank runs its device,
    rank 0 gets the stacked results (the other ranks get None)."""

    def __init__(self, program, platform: str = "host"):
        from mpi4py import MPI

        from hlo_common.manifest.manifest import load_manifest
        from hlo_run.compile_hook import manifest_for
        from hlo_run.mpi_runtime import MpiRankExecutable

        world = MPI.COMM_WORLD
        if world.Get_size() != program.devices:
            raise HloError(f"{program.name} runs on {program.devices} devices, but the MPI job has "
                           f"{world.Get_size()} rank(s): start it with mpiexec -n {program.devices}")
        data = None
        if world.Get_rank() == 0:
            try:
                data = manifest_for(program, platform).to_bytes()
            except HloError as exc:  # said here, before any rank leaves (the others would end it)
                print(f"hlo-run: error: {exc.one_line()}", file=sys.stderr, flush=True)
        data = world.bcast(data, root=0)
        if data is None:
            sys.exit(1)  # every rank: rank 0 said why
        self.program, self.world = program, world
        self.inner = MpiRankExecutable(load_manifest(data, program.name), world, 60.0, program.name, platform)
        self.is_root = self.inner.is_root
        self.source_module = None

    collective_timeout = property(lambda self: self.inner.device.watchdog.timeout)

    @collective_timeout.setter
    def collective_timeout(self, value: float) -> None:
        self.inner.device.watchdog.timeout = value

    max_while_iterations = property(lambda self: self.inner.max_while_iterations)

    @max_while_iterations.setter
    def max_while_iterations(self, value) -> None:
        self.inner.max_while_iterations = value

    def run(self, args: list[Any]) -> Any:
        from hlo_run.mpi_runtime import mapping_lines

        if self.program.verbose:
            lines = mapping_lines(self.world, self.program.replicas, self.program.partitions)
            for line in lines or ():
                print(line, file=sys.stderr)
        results = self.inner.run(_split(args, self.program.devices))
        return _join(results) if results is not None else None

    def profile(self) -> list[tuple[str, float]]:
        return self.inner.profile()
