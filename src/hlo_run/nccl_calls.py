"""Collective thunks as NCCL calls, as data: what the cuda platform's runner (`nccl_runner`) issues.

Where it sits: hlo-run's cuda platform on several GPUs, one process per GPU started like the
host's MPI ranks (`mpi_launch`). This module imports no NCCL and needs no GPU: `nccl_calls(thunk,
device)` gives the calls device `device` makes for one CollectiveThunk, with the arguments
XLA:GPU's thunks pass (xla/backends/gpu/runtime/{all_reduce,all_gather,reduce_scatter,all_to_all,
collective_permute}_thunk.cc and nccl_communicator.cc):

    all-reduce            ncclAllReduce(send, recv, count, type, op, comm(group))
    all-gather            ncclAllGather(send, recv, sendcount, type, comm(group))
    reduce-scatter        ncclReduceScatter(send, recv, recvcount, type, op, comm(group))
    all-to-all            grouped ncclSend / ncclRecv of each peer's chunk (XLA does the same)
    collective-permute    grouped ncclSend to the target / ncclRecv from the source over the
                          communicator of all devices; zeros where nobody sends (a memset)
    collective-broadcast  ncclBroadcast(send, recv, count, type, root 0, comm(group))

Counts are elements of the NCCL type: pred and the 8-bit types move as bytes, 16-bit integers as
pairs of bytes when nothing is reduced; complex sums reduce their float parts. Reductions map to
ncclSum / ncclProd / ncclMax / ncclMin (and/or on pred are min/max); what NCCL cannot reduce (a
region, and/or on integers, products of complex numbers) is an all-gather into scratch followed
by a fold in group order (`Fold`), as the host platform does. Peer ranks are ranks in the
communicator, which is named by its devices in group order (its rank order).
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.errors import HloError
from hlo_common.hlo.dtypes import primitive_type
from hlo_common.hlo.shape import Shape
from hlo_common.manifest.collective_thunks import CollectiveThunk
from hlo_common.manifest.manifest import parse_shape_text
from hlo_common.manifest.thunks import BufferSlice

# ncclDataType_t and ncclRedOp_t, by NCCL's numbering (nccl.h)
NCCL_TYPES = {"ncclInt8": 0, "ncclUint8": 1, "ncclInt32": 2, "ncclUint32": 3, "ncclInt64": 4,
              "ncclUint64": 5, "ncclFloat16": 6, "ncclFloat32": 7, "ncclFloat64": 8, "ncclBfloat16": 9,
              "ncclFloat8e4m3": 10, "ncclFloat8e5m2": 11}
NCCL_OPS = {"ncclSum": 0, "ncclProd": 1, "ncclMax": 2, "ncclMin": 3}
_TYPE_OF = {"s8": "ncclInt8", "u8": "ncclUint8", "pred": "ncclUint8", "s32": "ncclInt32", "u32": "ncclUint32",
            "s64": "ncclInt64", "u64": "ncclUint64", "f16": "ncclFloat16", "f32": "ncclFloat32",
            "f64": "ncclFloat64", "bf16": "ncclBfloat16", "f8e4m3fn": "ncclFloat8e4m3",
            "f8e5m2": "ncclFloat8e5m2", "c64": "ncclFloat32", "c128": "ncclFloat64"}
_OP_OF = {"sum": "ncclSum", "prod": "ncclProd", "max": "ncclMax", "min": "ncclMin"}
_PRED_OP = {"sum": "ncclMax", "or": "ncclMax", "max": "ncclMax", "prod": "ncclMin", "and": "ncclMin",
            "min": "ncclMin"}


@dataclass(frozen=True)
class NcclCall:
    """One NCCL call of one device. Buffers are slices (sub-slices for chunks); `comm` names the
    communicator by its devices in rank order; `peer` / `root` are ranks in it."""

    function: str  # ncclAllReduce | ncclAllGather | ncclReduceScatter | ncclBroadcast | ncclSend | ncclRecv
    comm: tuple[int, ...]
    count: int
    datatype: str
    send: BufferSlice | None = None
    recv: BufferSlice | None = None
    op: str | None = None
    peer: int | None = None
    root: int | None = None


@dataclass(frozen=True)
class Memset:
    """Zeros into a slice (a permute target nobody sends to)."""

    destination: BufferSlice


@dataclass(frozen=True)
class Fold:
    """After an all-gather of every member's operand into scratch: fold them in group order with
    the thunk's reduction and write this member's part (all-reduce: all of it) to `destination`."""

    destination: BufferSlice
    members: int
    part: int | None  # reduce-scatter: this member's index along the thunk's dimension


@dataclass(frozen=True)
class NcclStep:
    """Calls issued together (inside ncclGroupStart / ncclGroupEnd when `grouped`), then the
    memsets and folds that finish the thunk."""

    calls: tuple[NcclCall, ...]
    grouped: bool = False
    after: tuple[Memset | Fold, ...] = ()


def nccl_calls(thunk: CollectiveThunk, device: int, devices: int | None = None) -> list[NcclStep]:
    """The NCCL calls `device` of `devices` (the manifest's count) makes for `thunk`, one step per
    buffer (one for a tuple all-to-all)."""
    if thunk.collective == "all-to-all" and thunk.dimension is None:
        return [_tuple_all_to_all(thunk, device)]
    if thunk.collective == "collective-permute":
        everyone = tuple(range(max(devices or 0, thunk.devices(), device + 1)))
        return [_permute(thunk, device, b, everyone) for b in thunk.buffers]
    make = {"all-reduce": _all_reduce, "all-gather": _all_gather, "reduce-scatter": _reduce_scatter,
            "all-to-all": _all_to_all,
            "collective-broadcast": _broadcast}[thunk.collective]
    return [make(thunk, device, b, parse_shape_text(b.source_shape, "source"),
                 parse_shape_text(b.destination_shape, "destination")) for b in thunk.buffers]


def nccl_type(element_type: str, moving: bool = False) -> tuple[str, int]:
    """(ncclDataType_t, elements of it per HLO element); `moving`: no reduction, bytes will do."""
    name = _TYPE_OF.get(element_type)
    if name is not None:
        return name, 2 if element_type in ("c64", "c128") else 1
    if moving:
        return "ncclUint8", primitive_type(element_type).byte_size
    raise HloError(f"NCCL reduces no {element_type}")


def _reduction(thunk: CollectiveThunk, element_type: str) -> tuple[str, int, str] | None:
    """(type, elements per HLO element, op) when NCCL reduces it, else None (gather and fold)."""
    if thunk.reduction == "region" or element_type not in _TYPE_OF:
        return None
    if element_type == "pred":
        return "ncclUint8", 1, _PRED_OP[thunk.reduction]
    op = _OP_OF.get(thunk.reduction)
    if op is None or (element_type in ("c64", "c128") and op != "ncclSum"):
        return None
    name, per = nccl_type(element_type)
    return name, per, op


def _group(thunk: CollectiveThunk, device: int) -> tuple[int, ...]:
    return thunk.group_of(device)


def _all_reduce(thunk, device, b, src: Shape, dst: Shape) -> NcclStep:
    comm = _group(thunk, device)
    plan = _reduction(thunk, b.element_type)
    if plan is None:
        return _gather_and_fold(comm, b, src, None)
    name, per, op = plan
    return NcclStep((NcclCall("ncclAllReduce", comm, src.num_elements * per, name, b.source, b.destination,
                              op),))


def _gather_and_fold(comm, b, src: Shape, part: int | None) -> NcclStep:
    scratch = BufferSlice(-1, 0, b.source.size * len(comm))  # -1: the runner's scratch buffer
    return NcclStep((NcclCall("ncclAllGather", comm, b.source.size, "ncclUint8", b.source, scratch),),
                    after=(Fold(b.destination, len(comm), part),))


def _direct(thunk, src: Shape, dst: Shape) -> None:
    from hlo_run.mpi_collectives import direct

    if not direct(src, dst, thunk.dimension):
        raise HloError(f"%{thunk.profile_annotation}: {thunk.collective} along dimension {thunk.dimension} "
                       f"of {src.to_string()} -> {dst.to_string()}: NCCL needs the dimension most major in "
                       "both layouts (XLA's layout assignment makes it so)")


def _all_gather(thunk, device, b, src: Shape, dst: Shape) -> NcclStep:
    _direct(thunk, src, dst)
    name, per = nccl_type(b.element_type, moving=True)
    return NcclStep((NcclCall("ncclAllGather", _group(thunk, device), src.num_elements * per, name, b.source,
                              b.destination),))


def _reduce_scatter(thunk, device, b, src: Shape, dst: Shape) -> NcclStep:
    _direct(thunk, src, dst)
    comm = _group(thunk, device)
    plan = _reduction(thunk, b.element_type)
    if plan is None:
        return _gather_and_fold(comm, b, src, comm.index(device))
    name, per, op = plan
    count = dst.num_elements * per
    return NcclStep((NcclCall("ncclReduceScatter", comm, count, name, b.source, b.destination, op),))


def _chunk(s: BufferSlice, k: int, size: int) -> BufferSlice:
    return BufferSlice(s.allocation, s.offset + k * size, size)


def _all_to_all(thunk, device, b, src: Shape, dst: Shape) -> NcclStep:
    _direct(thunk, src, dst)
    comm = _group(thunk, device)
    name, per = nccl_type(b.element_type, moving=True)
    size, count = b.source.size // len(comm), src.num_elements * per // len(comm)
    calls = []
    for peer in range(len(comm)):
        calls.append(NcclCall("ncclSend", comm, count, name, send=_chunk(b.source, peer, size), peer=peer))
        calls.append(NcclCall("ncclRecv", comm, count, name, recv=_chunk(b.destination, peer, size),
                              peer=peer))
    return NcclStep(tuple(calls), grouped=True)


def _tuple_all_to_all(thunk, device) -> NcclStep:
    comm = _group(thunk, device)
    if len(thunk.buffers) != len(comm):
        raise HloError(f"%{thunk.profile_annotation}: a tuple all-to-all of {len(thunk.buffers)} operands "
                       f"in a group of {len(comm)}")
    calls = []
    for peer, b in enumerate(thunk.buffers):
        name, per = nccl_type(b.element_type, moving=True)
        count = parse_shape_text(b.source_shape, "source").num_elements * per
        calls.append(NcclCall("ncclSend", comm, count, name, send=b.source, peer=peer))
        calls.append(NcclCall("ncclRecv", comm, count, name, recv=b.destination, peer=peer))
    return NcclStep(tuple(calls), grouped=True)


def _permute(thunk, device, b, everyone: tuple[int, ...]) -> NcclStep:
    name, per = nccl_type(b.element_type, moving=True)
    count = parse_shape_text(b.source_shape, "source").num_elements * per
    target = next((t for s, t in thunk.pairs if s == device), None)
    source = next((s for s, t in thunk.pairs if t == device), None)
    calls = []
    if target is not None:
        calls.append(NcclCall("ncclSend", everyone, count, name, send=b.source, peer=target))
    if source is not None:
        calls.append(NcclCall("ncclRecv", everyone, count, name, recv=b.destination, peer=source))
    after = () if source is not None else (Memset(b.destination),)
    return NcclStep(tuple(calls), grouped=True, after=after)


def _broadcast(thunk, device, b, src: Shape, dst: Shape) -> NcclStep:
    name, per = nccl_type(b.element_type, moving=True)
    return NcclStep((NcclCall("ncclBroadcast", _group(thunk, device), src.num_elements * per, name, b.source,
                              b.destination, root=0),))


def groupings(thunks, devices: int) -> list[tuple[tuple[int, ...], ...]]:
    """Every distinct way the thunks split the devices into communicators, in first-use order
    (collective-permute: all devices together). Every process walks the same list, so each can
    take part in creating every one (a creation is collective over all processes)."""
    out: list[tuple[tuple[int, ...], ...]] = []
    for t in thunks:
        if isinstance(t, CollectiveThunk):
            grouping = t.groups if t.groups else (tuple(range(max(devices, t.devices()))),)
            if grouping not in out:
                out.append(grouping)
    return out


def communicators(thunks, device: int, devices: int | None = None) -> list[tuple[int, ...]]:
    """The communicators `device` needs, in first-use order (every device walks the same thunks,
    so creating them in this order matches across processes)."""
    out: list[tuple[int, ...]] = []
    for t in thunks:
        if not isinstance(t, CollectiveThunk):
            continue
        for step in nccl_calls(t, device, devices):
            for call in step.calls:
                if call.comm not in out:
                    out.append(call.comm)
    return out
