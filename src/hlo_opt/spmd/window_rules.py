"""How a tiling passes through slice, pad, concatenate, dynamic-slice and dynamic-update-slice,
and (through `hlo_opt.spmd.gather_dims` and `conv_handlers`) gather, scatter and convolution
(the cases of xla/service/sharding_propagation.cc and hlo_sharding_util.cc for them), forward
and backward; called by `hlo_opt.spmd.rules` for the ops it does not know.

Slice, pad, concatenate and reduce-window keep the tiling dim for dim (the partitioner exchanges halos where a
window crosses tiles); a dynamic-update-slice's result is laid out as its operand (a split dim
updated in part is written in place, `hlo_opt.spmd.dynamic_handlers`); a dynamic-slice and the
update keep the tiling on the dims taken whole and replicate the dims taken in part. Their offsets and pad
values are scalars and get no tiling from here.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.spmd import conv_handlers, gather_dims
from hlo_opt.spmd.tiling import Tiling


def _partial(instr: HloInstruction) -> list[int]:
    """The dims a dynamic-slice or dynamic-update-slice touches only in part."""
    full = instr.operands[0].shape.dims
    part = instr.shape.dims if instr.opcode == "dynamic-slice" else instr.operands[1].shape.dims
    return [d for d, (n, s) in enumerate(zip(full, part)) if n != s]


def passes(instr: HloInstruction, index: int, t: Tiling) -> Tiling | None:
    """The tiling on the other side of `instr` from operand `index` (the same rule both ways)."""
    op = instr.opcode
    if instr.shape.is_tuple or t.rank != instr.shape.rank:
        return None
    if op in ("slice", "pad", "reduce-window") and index == 0:
        return t
    if op == "concatenate":
        return t
    if op == "dynamic-update-slice" and index == 0:  # the result is laid out as the operand
        return t
    if (op == "dynamic-slice" and index == 0) or (op == "dynamic-update-slice" and index == 1):
        return t.to_replication(_partial(instr))
    return None


def forward(instr: HloInstruction, index: int, t: Tiling) -> Tiling | None:
    if instr.opcode == "convolution":
        return conv_handlers.forward(instr, index, t)
    if instr.opcode in ("gather", "scatter"):
        return gather_dims.forward(instr, index, t)
    return passes(instr, index, t)


def backward(instr: HloInstruction, index: int, t: Tiling) -> Tiling | None:
    if instr.opcode == "convolution":
        return conv_handlers.backward(instr, index, t)
    if instr.opcode in ("gather", "scatter"):
        return gather_dims.backward(instr, index, t)
    return passes(instr, index, t)
