"""Thunks for collectives and asynchronous copies.

Where it sits: the thunk emitter calls `collective_thunks` for each collective the prepare
pipeline left. On one device (N = replica_count x num_partitions = 1),
`hlo_common.passes.single_device_collectives` checked that each needs one device and its
`transfers` says which leaf each result leaf copies: copies and memsets. On N > 1 devices each
collective becomes one `CollectiveThunk` (`hlo_common.manifest.collective_thunks`), as XLA:GPU's
thunk emitter makes an AllReduceStartThunk etc. (xla/backends/gpu/runtime/*_thunk.cc): its
groups resolved to global device ids for the module's counts and CollectiveOpGroupMode
(`hlo_common.hlo.replica_groups.device_groups`), its reduction recognized from the `to_apply`
region (sum / prod / min / max / and / or; any other region is named, and the runtime evaluates
it), and one buffer per operand. An async `-start` is a Start thunk, its `-done` a Done thunk.
With `keep` (hlo-codegen --keep-collectives) a collective on one device, or over groups of one,
is a CollectiveThunk too, so that one GPU runs a module through the NCCL path several GPUs take.
"""

from __future__ import annotations

from typing import Callable

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.replica_groups import device_groups, device_pairs
from hlo_common.manifest.collective_thunks import CollectiveBuffer, CollectiveDoneThunk, CollectiveThunk
from hlo_common.manifest.thunks import BufferSlice, CopyThunk, MemsetThunk, Thunk
from hlo_common.passes._support import physical_order
from hlo_common.passes.single_device_collectives import COLLECTIVES, transfers

__all__ = ["COLLECTIVES", "collective_thunks", "reduction_kind"]

SliceOf = Callable[[HloInstruction, tuple[int, ...]], BufferSlice]

# opcode -> (collective, is_async, where the result leaves start in the result tuple)
_MULTI = {
    "all-reduce": ("all-reduce", False), "all-gather": ("all-gather", False),
    "reduce-scatter": ("reduce-scatter", False), "all-to-all": ("all-to-all", False),
    "collective-permute": ("collective-permute", False),
    "collective-broadcast": ("collective-broadcast", False),
    "all-reduce-start": ("all-reduce", True), "all-gather-start": ("all-gather", True),
    "collective-permute-start": ("collective-permute", True),
}
_DONE = {"all-reduce-done": "all-reduce", "all-gather-done": "all-gather",
         "collective-permute-done": "collective-permute"}
_BINARY = {"add": "sum", "multiply": "prod", "minimum": "min", "maximum": "max", "and": "and", "or": "or"}


def collective_thunks(instr: HloInstruction, slice_of: SliceOf, replicas: int = 1,
                      partitions: int = 1, keep: bool = False) -> list[Thunk]:
    """The thunks that compute `instr` on `replicas` x `partitions` devices; `keep`: collective
    thunks even where every group has one device."""
    if (replicas * partitions == 1 and not keep) or instr.opcode in ("copy-start", "copy-done"):
        return _one_device(instr, slice_of)
    if instr.opcode in _DONE:
        return [CollectiveDoneThunk(instr.name, _DONE[instr.opcode], instr.operands[0].name)]
    collective, is_async = _MULTI[instr.opcode]
    buffers = tuple(_buffers(instr, slice_of))
    reduction = region = None
    if collective in ("all-reduce", "reduce-scatter"):
        comp = instr.attrs["to_apply"]
        reduction = reduction_kind(comp) or "region"
        region = comp.name if reduction == "region" else None
    dimension = None
    has_dimension = instr.attrs.get("dimensions") is not None
    if collective in ("all-gather", "reduce-scatter", "all-to-all") and has_dimension:
        dims = instr.attrs["dimensions"]
        dimension = int(dims[0] if isinstance(dims, (list, tuple)) else dims)
    if collective == "collective-permute":
        groups, pairs = (), tuple(device_pairs(instr, replicas, partitions))
    else:
        groups, pairs = tuple(tuple(g) for g in device_groups(instr, replicas, partitions)), ()
        if all(len(g) == 1 for g in groups) and not keep:  # every device alone: what one device does, on each
            return _one_device(instr, slice_of)
    return [CollectiveThunk(instr.name, collective, groups, buffers, reduction, region, dimension, pairs,
                            is_async)]


def _one_device(instr: HloInstruction, slice_of: SliceOf) -> list[Thunk]:
    """The copies and memsets that compute `instr` on one device (nothing for a *-done)."""
    thunks: list[Thunk] = []
    for t in transfers(instr):
        dst = slice_of(instr, t.dst)
        if dst.size == 0:
            continue
        if t.operand is None:
            thunks.append(MemsetThunk(instr.name, dst, 0))
            continue
        src = slice_of(instr.operands[t.operand], t.index)
        if src != dst:
            thunks.append(CopyThunk(instr.name, src, dst))
    return thunks


def _result_prefix(instr: HloInstruction) -> tuple[int, ...]:
    """Where the result leaves sit in an async start's tuple: all-gather-start
    ((operands), (results)) and collective-permute-start (operand, result, contexts) at {1}."""
    if instr.opcode in ("all-gather-start", "collective-permute-start") and instr.shape.is_tuple:
        return (1,)
    return ()


def _buffers(instr: HloInstruction, slice_of: SliceOf) -> list[CollectiveBuffer]:
    prefix = _result_prefix(instr)
    result = instr.shape.subshape(prefix)
    out = []
    for k, op in enumerate(instr.operands):
        if not op.shape.is_array:
            raise HloError(f"%{instr.name}: {instr.opcode} operand {k} is {op.shape.to_string()}; "
                           f"hlo-codegen takes array operands (in computation {instr.parent.name})")
        index = prefix + ((k,) if result.is_tuple else ())
        dst_shape = instr.shape.subshape(index)
        if instr.opcode.startswith(("all-reduce", "collective-permute", "collective-broadcast")) \
                and physical_order(dst_shape) != physical_order(op.shape):
            raise HloError(f"%{instr.name}: {instr.opcode} result {dst_shape.to_string()} has another layout "
                           f"than its operand {op.shape.to_string()}; hlo-codegen needs them equal on "
                           f"several devices (in computation {instr.parent.name})")
        out.append(CollectiveBuffer(slice_of(op, ()), slice_of(instr, index), op.shape.element_type.name,
                                    op.shape.to_string(), dst_shape.to_string()))
    return out


def reduction_kind(comp: HloComputation) -> str | None:
    """sum / prod / min / max / and / or when the region is that binary op of its two scalar
    parameters (in either order), else None."""
    params = comp.parameters
    root = comp.root
    if len(params) != 2 or root.opcode not in _BINARY or len(root.operands) != 2:
        return None
    if {id(o) for o in root.operands} != {id(p) for p in params}:
        return None
    if not all(p.shape.is_array and not p.shape.dims for p in params):
        return None
    return _BINARY[root.opcode]
