"""AlgebraicSimplifier rewrites of dynamic-slice and dynamic-update-slice (XLA's HandleDynamicSlice,
HandleDynamicUpdateSlice), in XLA's order; none apply inside async computations.

Indices clamp, so an index into a dimension the slice covers completely becomes 0, constant
indices turn a dynamic-slice into a slice with the clamped start, and a dynamic-update-slice of a
broadcast scalar at constant indices is a pad.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.attributes import PaddingConfig
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.passes.algsimp.base import (
    Rewriter, inverse_permutation, is_all, is_zero_element, known_constant, rewrite,
)
from hlo_opt.passes.algsimp.slicing import make_slice


# -- dynamic-slice ---------------------------------------------------------------------------------
def _moved_to_host(instr: HloInstruction) -> bool:
    """The update comes (through reshapes, bitcasts, copies) from a MoveToHost custom call."""
    while True:
        if instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") == "MoveToHost":
            return True
        if instr.opcode not in ("reshape", "bitcast", "copy"):
            return False
        instr = instr.operands[0]


@rewrite("dynamic-slice")
def dynamic_slice_is_whole_operand(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDynamicSlice: a dynamic-slice of a scalar or of its whole operand is the operand."""
    operand = instr.operands[0]
    if rw.is_async:
        return False
    return (instr.shape.rank == 0 or rw.same_shape(operand.shape, instr.shape)) and rw.replace(instr, operand)


def _zero_full_dim_indices(instr: HloInstruction, rw: Rewriter, first_index: int, sizes) -> bool:
    """Indices into dimensions the slice covers completely clamp to 0: make them constant 0."""
    full = [d for d, size in enumerate(sizes) if size == instr.operands[0].shape.dims[d]
            and not (instr.operands[first_index + d].opcode == "constant"
                     and is_all(instr.operands[first_index + d], 0))]
    if not full:
        return False
    zero = rw.scalar_like(instr.operands[first_index], 0)
    operands = list(instr.operands)
    for d in full:
        operands[first_index + d] = zero
    return rw.replace(instr, rw.clone(instr, operands))


@rewrite("dynamic-slice")
def dynamic_slice_zero_full_dim_index(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDynamicSlice: the index of a dimension the slice covers completely becomes 0."""
    return not rw.is_async and \
        _zero_full_dim_indices(instr, rw, 1, instr.shape.dims)


@rewrite("dynamic-slice")
def dynamic_slice_of_broadcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDynamicSlice: dynamic-slice(broadcast(x)) => broadcast(dynamic-slice(x)) over the
    dimensions x maps to."""
    bcast = instr.operands[0]
    if rw.is_async or bcast.opcode != "broadcast":
        return False
    x = bcast.operands[0]
    dims = bcast.attrs["dimensions"]
    sizes = tuple(instr.attrs["dynamic_slice_sizes"][d] for d in dims)
    small = x if not dims else rw.add(
        "dynamic-slice", [x, *[instr.operands[1 + d] for d in dims]],
        Shape.array(x.shape.element_type, sizes), {"dynamic_slice_sizes": sizes})
    return rw.replace(instr, rw.broadcast(small, instr.shape, dims))


@rewrite("dynamic-slice")
def dynamic_slice_of_transpose(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDynamicSlice (layout insensitive): dynamic-slice(transpose(x)) => transpose(dynamic-slice(x))."""
    t = instr.operands[0]
    if rw.is_async or rw.opts.is_layout_sensitive or t.opcode != "transpose":
        return False
    perm = t.attrs["dimensions"]
    inv = inverse_permutation(perm)
    sizes = tuple(instr.attrs["dynamic_slice_sizes"][inv[d]] for d in range(len(perm)))
    indices = [instr.operands[1 + inv[d]] for d in range(len(perm))]
    inner = rw.add("dynamic-slice", [t.operands[0], *indices], Shape.array(instr.shape.element_type, sizes),
                   {"dynamic_slice_sizes": sizes})
    return rw.replace_with_new(instr, "transpose", [inner], {"dimensions": perm})


@rewrite("dynamic-slice")
def dynamic_slice_to_slice(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDynamicSlice: constant non-negative integer indices and a non-constant operand => a
    slice starting at the clamped indices."""
    operand = instr.operands[0]
    indices = instr.operands[1:]
    if rw.is_async or rw.opts.disable_dynamic_slice_to_slice_conversion \
            or operand.opcode == "constant" \
            or not all(known_constant(i) and i.shape.element_type.is_integer for i in indices):
        return False
    starts = []
    for d, index in enumerate(indices):
        value = int(np.asarray(index.literal).reshape(-1)[0])
        if value < 0:
            return False
        starts.append(min(value, operand.shape.dims[d] - instr.shape.dims[d]))
    limits = [s + size for s, size in zip(starts, instr.shape.dims)]
    return rw.replace(instr, make_slice(rw, operand, starts, limits, shape=instr.shape))


def _nested_offsets(rw: Rewriter, outer, inner, outer_room, inner_room) -> list[HloInstruction]:
    """clamp(outer, 0, outer_room) + clamp(inner, 0, inner_room) per dimension, in outer's index type:
    the offset of a window inside a window, each index clamped as its own op would clamp it."""
    out = []
    for o, i, o_room, i_room in zip(outer, inner, outer_room, inner_room):
        parts = []
        for index, room in ((o, o_room), (i, i_room)):
            bounds = [rw.scalar_like(index, 0), index, rw.scalar_like(index, room)]
            clamped = rw.add("clamp", bounds, index.shape)
            if clamped.shape.element_type is not o.shape.element_type:
                clamped = rw.add("convert", [clamped], o.shape)
            parts.append(clamped)
        out.append(rw.binary("add", *parts, o.shape))
    return out


@rewrite("dynamic-slice")
def dynamic_slice_of_dynamic_slice(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDynamicSlice: ds(ds(x, i...), j...) => ds(x, clamp(i) + clamp(j)...). XLA clamps only i
    (to the final window); here each index is clamped to its own window, so the rewrite also holds
    for out-of-range indices."""
    inner = instr.operands[0]
    if rw.is_async or inner.opcode != "dynamic-slice":
        return False
    x = inner.operands[0]
    mid, out = inner.attrs["dynamic_slice_sizes"], instr.attrs["dynamic_slice_sizes"]
    offsets = _nested_offsets(rw, inner.operands[1:], instr.operands[1:],
                              [n - m for n, m in zip(x.shape.dims, mid)], [m - k for m, k in zip(mid, out)])
    return rw.replace(instr, rw.clone(instr, [x, *offsets]))


# -- dynamic-update-slice --------------------------------------------------------------------------
@rewrite("dynamic-update-slice")
def dus_of_broadcast_to_pad(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDynamicUpdateSlice: dus(broadcast(s), u, constant indices) => pad(u, s) with the
    clamped offsets as edge padding (not for updates bound for host memory)."""
    base, update = instr.operands[0], instr.operands[1]
    indices = instr.operands[2:]
    if rw.is_async or not rw.opts.enable_dynamic_update_slice_to_pad_replacement \
            or base.opcode != "broadcast" or base.operands[0].shape.rank != 0 or _moved_to_host(update) \
            or not all(known_constant(i) and i.shape.rank == 0 and i.shape.element_type.is_integer
                       for i in indices):
        return False
    config = []
    for d, index in enumerate(indices):
        width, total = update.shape.dims[d], base.shape.dims[d]
        start = min(max(int(np.asarray(index.literal)), 0), total - width)
        config.append((start, total - start - width, 0))
    pad = rw.add("pad", [update, base.operands[0]], instr.shape, {"padding": PaddingConfig(tuple(config))})
    return rw.replace(instr, pad)


@rewrite("dynamic-update-slice")
def dus_full_update(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDynamicUpdateSlice: an update as large as the operand replaces it."""
    return not rw.is_async and rw.same_shape(instr.shape, instr.operands[1].shape) \
        and rw.replace(instr, instr.operands[1])


@rewrite("dynamic-update-slice")
def dus_zero_full_dim_index(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDynamicUpdateSlice: the index of a dimension the update covers completely becomes 0."""
    return not rw.is_async and \
        _zero_full_dim_indices(instr, rw, 2, instr.operands[1].shape.dims)


@rewrite("dynamic-update-slice")
def dus_of_empty_update(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDynamicUpdateSlice: an update with no elements leaves the operand unchanged."""
    return not rw.is_async and is_zero_element(instr.operands[1].shape) \
        and rw.replace(instr, instr.operands[0])


@rewrite("dynamic-update-slice")
def dus_of_dus_of_own_slice(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDynamicUpdateSlice: dus(a, dus(ds(a, i...), c, j...), i...) => dus(a, c, clamp(i) +
    clamp(j)...). XLA clamps only j; here both, so out-of-range indices keep their meaning."""
    a, inner = instr.operands[0], instr.operands[1]
    indices = instr.operands[2:]
    if rw.is_async or inner.opcode != "dynamic-update-slice":
        return False
    window = inner.operands[0]
    if window.opcode != "dynamic-slice" or window.operands[0] is not a \
            or any(x is not y for x, y in zip(indices, window.operands[1:])):
        return False
    c = inner.operands[1]
    offsets = _nested_offsets(rw, indices, inner.operands[2:],
                              [n - m for n, m in zip(a.shape.dims, inner.shape.dims)],
                              [m - k for m, k in zip(inner.shape.dims, c.shape.dims)])
    return rw.replace(instr, rw.clone(instr, [a, c, *offsets]))
