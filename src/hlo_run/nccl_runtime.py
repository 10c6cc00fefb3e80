"""One MPI rank of the cuda platform on several devices: rank d runs device d's thunks on a GPU
of its own, collective thunks through NCCL (issue 16 item 4).

Where it sits: `backends/cuda.py` loads a manifest for N > 1 devices through
`mpi_launch.host_executable(program, "cuda")`, the launch the host platform uses (hlo-run starts
`mpiexec -n N` itself, or runs as one rank of a job started by mpiexec / srun); each rank's
`mpi_runtime.MpiRankExecutable` takes an `NcclCudaDevice` (`mpi_runtime.rank_device`). The rank
uses GPU `local rank % GPUs on its machine` (one rank per GPU: NCCL takes no two ranks on one
GPU), builds its communicators once (`nccl_runner.NcclCollectives`: ncclCommInitRank, the unique
id broadcast over MPI) and issues each thunk's NCCL calls (`nccl_calls`) on the stream the
thunks run on. A Fold (a reduction no NCCL operator computes: a region, 16-bit min/max) comes
back to the host, is folded in group order as the interpreter folds it, and goes to the result.
A collective that does not finish within --collective-timeout ends the job with one line naming
the rank and the thunk, as on the host.

Not yet run on hardware in this repository (no GPU was lent to the session that wrote it); what
runs without one is tested: the launch, the slice-to-pointer mapping and the folds.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from hlo_common.errors import HloError
from hlo_common.manifest.collective_thunks import CollectiveThunk
from hlo_common.manifest.layout_bytes import bytes_to_array, write_array_into
from hlo_common.manifest.thunks import BufferSlice
from hlo_run.backends.cuda import CudaDevice, check
from hlo_run.mpi_runtime import Watchdog, fail

NCCL_HINT = "install the `gpu` extra (pip install -e '.[gpu]': nccl4py and nvidia-nccl-cu12)"
_NUMPY_FOLDS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
                "and": np.logical_and, "or": np.logical_or}


def check_nccl() -> None:
    """One line when NCCL's bindings are missing (before anything is compiled or launched)."""
    try:
        import nccl.core  # noqa: F401
    except ImportError:
        raise HloError(f"--platform cuda runs several devices through NCCL, which is not installed: "
                       f"{NCCL_HINT}") from None


def local_gpu(rank: int, gpus: int) -> int:
    """The GPU of `rank`: its rank on this machine (the launcher's local rank when it says one)
    modulo the GPUs here."""
    for var in ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "PMI_LOCAL_RANK"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var]) % gpus
    return rank % gpus


def slice_pointers(thunk: CollectiveThunk, pointers: list[tuple[int, int]]) -> Callable[[BufferSlice], int]:
    """The address of any slice (or chunk of one) of the thunk's buffers, from the (source,
    destination) addresses the runtime gives: an allocation's base is a slice's address less its
    offset."""
    bases: dict[int, int] = {}
    for b, (src, dst) in zip(thunk.buffers, pointers):
        bases[b.source.allocation] = src - b.source.offset
        bases[b.destination.allocation] = dst - b.destination.offset

    def pointer(s: BufferSlice) -> int:
        if s.allocation not in bases:
            raise HloError(f"{thunk.profile_annotation}: slice {s} is not one of the thunk's buffers")
        return bases[s.allocation] + s.offset
    return pointer


def fold_in_group_order(members: list[np.ndarray], reduction: str, region=None) -> np.ndarray:
    """Every member's operand folded left to right in group order (as the interpreter folds):
    a builtin reduction with numpy, a region with `region(acc, x)`."""
    acc = members[0]
    for x in members[1:]:
        if reduction in _NUMPY_FOLDS:
            acc = _NUMPY_FOLDS[reduction](acc, x).astype(acc.dtype, copy=False)
        elif region is not None:
            acc = np.asarray(region(acc, x), dtype=acc.dtype)
        else:
            raise HloError(f"reduction {reduction} needs its region")
    return acc


class NcclCudaDevice(CudaDevice):
    """The GPU of one rank; collective thunks become NCCL calls (`nccl_runner`)."""

    def __init__(self, world, timeout: float):
        from cuda.bindings import driver

        check(driver.cuInit(0), "cuInit")
        gpus = check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        if gpus < 1:
            raise HloError("no CUDA device found")
        super().__init__(local_gpu(world.Get_rank(), gpus))
        self.world = world
        self.rank = self.ordinal = world.Get_rank()
        self.nccl = None
        self.manifest = None
        self._scratch: tuple[Any, int] | None = None
        self._regions: dict[str, Any] = {}
        self.watchdog = Watchdog(timeout, self._timed_out)

    def prepare(self, manifest) -> None:
        from hlo_run.nccl_runner import NcclCollectives

        parent = getattr(super(), "prepare", None)
        if parent is not None:
            parent(manifest)
        if manifest.devices != self.world.Get_size():
            raise HloError(f"the manifest is compiled for {manifest.devices} device(s); the MPI job has "
                           f"{self.world.Get_size()} rank(s)")
        self.manifest = manifest
        self.nccl = NcclCollectives(self.world, manifest, self.rank)  # communicators: once, here

    def collective(self, thunk: CollectiveThunk, pointers: list[tuple[int, int]], label: str) -> None:
        pointer = slice_pointers(thunk, pointers)
        self.watchdog.arm((label, thunk))
        try:
            self.nccl.run(thunk, pointer, int(self.stream), self._scratch_pointer,
                          lambda ptr, size: self.memset32(ptr, size, 0),
                          lambda t, step, work: self._fold(t, step, work, pointer))
            self.synchronize()  # a collective that never completes is caught by the watchdog
        finally:
            self.watchdog.disarm()

    def _scratch_pointer(self, size: int) -> int:
        if self._scratch is None or self._scratch[1] < size:
            if self._scratch is not None:
                self.synchronize()
                self.release(self._scratch[0])
            self._scratch = (self.allocate(size, 256), size)
        return int(self._scratch[0])

    def _fold(self, thunk: CollectiveThunk, step, work: int, pointer) -> None:
        """Every member's operand gathered into `work`: folded on the host, this member's part
        written to the destination."""
        buffer = thunk.buffers[0]
        shape = self.manifest.shape(buffer.source_shape)
        n = buffer.source.size
        self.synchronize()
        data = np.frombuffer(self.read(work, 0, n * step.members), np.uint8)
        members = [bytes_to_array(data[i * n:(i + 1) * n], shape) for i in range(step.members)]
        total = fold_in_group_order(members, thunk.reduction, self._region(thunk))
        if step.part is not None:
            total = np.split(total, step.members, axis=thunk.dimension)[step.part]
        out_shape = self.manifest.shape(buffer.destination_shape)
        out = np.zeros(step.destination.size, np.uint8)
        write_array_into(out, total, out_shape)
        self.write(pointer(step.destination), 0, out.tobytes())

    def _region(self, thunk: CollectiveThunk):
        if thunk.reduction != "region":
            return None
        if thunk.region not in self._regions:
            from hlo_common.hlo.parser import parse_module
            from hlo_common.interpreter.evaluator import Evaluator

            module = parse_module(self.manifest.hlo, f"{self.manifest.module_name} (manifest)")
            comp = next((c for c in module.computations if c.name == thunk.region), None)
            if comp is None:
                raise HloError(f"reduction region %{thunk.region} is not in the manifest's module")
            evaluator = Evaluator(replica_id=0, partition_id=0)
            self._regions[thunk.region] = lambda a, b: evaluator.map_computation(comp, [a, b])[0]
        return self._regions[thunk.region]

    def _timed_out(self, what) -> None:
        label, thunk = what
        fail(self.world, f"thunk {label}: NCCL did not complete it within {self.watchdog.timeout:g} s "
                         f"(--collective-timeout)")

    def close(self) -> None:
        if self.nccl is not None:
            self.nccl.close()
            self.nccl = None
        if self._scratch is not None:
            self.release(self._scratch[0])
            self._scratch = None
        super().close()
