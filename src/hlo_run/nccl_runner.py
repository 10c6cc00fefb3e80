"""Issuing `nccl_calls` through NVIDIA's nccl4py bindings: the cuda platform's collectives.

Where it sits: one process per GPU, started like the host platform's MPI ranks (`mpi_launch`);
imported only where a GPU runs (the `gpu` extra brings nccl4py and nvidia-nccl-cu12). Each
communicator is created once, at load, where its grouping of the devices is first used
(`nccl_calls.groupings`), with ncclCommInitRank: the group's first member makes the unique id
(ncclGetUniqueId) and MPI broadcasts its bytes to the group (a Comm.Split of the world). Calls
go to the stream the thunks run on, with the raw pointers of the run's buffers
(`pointer(slice)`); a Fold's scratch is a device buffer the runner owns, folded on the host
(copied back) with the thunk's reduction.

Not yet run on hardware in this repository (no GPU was lent to the session that wrote it); the
translation it executes is tested without one (tests/unit/hlo_run/test_nccl_calls.py).
"""

from __future__ import annotations

from typing import Any, Callable

from hlo_common.errors import HloError
from hlo_common.manifest.collective_thunks import CollectiveThunk
from hlo_common.manifest.thunks import BufferSlice, walk
from hlo_run.nccl_calls import NCCL_OPS, NCCL_TYPES, Fold, Memset, groupings, nccl_calls


class NcclCollectives:
    """One GPU's NCCL communicators and the calls of its collective thunks."""

    def __init__(self, world, manifest, device: int):
        from nccl.bindings import nccl as nb  # noqa: F401 - fails early where NCCL is missing
        from nccl.core import Communicator, UniqueId, get_unique_id

        self.nb = nb
        self.device = device
        self.manifest = manifest
        self.comms: dict[tuple[int, ...], Any] = {}
        # Split is collective over every process: each takes part in every grouping, in the same
        # order; the members of one group see its first use together, so they init it together.
        for grouping in groupings(walk(manifest.thunks), manifest.devices):
            members = next(g for g in grouping if device in g)
            rank = members.index(device)
            sub = world.Split(grouping.index(members), rank)
            uid = bytes(get_unique_id()) if sub.Get_rank() == 0 else None
            uid = sub.bcast(uid, root=0)
            sub.Free()
            if members not in self.comms:
                self.comms[members] = Communicator.init(len(members), rank, UniqueId.from_bytes(uid))

    def run(self, thunk: CollectiveThunk, pointer: Callable[[BufferSlice], int], stream: int,
            scratch: Callable[[int], int], memset: Callable[[int, int], None],
            fold: Callable[[CollectiveThunk, Fold, int], None]) -> None:
        """Issue `thunk`'s calls on `stream`; `scratch(size)` gives a device buffer, `memset(ptr,
        size)` zeros one, `fold(thunk, step, scratch_ptr)` finishes a gather-and-fold."""
        nb = self.nb
        for step in nccl_calls(thunk, self.device, self.manifest.devices):
            work = scratch(step.calls[0].recv.size) if any(isinstance(a, Fold) for a in step.after) else None

            def ptr(s: BufferSlice | None) -> int:
                return 0 if s is None else (work if s.allocation == -1 else pointer(s))

            if step.grouped:
                nb.group_start()
            try:
                for call in step.calls:
                    comm = self.comms[call.comm].ptr
                    dtype = NCCL_TYPES[call.datatype]
                    if call.function == "ncclAllReduce":
                        nb.all_reduce(ptr(call.send), ptr(call.recv), call.count, dtype, NCCL_OPS[call.op],
                                      comm, stream)
                    elif call.function == "ncclAllGather":
                        nb.all_gather(ptr(call.send), ptr(call.recv), call.count, dtype, comm, stream)
                    elif call.function == "ncclReduceScatter":
                        nb.reduce_scatter(ptr(call.send), ptr(call.recv), call.count, dtype,
                                          NCCL_OPS[call.op], comm, stream)
                    elif call.function == "ncclBroadcast":
                        nb.broadcast(ptr(call.send), ptr(call.recv), call.count, dtype, call.root, comm,
                                     stream)
                    elif call.function == "ncclSend":
                        nb.send(ptr(call.send), call.count, dtype, call.peer, comm, stream)
                    elif call.function == "ncclRecv":
                        nb.recv(ptr(call.recv), call.count, dtype, call.peer, comm, stream)
                    else:
                        raise HloError(f"unknown NCCL call {call.function}")
            finally:
                if step.grouped:
                    nb.group_end()
            for action in step.after:
                if isinstance(action, Memset):
                    memset(pointer(action.destination), action.destination.size)
                else:
                    fold(thunk, action, work)

    def close(self) -> None:
        for comm in self.comms.values():
            comm.destroy()
        self.comms = {}
