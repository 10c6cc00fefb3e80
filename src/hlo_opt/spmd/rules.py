"""How a tiling passes through one instruction, in both directions (XLA's hlo_sharding_util.cc:
TransposeSharding, ReshapeSharding, the broadcast and reduce cases of sharding_propagation.cc).

`output_from_operand` is the forward rule (the result's tiling given one operand's), and
`operand_from_output` the backward rule (what an operand should hold for the result's tiling);
both return None where the tiling does not pass through. The partitioner uses the backward rules
to ask for its operands' layouts, propagation uses both. Dot and reduce have their own modules.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_opt.spmd import window_rules
from hlo_opt.spmd.tiling import Tiling

# Ops whose result is laid out as their (same-shaped) operands: XLA's elementwise ops and the
# shape-preserving annotations.
PASS_THROUGH = frozenset({"copy", "custom-call", "optimization-barrier"})


def is_elementwise_like(instr: HloInstruction) -> bool:
    if instr.shape.is_tuple or any(op.shape.is_tuple for op in instr.operands):
        return False
    if instr.opcode == "custom-call":
        return instr.attrs.get("custom_call_target") == "Sharding" and len(instr.operands) == 1
    if instr.opcode in ("copy",) or is_elementwise(instr.opcode):
        return all(op.shape.dims == instr.shape.dims for op in instr.operands)
    return False


def transpose_tiling(t: Tiling, perm: tuple[int, ...]) -> Tiling:
    """The tiling of transpose(x, perm) from x's: result dim a is operand dim perm[a]."""
    return Tiling.of(t.ids.transpose(list(perm) + [t.rank]))


def inverse(perm) -> tuple[int, ...]:
    out = [0] * len(perm)
    for a, p in enumerate(perm):
        out[p] = a
    return tuple(out)


def broadcast_forward(t: Tiling, dims: tuple[int, ...], out_rank: int) -> Tiling:
    order = list(np.argsort(dims))
    ids = t.ids.transpose(order + [t.rank])
    shape = [1] * out_rank + [ids.shape[-1]]
    for k, d in enumerate(sorted(dims)):
        shape[d] = ids.shape[k]
    return Tiling.of(ids.reshape(shape))


def broadcast_backward(t: Tiling, dims: tuple[int, ...]) -> Tiling:
    """The operand's tiling for a broadcast tiled `t`: the broadcast dims' tiles replicate."""
    extra = [a for a in range(t.rank) if a not in dims]
    kept = t.to_replication(extra)
    ids = kept.ids.reshape([kept.ids.shape[d] for d in sorted(dims)] + [kept.ids.shape[-1]])
    rank = len(dims)
    position = {d: k for k, d in enumerate(sorted(dims))}
    return Tiling.of(ids.transpose([position[d] for d in dims] + [rank]))


def reshape_tiling(t: Tiling, src_dims: tuple[int, ...], dst_dims: tuple[int, ...]) -> Tiling | None:
    """A reshape from `src_dims` tiled `t` to `dst_dims`, where every tiled dim keeps its blocks
    contiguous: it maps to a result dim after the same number of elements of major dims (equal
    prefix products) whose size its tile count divides, or, for a dim the count does not divide
    (padded tiles), of its own size. None otherwise."""
    prefix_dst, p = {}, 1
    for o, size in enumerate(dst_dims):
        prefix_dst.setdefault(p, []).append(o)
        p *= size
    target = [1] * len(dst_dims)
    axis_of = {}
    p = 1
    for d, size in enumerate(src_dims):
        tiles = t.tiles[d]
        if tiles > 1:
            # an uneven dim (padded tiles) only onto a dim of its own size
            choices = [o for o in prefix_dst.get(p, []) if dst_dims[o] > 1 and (
                dst_dims[o] == size or (dst_dims[o] % tiles == 0 and size % tiles == 0))]
            if not choices or target[choices[0]] != 1:
                return None
            target[choices[0]] = tiles
            axis_of[choices[0]] = d
        p *= size
    tiled_src = [d for d in range(t.rank) if t.tiles[d] > 1]
    ids = t.ids.reshape([t.tiles[d] for d in tiled_src] + [t.ids.shape[-1]])
    order = [tiled_src.index(axis_of[o]) for o in sorted(axis_of)]
    ids = ids.transpose(order + [len(tiled_src)])
    return Tiling.of(ids.reshape(target + [t.ids.shape[-1]]))


def reduce_forward(t: Tiling, reduced: tuple[int, ...]) -> Tiling:
    """The result of reducing `reduced` dims of an operand tiled `t` (after combining partials)."""
    folded = t.to_replication(list(reduced))
    kept = [d for d in range(t.rank) if d not in reduced]
    return Tiling.of(folded.ids.reshape([t.tiles[d] for d in kept] + [folded.ids.shape[-1]]))


def reduce_backward(t: Tiling, reduced: tuple[int, ...], operand_rank: int) -> Tiling:
    shape, k = [], 0
    for d in range(operand_rank):
        if d in reduced:
            shape.append(1)
        else:
            shape.append(t.tiles[k])
            k += 1
    return Tiling.of(t.ids.reshape(shape + [t.ids.shape[-1]]))


def output_from_operand(instr: HloInstruction, index: int, t: Tiling) -> Tiling | None:
    """Forward rule for the ops other than dot: the result's tiling from operand `index`'s."""
    op = instr.opcode
    if is_elementwise_like(instr):
        return t
    if op == "transpose":
        return transpose_tiling(t, instr.attrs["dimensions"])
    if op == "broadcast" and index == 0:
        return broadcast_forward(t, tuple(instr.attrs["dimensions"]), instr.shape.rank)
    if op == "reshape":
        return reshape_tiling(t, instr.operands[0].shape.dims, instr.shape.dims)
    if op == "reduce" and not instr.shape.is_tuple and index == 0:
        return reduce_forward(t, tuple(instr.attrs["dimensions"]))
    return window_rules.forward(instr, index, t)


def operand_from_output(instr: HloInstruction, index: int, t: Tiling) -> Tiling | None:
    """Backward rule for the ops other than dot: what operand `index` should hold."""
    op = instr.opcode
    if is_elementwise_like(instr):
        return t
    if op == "transpose":
        return transpose_tiling(t, inverse(instr.attrs["dimensions"]))
    if op == "broadcast":
        return broadcast_backward(t, tuple(instr.attrs["dimensions"]))
    if op == "reshape":
        return reshape_tiling(t, instr.shape.dims, instr.operands[0].shape.dims)
    if op == "reduce" and not instr.shape.is_tuple and index == 0:
        return reduce_backward(t, tuple(instr.attrs["dimensions"]), instr.operands[0].shape.rank)
    return window_rules.backward(instr, index, t)
