"""AlgebraicSimplifier rewrites of reduce and reduce-window (XLA's HandleReduce, HandleReduceWindow),
in XLA's order; dots, gathers, scatters, sorts, maps and tuples are in `dots` and `misc`.

A reduce that keeps its element count is a reshape; reduces see through transposes, reshapes,
concatenates, broadcasts and other reduces with the same reducer; after layout assignment only the
reshape form applies (as a bitcast-compatible reshape).
"""

from __future__ import annotations

import math

import numpy as np

from hlo_common.hlo.attributes import PaddingConfig
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.passes.algsimp.arg_min_max import (
    is_scalar_constant_inf, is_scalar_constant_neg_inf, match_arg_max, match_arg_min,
)
from hlo_opt.passes.algsimp.base import (
    Rewriter, is_all, is_scalar_constant, is_zero_element, known_constant, reduction_kind, rewrite,
)
from hlo_opt.passes.algsimp.shapes import (
    delete_dimensions, dimensions_unmodified_by_reshape, reshape_is_bitcast,
)


def _inputs(reduce: HloInstruction) -> list[HloInstruction]:
    return reduce.operands[:len(reduce.operands) // 2]


def _inits(reduce: HloInstruction) -> list[HloInstruction]:
    return reduce.operands[len(reduce.operands) // 2:]


def _result_shapes(instr: HloInstruction) -> list[Shape]:
    return list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]


def _dims(instr: HloInstruction) -> tuple[int, ...]:
    return tuple(instr.attrs["dimensions"])


def make_reduce(rw: Rewriter, x: HloInstruction, init: HloInstruction, dims, fn: HloComputation,
                shape: Shape | None = None) -> HloInstruction:
    shape = shape or Shape.array(x.shape.element_type, delete_dimensions(x.shape.dims, dims))
    return rw.add("reduce", [x, init], shape, {"dimensions": tuple(sorted(dims)), "to_apply": fn})


def _single(instr: HloInstruction) -> bool:
    return not instr.shape.is_tuple


# -- reduce ----------------------------------------------------------------------------------------
@rewrite("reduce")
def reduce_of_zero_elements(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce: reducing an empty array, or to an empty result, gives the broadcast init value."""
    x, shapes = _inputs(instr)[0], _result_shapes(instr)
    if not (is_zero_element(x.shape) or is_zero_element(shapes[0])):
        return False
    parts = [rw.broadcast(init, s, ()) for init, s in zip(_inits(instr), shapes)]
    return rw.replace(instr, parts[0] if _single(instr) else rw.add("tuple", parts, instr.shape))


@rewrite("reduce")
def reduce_to_reshape(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce: a reduce that keeps the element count (only size-1 dimensions reduced) is a
    reshape of each input (after layout assignment only where the reshape is a bitcast)."""
    shapes = _result_shapes(instr)
    x = _inputs(instr)[0]
    if shapes[0].num_elements != x.shape.num_elements:
        return False
    if rw.opts.is_layout_sensitive and not reshape_is_bitcast(x.shape, shapes[0]):
        return False
    parts = [rw.reshape(i, s.dims, s) for i, s in zip(_inputs(instr), shapes)]
    return rw.replace(instr, parts[0] if _single(instr) else rw.add("tuple", parts, instr.shape))


def _zero_init_add(instr: HloInstruction) -> bool:
    init = _inits(instr)[0]
    return is_scalar_constant(init) and is_all(init, 0) and reduction_kind(instr.attrs["to_apply"]) == "add"


@rewrite("reduce")
def reduce_of_negate(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce (layout insensitive): sum(-x) with init 0 => -sum(x), floats (exact in IEEE)."""
    x = _inputs(instr)[0]
    if rw.opts.is_layout_sensitive or not _single(instr) or not instr.shape.element_type.is_float \
            or x.opcode != "negate" or not _zero_init_add(instr):
        return False
    rw.set_operand(instr, 0, x.operands[0])
    rw.replace_uses(instr, rw.add("negate", [instr], instr.shape))
    return True


def _multi_or_sensitive(instr: HloInstruction, rw: Rewriter) -> bool:
    return rw.opts.is_layout_sensitive or not _single(instr)


@rewrite("reduce")
def reduce_of_transpose(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce: reduce(transpose(x)) => reduce(x) over the permuted dimensions, transposed after
    when the kept dimensions change order (always on GPU, else only for small results or one user)."""
    t = _inputs(instr)[0]
    if _multi_or_sensitive(instr, rw) or t.opcode != "transpose" or not (
            rw.opts.unconditionally_simplify_reduce_of_transpose_or_reshape or instr.shape.rank < 2
            or len(t.users) == 1 or all(u.opcode == "reduce" for u in t.users)):
        return False
    perm = _dims(t)
    reduced = [perm[d] for d in _dims(instr)]
    inner = make_reduce(rw, t.operands[0], _inits(instr)[0], reduced, instr.attrs["to_apply"])
    kept = [d for d in perm if d not in reduced]
    if kept == sorted(kept):
        return rw.replace(instr, inner)
    renumbered = tuple(d - sum(1 for r in reduced if r < d) for d in kept)
    return rw.replace(instr, rw.add("transpose", [inner], None, {"dimensions": renumbered}))


def _same_value(a: HloInstruction, b: HloInstruction) -> bool:
    """XLA's Identical for init values: the same instruction or equal known constants."""
    if a is b:
        return True
    return known_constant(a) and known_constant(b) and a.shape == b.shape \
        and np.array_equal(np.asarray(a.literal), np.asarray(b.literal))


def _equivalent_reducers(a: HloComputation, b: HloComputation) -> bool:
    if a is b:
        return True
    kind = reduction_kind(a)
    return kind in ("add", "multiply", "and", "or") and kind == reduction_kind(b)


@rewrite("reduce")
def reduce_of_reduce(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce: reduce(reduce(x, dims1), dims2) with the same init value and an equivalent
    reducer => one reduce over both sets of dimensions."""
    inner = _inputs(instr)[0]
    init, fn = _inits(instr)[0], instr.attrs["to_apply"]
    if _multi_or_sensitive(instr, rw) or inner.opcode != "reduce" or not _single(inner) \
            or not _same_value(init, inner.operands[1]) \
            or not _equivalent_reducers(fn, inner.attrs["to_apply"]):
        return False
    first = sorted(_dims(inner))
    second = sorted(_dims(instr))
    for d in first:
        second = [s + 1 if s >= d else s for s in second]
    return rw.replace(instr, make_reduce(rw, inner.operands[0], init, first + second, fn, instr.shape))


def _reshape_dim_maps(instr: HloInstruction, reshape: HloInstruction):
    pairs = dimensions_unmodified_by_reshape(reshape.operands[0].shape.dims, reshape.shape.dims)
    kept = [d not in set(_dims(instr)) for d in range(reshape.shape.rank)]
    return pairs, kept, {out: inp for inp, out in pairs}


@rewrite("reduce")
def reduce_of_reshape_merged_dims(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce (enable_reduce_of_reshape, case 1): when every kept dimension passes the reshape
    unmodified, reduce(reshape(x)) => reduce(x) over all other dimensions of x."""
    r = _inputs(instr)[0]
    if _multi_or_sensitive(instr, rw) or not rw.opts.enable_reduce_of_reshape or r.opcode != "reshape":
        return False
    pairs, kept, out_to_in = _reshape_dim_maps(instr, r)
    if any(k and d not in out_to_in for d, k in enumerate(kept)):
        return False
    keep_in = {inp for inp, out in pairs if kept[out]}
    dims = [d for d in range(r.operands[0].shape.rank) if d not in keep_in]
    return rw.replace(instr, make_reduce(rw, r.operands[0], _inits(instr)[0], dims, instr.attrs["to_apply"],
                                         instr.shape))


@rewrite("reduce")
def reduce_before_reshape(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce (enable_reduce_of_reshape, case 2): when the reshape only changes kept
    dimensions, reduce(reshape(x)) => reshape(reduce(x)), reducing the smaller array first."""
    r = _inputs(instr)[0]
    if _multi_or_sensitive(instr, rw) or not rw.opts.enable_reduce_of_reshape or r.opcode != "reshape" \
            or not (len(r.users) == 1 or rw.opts.unconditionally_simplify_reduce_of_transpose_or_reshape):
        return False
    _pairs, _kept, out_to_in = _reshape_dim_maps(instr, r)
    if not all(d in out_to_in for d in _dims(instr)):
        return False
    inner = make_reduce(rw, r.operands[0], _inits(instr)[0], [out_to_in[d] for d in _dims(instr)],
                        instr.attrs["to_apply"])
    return rw.replace(instr, rw.reshape(inner, instr.shape.dims, instr.shape))


@rewrite("reduce")
def reduce_of_concat(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce: reducing across the concatenated dimension => map(reduce(a), reduce(b), ...)
    with the reducer, when the pieces have one shape or the result is a scalar (GPU setting)."""
    concat = _inputs(instr)[0]
    if _multi_or_sensitive(instr, rw) or concat.opcode != "concatenate" \
            or concat.attrs["dimensions"][0] not in _dims(instr):
        return False
    same = all(o.shape.dims == concat.operands[0].shape.dims for o in concat.operands)
    if not (rw.opts.enable_unconditional_reduce_of_concat_replacement or same or instr.shape.rank == 0):
        return False
    fn, init = instr.attrs["to_apply"], _inits(instr)[0]
    total = None
    for piece in concat.operands:
        part = make_reduce(rw, piece, init, _dims(instr), fn, instr.shape)
        if total is not None:
            part = rw.add("map", [total, part], instr.shape,
                          {"dimensions": tuple(range(instr.shape.rank)), "to_apply": fn})
        total = part
    return rw.replace(instr, total)


def _value_of_arg_reduce(instr: HloInstruction, rw: Rewriter, kind: str, init_ok, match) -> bool:
    """Replace a `kind` reduce with output 0 of an arg-`kind` reduce of the same operand and
    dimensions (the first one in the operand's user list, as XLA's c_find_if)."""
    if _multi_or_sensitive(instr, rw) or not init_ok(_inits(instr)[0]) \
            or reduction_kind(instr.attrs["to_apply"]) != kind:
        return False
    x = _inputs(instr)[0]
    for user in x.users:
        if user is not instr and user.operands[0] is x and match(user) and _dims(user) == _dims(instr):
            return rw.replace_with_new(instr, "get-tuple-element", [user], {"index": 0}, instr.shape)
    return False


@rewrite("reduce")
def reduce_max_from_arg_max(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce: a max reduce from -inf of x beside an arg-max reduce of x over the same
    dimensions => get-tuple-element(arg-max, 0); one reduction instead of two (jnp.max beside
    jnp.argmax)."""
    return _value_of_arg_reduce(instr, rw, "maximum", is_scalar_constant_neg_inf, match_arg_max)


@rewrite("reduce")
def reduce_min_from_arg_min(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce: a min reduce from +inf of x beside an arg-min reduce of x over the same
    dimensions => get-tuple-element(arg-min, 0)."""
    return _value_of_arg_reduce(instr, rw, "minimum", is_scalar_constant_inf, match_arg_min)


@rewrite("reduce")
def reduce_of_scalar_broadcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce: max/min/and/or of a broadcast scalar over all dimensions => op(scalar, init)."""
    b = _inputs(instr)[0]
    kind = reduction_kind(instr.attrs["to_apply"])
    if _multi_or_sensitive(instr, rw) or b.opcode != "broadcast" or b.operands[0].shape.rank != 0 \
            or kind not in ("maximum", "minimum", "and", "or") or len(_dims(instr)) != b.shape.rank:
        return False
    return rw.replace_with_new(instr, kind, [b.operands[0], _inits(instr)[0]])


@rewrite("reduce")
def reduce_of_broadcast_commute(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce (layout insensitive): when only dimensions of the broadcast operand are reduced,
    reduce(broadcast(x)) => broadcast(reduce(x)), reducing before replicating."""
    b = _inputs(instr)[0]
    if _multi_or_sensitive(instr, rw) or b.opcode != "broadcast":
        return False
    bdims = list(_dims(b))
    if not all(d in bdims for d in _dims(instr)):
        return False
    reduced = [bdims.index(d) for d in _dims(instr)]
    inner = make_reduce(rw, b.operands[0], _inits(instr)[0], reduced, instr.attrs["to_apply"])
    dims = [bdims[k] - sum(1 for d in _dims(instr) if d < bdims[k])
            for k in range(len(bdims)) if k not in reduced]
    return rw.replace(instr, rw.broadcast(inner, instr.shape, dims))


@rewrite("reduce")
def reduce_of_broadcast_sum(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduce: summing only dimensions a (sorted) broadcast added => broadcast(init + x * n),
    n the number of summed copies."""
    b = _inputs(instr)[0]
    if _multi_or_sensitive(instr, rw) or b.opcode != "broadcast" or b.shape.element_type.is_pred \
            or reduction_kind(instr.attrs["to_apply"]) != "add" or list(_dims(b)) != sorted(_dims(b)):
        return False
    reduce_dims = set(_dims(instr))
    if reduce_dims & set(_dims(b)):
        return False
    count = math.prod(b.shape.dims[d] for d in reduce_dims)
    kept = [d for d in range(b.shape.rank) if d not in reduce_dims]
    dims = [kept.index(d) for d in _dims(b)]
    x = b.operands[0]
    scaled = rw.binary("multiply", x, rw.scalar_like(x, count))
    total = rw.binary("add", rw.broadcast(_inits(instr)[0], scaled.shape, ()), scaled)
    return rw.replace(instr, rw.broadcast(total, instr.shape, dims))


# -- reduce-window ---------------------------------------------------------------------------------
def _window(instr: HloInstruction):
    return instr.attrs["window"].dims


@rewrite("reduce-window")
def reduce_window_of_zero_elements(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduceWindow: an empty input or output gives the broadcast init values."""
    shapes = _result_shapes(instr)
    if not (is_zero_element(_inputs(instr)[0].shape) or is_zero_element(shapes[0])):
        return False
    parts = [rw.broadcast(init, s, ()) for init, s in zip(_inits(instr), shapes)]
    return rw.replace(instr, parts[0] if _single(instr) else rw.add("tuple", parts, instr.shape))


@rewrite("reduce-window")
def reduce_window_of_scalar(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduceWindow: a reduce-window of scalars is its input (as XLA, the init is not applied)."""
    inputs = _inputs(instr)
    if inputs[0].shape.rank != 0 or (not _single(instr) and instr.attrs["to_apply"].root.opcode != "tuple"):
        return False
    return rw.replace(instr, inputs[0] if _single(instr) else rw.add("tuple", inputs, instr.shape))


@rewrite("reduce-window")
def reduce_window_of_unit_window(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduceWindow: a 1x..x1 window (no stride, dilation or reversal) with an add/min/max
    reducer => op(x, broadcast(init)), padded with init where the window pads."""
    kind = reduction_kind(instr.attrs["to_apply"])
    if not _single(instr) or kind not in ("add", "minimum", "maximum") or not all(
            w.size == 1 and w.stride == 1 and w.window_dilation == 1 and w.base_dilation == 1
            and not w.window_reversal for w in _window(instr)):
        return False
    x, init = instr.operands
    result = rw.binary(kind, x, rw.broadcast(init, x.shape, ()))
    if any(w.padding_low > 0 or w.padding_high > 0 for w in _window(instr)):
        config = PaddingConfig(tuple((w.padding_low, w.padding_high, 0) for w in _window(instr)))
        result = rw.add("pad", [result, init], None, {"padding": config})
    return rw.replace(instr, result)


@rewrite("reduce-window")
def reduce_window_to_reduce(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReduceWindow (enable_window_reduce_to_reduce_replacement): windows that are either 1
    or a whole dimension (no stride, dilation or padding) => reshape(reduce)."""
    if not _single(instr) or not rw.opts.enable_window_reduce_to_reduce_replacement:
        return False
    dims = []
    for d, w in enumerate(_window(instr)):
        if w.stride != 1 or w.window_dilation != 1 or w.base_dilation != 1 or w.padding_low or w.padding_high:
            return False
        if w.size != 1:
            if instr.shape.dims[d] != 1:
                return False
            dims.append(d)
    if not dims:
        return False
    x, init = instr.operands
    inner = make_reduce(rw, x, init, dims, instr.attrs["to_apply"],
                        Shape.array(instr.shape.element_type, delete_dimensions(instr.shape.dims, dims)))
    return rw.replace(instr, rw.reshape(inner, instr.shape.dims, instr.shape))
