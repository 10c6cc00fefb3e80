"""`python -m hlo_run.mpi_rank JOBDIR`: one rank of a job `hlo_run.mpi_launch.MpiLaunch` started.

Where it sits: in each process of `mpiexec -n N`; reads the job directory (`manifest.json`,
`args.<device>.pkl`, `job.json`), runs this rank's device (`mpi_runtime.MpiRankExecutable`), and
rank 0 writes every device's results, rank 0's per-thunk times and (`--verbose`) the
device-to-rank mapping to `result.pkl`, whole or not at all. Any failure is one line on stderr
naming the rank, and ends the job.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path


def main(job: Path) -> None:
    from mpi4py import MPI

    from hlo_common.errors import HloError
    from hlo_common.manifest.manifest import load_manifest
    from hlo_run import mpi_runtime
    from hlo_run.mpi_runtime import MpiRankExecutable, fail, mapping_lines

    mpi_runtime.ERROR_FILE = str(job / "error.txt")

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    try:
        spec = json.loads((job / "job.json").read_text())
        manifest = load_manifest((job / "manifest.json").read_bytes(), spec["name"])
        with open(job / f"args.{rank}.pkl", "rb") as f:
            mine = pickle.load(f)
    except (OSError, ValueError, KeyError, HloError) as exc:
        fail(world, f"cannot read the job: {exc.one_line() if isinstance(exc, HloError) else exc}")
    exe = MpiRankExecutable(manifest, world, float(spec["timeout"]), spec["name"], spec.get("platform", "host"))
    exe.max_while_iterations = spec["max_while_iterations"]
    mapping = mapping_lines(world, spec["replicas"], spec["partitions"]) if spec["verbose"] else None
    args = [mine if d == rank else None for d in range(world.Get_size())]
    results = exe.run(args)
    if rank == 0:
        out = {"results": results, "profile": exe.profile(), "mapping": mapping}
        tmp = job / "result.pkl.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, job / "result.pkl")
    exe.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
