"""One MPI rank of the host platform on several devices: rank d runs device d's thunks.

Where it sits: behind `hlo-run --platform host` for a module on N > 1 devices (`backends/host.py`),
in each of the N processes `mpiexec -n N` starts (`hlo_run.mpi_launch` starts them itself when
hlo-run runs outside MPI, through `python -m hlo_run.mpi_rank`). Every rank loads the same
manifest onto an `MpiHostDevice` (the host device plus `mpi_collectives` for collective thunks),
runs it on its own device's arguments, and rank 0 gathers every device's result.

Bounded waits: a watchdog thread arms itself for each collective; one still waiting after
`timeout` seconds (`--collective-timeout`) reports, on one line, its rank, its thunk and the
group it waits for, then aborts the whole MPI job (MPI_Abort), as does a rank that fails any
other way (`fail`); the process manager then ends every rank.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any, Sequence

from hlo_common.errors import HloError
from hlo_common.manifest.collective_thunks import CollectiveThunk
from hlo_run.backends.host import HostDevice, _view
from hlo_run.manifest_runtime import ManifestExecutable

ERROR_PREFIX = "hlo-run: error: "
# Where a rank of a job hlo-run launched writes its error line too (`mpi_rank` sets it): the
# process manager forwards the ranks' stderr, but may end them before it forwarded the last line.
ERROR_FILE: str | None = None


class Watchdog:
    """Calls `expire(what)` when a wait armed with `arm(what)` lasts longer than `timeout` s.

    Arming and disarming only store a value (no lock, no wake-up: a collective pays nothing for
    it); the watchdog thread looks every `timeout / 20` s (at most 1 s), so a wait ends at most
    5 % (or 1 s) after its deadline."""

    def __init__(self, timeout: float, expire):
        self.timeout, self.expire = timeout, expire
        self._armed: tuple[Any, float] | None = None
        threading.Thread(target=self._loop, name="collective-watchdog", daemon=True).start()

    def arm(self, what: Any) -> None:
        self._armed = (what, time.monotonic() + self.timeout)

    def disarm(self) -> None:
        self._armed = None

    def _loop(self) -> None:
        while True:
            time.sleep(min(1.0, self.timeout / 20))
            armed = self._armed
            if armed is not None and time.monotonic() > armed[1] and self._armed is armed:
                self._armed = None
                self.expire(armed[0])


class MpiHostDevice(HostDevice):
    """The host device of one rank; collective thunks become MPI calls (`mpi_collectives`)."""

    name = "host"

    def __init__(self, world, timeout: float):
        super().__init__()
        self.world = world
        self.rank = self.ordinal = world.Get_rank()
        self.collectives = None
        self._views: dict[tuple[int, int], Any] = {}
        self.watchdog = Watchdog(timeout, self._timed_out)

    def prepare(self, manifest) -> None:
        from hlo_run.mpi_collectives import MpiCollectives

        super().prepare(manifest)
        if manifest.devices != self.world.Get_size():
            raise HloError(f"the manifest is compiled for {manifest.devices} device(s); the MPI job has "
                           f"{self.world.Get_size()} rank(s)")
        self.collectives = MpiCollectives(self.world, manifest)  # communicators: once, here

    def collective(self, thunk: CollectiveThunk, pointers: list[tuple[int, int]], label: str) -> None:
        views = [(self._view(s, b.source.size), self._view(d, b.destination.size))
                 for b, (s, d) in zip(thunk.buffers, pointers)]
        self.watchdog.arm((label, thunk))  # the message is made only if it expires
        try:
            self.collectives.run(thunk, views)
        finally:
            self.watchdog.disarm()

    def _view(self, address: int, size: int):
        """A uint8 array over the bytes at `address`, made once per buffer and run (views cost
        microseconds, a collective in a loop would pay them every iteration)."""
        view = self._views.get((address, size))
        if view is None:
            view = self._views[(address, size)] = _view(address, size)
        return view

    def release(self, buffer) -> None:
        self._views.clear()  # the run's buffers go: no view may outlive them
        super().release(buffer)

    def _timed_out(self, what) -> None:
        label, thunk = what
        who = (f"pairs {list(thunk.pairs)}" if thunk.collective == "collective-permute"
               else f"group {list(thunk.group_of(self.rank))}")
        fail(self.world, f"thunk {label}: the other devices of its {who} did not reach it within "
                         f"{self.watchdog.timeout:g} s (--collective-timeout)")

    def close(self) -> None:
        if self.collectives is not None:
            self.collectives.close()
        super().close()


def rank_device(platform: str, world, timeout: float):
    """This rank's device: the host's, or (`cuda`) a GPU whose collectives go through NCCL."""
    if platform == "host":
        return MpiHostDevice(world, timeout)
    if platform == "cuda":
        from hlo_run.nccl_runtime import NcclCudaDevice

        return NcclCudaDevice(world, timeout)
    raise HloError(f"platform {platform} does not run on several devices (host and cuda do)")


def fail(world, message: str) -> None:
    """Report `message` for this rank on one line and end every rank (MPI_Abort)."""
    rank = world.Get_rank()
    line = f"{ERROR_PREFIX}rank {rank} (device {rank}): {message}\n"
    if ERROR_FILE is not None:
        try:  # the first rank to fail writes it; a later one finds it there
            fd = os.open(ERROR_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(line)
        except OSError:
            pass
    sys.stderr.write(line)
    sys.stderr.flush()
    time.sleep(0.2)  # let the process manager forward the line before MPI_Abort ends every rank
    world.Abort(1)
    os._exit(1)  # Abort does not return; if it ever does, this rank still ends


def mapping_lines(world, replicas: int, partitions: int) -> list[str] | None:
    """`--verbose`: every rank's device, gathered on rank 0 (None on the others)."""
    rank = world.Get_rank()
    mine = (f"device {rank} (replica {rank // partitions}, partition {rank % partitions}) -> MPI rank "
            f"{rank} of {world.Get_size()}, host {socket.gethostname()}, pid {os.getpid()}")
    lines = world.gather(mine, root=0)
    return lines if rank == 0 else None


class MpiRankExecutable:
    """The manifest on this rank's device; `run` gives every device's result on rank 0, None on
    the others."""

    def __init__(self, manifest, world, timeout: float, name: str = "", platform: str = "host"):
        self.world = world
        self.rank = world.Get_rank()
        try:
            self.device = rank_device(platform, world, timeout)
        except HloError as exc:
            fail(world, exc.one_line())
        try:
            self.inner = ManifestExecutable(manifest, self.device, name)
        except HloError as exc:
            fail(world, exc.one_line())
        self.is_root = self.rank == 0

    @property
    def max_while_iterations(self):
        return self.inner.max_while_iterations

    @max_while_iterations.setter
    def max_while_iterations(self, value) -> None:
        self.inner.max_while_iterations = value

    def run(self, args_per_device: Sequence[Sequence[Any]]) -> list[Any] | None:
        """`args_per_device[d]`: device d's arguments (only this rank's are read)."""
        try:
            result = self.inner.run(list(args_per_device[self.rank]))
            result = _owned(result)
        except Exception as exc:  # noqa: BLE001 - one line for this rank, then every rank stops
            line = exc.one_line() if isinstance(exc, HloError) else f"{type(exc).__name__}: {exc}"
            name = self.inner.name + ": "
            fail(self.world, line[len(name):] if line.startswith(name) else line)
        return self.world.gather(result, root=0)

    def profile(self) -> list[tuple[str, float]]:
        return self.inner.profile()

    def close(self) -> None:
        self.inner.close()


def _owned(value: Any) -> Any:
    """Results may be views of the run's buffers: copies travel to rank 0."""
    import numpy as np

    if isinstance(value, tuple):
        return tuple(_owned(v) for v in value)
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value
