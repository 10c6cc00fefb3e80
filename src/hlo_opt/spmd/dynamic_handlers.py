"""dynamic-slice and dynamic-update-slice along a tiled dim they take only in part (XLA's
HandleDynamicSlice / HandleDynamicUpdateSlice in xla/service/spmd/spmd_partitioner.cc): a
KV cache split along the sequence, updated or read at a position only known at run time.

- dynamic-update-slice: no communication. Each device reads, for every element of its tile,
  the update element that lands there (the update padded by a tile on both sides and cut at the
  tile's offset from the clamped start) and keeps it where the element lies inside the update's
  span, its own value elsewhere.
- dynamic-slice: each device cuts the slice from its tile padded with zeros on both sides (what
  it does not hold reads zero), zeroes the whole slice if it holds none of it, and an all-reduce
  over the devices along the split dims adds the pieces; chosen where it sends fewer bytes than
  making the dims whole.
Where these do not apply, the handlers of `hlo_opt.spmd.window_handlers` make the dims whole.
"""

from __future__ import annotations

from hlo_common.hlo.attributes import PaddingConfig
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.hlo.hlo_creation_utils import make_constant
from hlo_common.hlo.ir import HloInstruction
from hlo_opt.spmd import window_handlers
from hlo_opt.spmd.reshard import reshard_cost
from hlo_opt.spmd.tiling import Tiling

S32, PRED = PRIMITIVE_TYPES["s32"], PRIMITIVE_TYPES["pred"]


def _scalar(p, value, et=S32):
    return make_constant(p.b.comp, value, et)


def _clamped_start(p, start, limit: int):
    """The start as s32, clamped to [0, limit] as the op clamps it."""
    s = p.get(start, p.replicated(start.shape))
    if s.shape.element_type != S32:
        s = p.b.add("convert", [s], s.shape.with_element_type(S32))
    return p.b.add("clamp", [_scalar(p, 0), s, _scalar(p, limit)], s.shape)


def _tile_first(p, t: Tiling, d: int, rows: int, plus: int = 0):
    return p.b.per_partition([int(c) * rows + plus for c in t.coords[:, d]])


def _pad(p, x, pads: dict):
    """`x` padded with zeros by pads[d] on both sides of each dim d."""
    config = tuple((pads.get(d, 0), pads.get(d, 0), 0) for d in range(x.shape.rank))
    dims = tuple(n + 2 * pads.get(d, 0) for d, n in enumerate(x.shape.dims))
    zero = _scalar(p, 0, x.shape.element_type)
    return p.b.add("pad", [x, zero], x.shape.with_dims(dims), {"padding": PaddingConfig(config)})


def _binary(p, op, a, b, shape):
    return p.b.add(op, [a, b], shape)


def handle_dynamic_update_slice(p, instr: HloInstruction) -> bool:
    operand, update, starts = instr.operands[0], instr.operands[1], instr.operands[2:]
    want = p.wanted(instr)
    partial = [d for d, (n, u) in enumerate(zip(operand.shape.dims, update.shape.dims)) if n != u]
    if any(s.shape.rank for s in starts) or not any(want.tiles[d] > 1 for d in partial) \
            or want.local_dims(operand.shape.dims) is None:
        return window_handlers.handle_dynamic_update_slice(p, instr)
    upd_t = want.to_replication(partial)
    if upd_t.local_dims(update.shape.dims) is None:
        return window_handlers.handle_dynamic_update_slice(p, instr)
    x, upd = p.get(operand, want), p.get(update, upd_t)
    local = x.shape
    rows = {d: local.dims[d] for d in partial}
    padded = _pad(p, upd, rows)
    cut = [p.b.zero()] * local.rank
    mask = None
    pred = local.with_element_type(PRED)
    for d in partial:
        u, full = update.shape.dims[d], operand.shape.dims[d]
        s = _clamped_start(p, starts[d], full - u)
        cut[d] = _binary(p, "subtract", _tile_first(p, want, d, rows[d], plus=rows[d]), s, s.shape)
        index = p.b.add("iota", [], local.with_element_type(S32), {"iota_dimension": d})
        first = p.b.add("broadcast", [_tile_first(p, want, d, rows[d])], index.shape, {"dimensions": ()})
        index = _binary(p, "add", index, first, index.shape)
        lo = p.b.add("broadcast", [s], index.shape, {"dimensions": ()})
        end = _binary(p, "add", s, _scalar(p, u), s.shape)
        hi = p.b.add("broadcast", [end], index.shape, {"dimensions": ()})
        inside = _binary(p, "and", p.b.add("compare", [index, lo], pred, {"direction": "GE"}),
                         p.b.add("compare", [index, hi], pred, {"direction": "LT"}), pred)
        mask = inside if mask is None else _binary(p, "and", mask, inside, pred)
    values = p.b.add("dynamic-slice", [padded] + cut, local, {"dynamic_slice_sizes": local.dims})
    new = p.b.add("select", [mask, values, x], local)
    p.values[instr] = (new, want)
    return True


def handle_dynamic_slice(p, instr: HloInstruction) -> bool:
    operand, starts = instr.operands[0], instr.operands[1:]
    have = p.values[operand][1]
    partial = [d for d, (n, u) in enumerate(zip(operand.shape.dims, instr.shape.dims)) if n != u]
    split = [d for d in partial if have.tiles[d] > 1]
    if any(s.shape.rank for s in starts) or not split or have.local_dims(operand.shape.dims) is None:
        return window_handlers.handle_dynamic_slice(p, instr)
    out = have.to_replication(split)
    want = p.wanted(instr)
    groups = 1
    for d in split:
        groups *= have.tiles[d]
    size = 1
    for n in instr.shape.dims:
        size *= n
    cost = 2 * size / out.num_tiles * (groups - 1) / groups + reshard_cost(instr.shape.dims, out, want)
    whole = want.to_replication(partial)
    made_whole = reshard_cost(operand.shape.dims, have, whole) + reshard_cost(instr.shape.dims, whole, want)
    if whole.local_dims(operand.shape.dims) is not None and made_whole <= cost:
        return window_handlers.handle_dynamic_slice(p, instr)
    return _sliced_and_summed(p, instr, have, split, out)


def _sliced_and_summed(p, instr, have: Tiling, split: list[int], out: Tiling) -> bool:
    operand, starts = instr.operands[0], instr.operands[1:]
    x = p.get(operand, have)
    rows = {d: x.shape.dims[d] for d in split}
    sizes = {d: instr.shape.dims[d] for d in split}
    padded = _pad(p, x, sizes)
    local = p.local(instr.shape, out, instr)
    scalar_pred = x.shape.with_dims(()).with_element_type(PRED)
    cut, holds = [], None
    for d, start in enumerate(starts):
        full, u = instr.operands[0].shape.dims[d], instr.shape.dims[d]
        s = _clamped_start(p, start, full - u)
        if d not in split:
            cut.append(s)
            continue
        first = _tile_first(p, have, d, rows[d])
        cut.append(_binary(p, "add", _binary(p, "subtract", s, first, s.shape), _scalar(p, u), s.shape))
        # holds part of the slice: s < first + rows and s + u > first
        end = _binary(p, "add", first, _scalar(p, rows[d]), s.shape)
        a = p.b.add("compare", [s, end], scalar_pred, {"direction": "LT"})
        b = p.b.add("compare", [_binary(p, "add", s, _scalar(p, u), s.shape), first], scalar_pred,
                    {"direction": "GT"})
        both = _binary(p, "and", a, b, scalar_pred)
        holds = both if holds is None else _binary(p, "and", holds, both, scalar_pred)
    piece = p.b.add("dynamic-slice", [padded] + cut, local, {"dynamic_slice_sizes": local.dims})
    zero = p.b.add("broadcast", [_scalar(p, 0, local.element_type)], local, {"dimensions": ()})
    mask = p.b.add("broadcast", [holds], local.with_element_type(PRED), {"dimensions": ()})
    piece = p.b.add("select", [mask, piece, zero], local)
    add = p.b.reducer("add", local.element_type)
    p.values[instr] = (p.b.all_reduce(piece, have.groups(split), add), out)
    return True


HANDLERS = {"dynamic-slice": handle_dynamic_slice, "dynamic-update-slice": handle_dynamic_update_slice}
