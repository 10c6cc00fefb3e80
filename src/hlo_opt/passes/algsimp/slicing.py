"""AlgebraicSimplifier rewrites of slice, concatenate and pad (XLA's HandleSlice,
HandleConcatenate, HandlePad), in XLA's order; dynamic slices are in `dynamic_slicing`.

Slices see through pads, slices, broadcasts, concatenates, reshapes and reverses to the data they
read; concatenates flatten, lose empty operands and merge adjacent slices of one array.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.attributes import PaddingConfig, SliceSpec
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.passes.algsimp.base import Rewriter, is_zero_element, rewrite


def _spec(instr: HloInstruction) -> tuple[tuple[int, int, int], ...]:
    return instr.attrs["slice"].dims


def _unstrided(instr: HloInstruction) -> bool:
    return all(st == 1 for _s, _l, st in _spec(instr))


def make_slice(rw: Rewriter, operand: HloInstruction, starts, limits, strides=None,
               shape: Shape | None = None) -> HloInstruction:
    strides = strides or [1] * len(starts)
    spec = SliceSpec(tuple(zip(starts, limits, strides)))
    return rw.add("slice", [operand], shape, {"slice": spec})


def _padding(instr: HloInstruction) -> tuple[tuple[int, int, int], ...]:
    return instr.attrs["padding"].dims


# -- slice -----------------------------------------------------------------------------------------
@rewrite("slice")
def slice_is_noop(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSlice: a slice that keeps the whole operand is removed."""
    return rw.replace_if_compatible(instr, instr.operands[0])


@rewrite("slice")
def slice_of_pad(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSlice: slice(pad(x)) that reads only padding => broadcast(pad value); that undoes the
    pad exactly => x; that stays inside x (no interior padding) => slice(x)."""
    pad = instr.operands[0]
    if pad.opcode != "pad":
        return False
    undoes, inside = True, True
    starts, limits = [], []
    for (start, limit, stride), (low, high, interior), size in zip(
            _spec(instr), _padding(pad), pad.shape.dims):
        if limit <= low or start >= size - high:
            return rw.replace(instr, rw.broadcast(pad.operands[1], instr.shape, ()))
        undoes &= start == low and stride - 1 == interior
        inside &= start >= low and limit <= size - high and interior == 0 and stride == 1
        starts.append(start - low)
        limits.append(limit - low)
    if undoes and rw.replace_if_compatible(instr, pad.operands[0]):
        return True
    if inside:
        strides = [st for _s, _l, st in _spec(instr)]
        return rw.replace(instr, make_slice(rw, pad.operands[0], starts, limits, strides, instr.shape))
    return False


@rewrite("slice")
def slice_of_slice(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSlice: slice(slice(x)) of unstrided slices => one slice of x."""
    inner = instr.operands[0]
    if inner.opcode != "slice" or not _unstrided(instr) or not _unstrided(inner):
        return False
    offsets = [s for s, _l, _st in _spec(inner)]
    starts = [s + o for (s, _l, _st), o in zip(_spec(instr), offsets)]
    limits = [lim + o for (_s, lim, _st), o in zip(_spec(instr), offsets)]
    return rw.replace(instr, make_slice(rw, inner.operands[0], starts, limits, shape=instr.shape))


@rewrite("slice")
def slice_of_broadcast_only_new_dims(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSlice: a slice of a broadcast that keeps every dimension of the broadcast operand
    whole => the broadcast to the sliced shape."""
    bcast = instr.operands[0]
    if bcast.opcode != "broadcast":
        return False
    for d in bcast.attrs["dimensions"]:
        start, limit, stride = _spec(instr)[d]
        if start != 0 or stride != 1 or limit != bcast.shape.dims[d]:
            return False
    return rw.replace_with_new(instr, "broadcast", [bcast.operands[0]],
                               {"dimensions": bcast.attrs["dimensions"]})


@rewrite("slice")
def slice_scalar_of_concat(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSlice (TrySimplifyScalarSlice): a one-element slice of a rank-1 concatenate reads
    one operand: that operand, or a one-element slice of it."""
    concat = instr.operands[0]
    if concat.opcode != "concatenate" or instr.shape.rank != 1 or instr.shape.num_elements != 1:
        return False
    start = _spec(instr)[0][0]
    offset = 0
    for part in concat.operands:
        if offset + part.shape.dims[0] > start:
            break
        offset += part.shape.dims[0]
    if rw.replace_if_compatible(instr, part):
        return True
    return rw.replace(instr, make_slice(rw, part, [start - offset], [start - offset + 1], shape=instr.shape))


@rewrite("slice")
def slice_of_broadcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSlice: slice(broadcast(x)) => broadcast(slice(x)), the slice of the dimensions x maps to."""
    bcast = instr.operands[0]
    if bcast.opcode != "broadcast":
        return False
    x = bcast.operands[0]
    dims = bcast.attrs["dimensions"]
    spec = [_spec(instr)[d] for d in dims]
    sizes = [(lim - s + st - 1) // st for s, lim, st in spec]
    small = make_slice(rw, x, *zip(*spec), shape=Shape.array(x.shape.element_type, sizes)) if spec else x
    return rw.replace(instr, rw.broadcast(small, instr.shape, dims))


def _concat_pieces(instr: HloInstruction, concat: HloInstruction):
    """(first operand, end operand, offset of the first) covering the slice along the concat dim."""
    dim = concat.attrs["dimensions"][0]
    start, limit, _ = _spec(instr)[dim]
    first = end = None
    offset = first_offset = 0
    for k, piece in enumerate(concat.operands):
        size = piece.shape.dims[dim]
        if first is None and offset <= start < offset + size:
            first, first_offset = k, offset
        offset += size
        if end is None and offset >= limit:
            end = k + 1
            break
    return first, end, first_offset


@rewrite("slice")
def slice_of_concat(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSlice: an unstrided slice of a concatenate that falls within some of its operands =>
    that operand (same shape), or a slice of the narrower concatenate of those operands."""
    concat = instr.operands[0]
    if concat.opcode != "concatenate" or not _unstrided(instr):
        return False
    first, end, offset = _concat_pieces(instr, concat)
    if first is None or end is None:
        return False
    if end == first + 1 and rw.same_shape(concat.operands[first].shape, instr.shape):
        return rw.replace(instr, concat.operands[first])
    if end - first >= len(concat.operands):
        return False
    dim = concat.attrs["dimensions"][0]
    operand = concat.operands[first]
    if end != first + 1:
        operand = rw.add("concatenate", concat.operands[first:end], None, {"dimensions": (dim,)})
    starts = [s for s, _l, _st in _spec(instr)]
    limits = [lim for _s, lim, _st in _spec(instr)]
    starts[dim] -= offset
    limits[dim] = starts[dim] + instr.shape.dims[dim]
    return rw.replace(instr, make_slice(rw, operand, starts, limits, shape=instr.shape))


@rewrite("slice")
def slice_of_reshape(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSlice (TryToReorderSliceAndReshape, layout insensitive): an unstrided slice of a reshape
    along dimension 0 only => reshape(slice(x)) when the sliced rows are a contiguous block of x."""
    reshape = instr.operands[0]
    if rw.opts.is_layout_sensitive or reshape.opcode != "reshape" or not _unstrided(instr):
        return False
    sliced = [d for d, (s, lim, _st) in enumerate(_spec(instr)) if s != 0 or lim != reshape.shape.dims[d]]
    if sliced != [0]:
        return False
    x = reshape.operands[0]
    block = _contiguous_block(x.shape.dims, _spec(instr)[0][0] * int(np.prod(reshape.shape.dims[1:])),
                              instr.shape.num_elements)
    if block is None:
        return False
    part = make_slice(rw, x, *block, shape=Shape.array(x.shape.element_type, [b - a for a, b in zip(*block)]))
    return rw.replace(instr, rw.reshape(part, instr.shape.dims, instr.shape))


def _contiguous_block(dims, offset: int, count: int):
    """(starts, limits) of the box of `dims` holding row-major elements [offset, offset + count)."""
    rank = len(dims)
    inner = int(np.prod(dims[1:])) if rank else 1
    if inner == 0 or offset % inner or count % inner:
        return None
    starts, limits = [0] * rank, list(dims)
    for i in range(rank - 1, -1, -1):
        size = dims[i]
        if count >= size:
            if count % size or offset % size:
                return None
            count //= size
            offset //= size
        else:
            begin = offset % size
            if begin + count > size:
                return None
            starts[i], limits[i] = begin, begin + count
            offset //= size
            count = 1
    return (starts, limits) if offset == 0 and count == 1 else None


@rewrite("slice")
def slice_of_reverse(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSlice (TryToReorderSliceAndReverse): slice(reverse(x)) => reverse(slice(x)) with the
    window mirrored in the reversed dimensions."""
    rev = instr.operands[0]
    if rev.opcode != "reverse":
        return False
    starts, limits, strides = (list(v) for v in zip(*_spec(instr)))
    for d in rev.attrs["dimensions"]:
        start, limit, stride = _spec(instr)[d]
        last = start + ((limit - start - 1) // stride) * stride
        size = rev.shape.dims[d]
        starts[d], limits[d] = size - 1 - last, size - start
    inner = make_slice(rw, rev.operands[0], starts, limits, strides, instr.shape)
    return rw.replace_with_new(instr, "reverse", [inner], {"dimensions": rev.attrs["dimensions"]})


@rewrite("slice")
def slice_redundant_stride(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleSlice (RemoveRedundantStride): a stride that can only ever take one element becomes 1."""
    spec = _spec(instr)
    if all(st == 1 or not (st >= lim or s + st >= lim) for s, lim, st in spec):
        return False
    new = tuple((s, s + 1, 1) if st != 1 and (st >= lim or s + st >= lim) else (s, lim, st)
                for s, lim, st in spec)
    return rw.replace_with_new(instr, "slice", [instr.operands[0]], {"slice": SliceSpec(new)})


# -- concatenate -----------------------------------------------------------------------------------
@rewrite("concatenate")
def concat_of_one_operand(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConcatenate: a concatenate of one operand is that operand."""
    return len(instr.operands) == 1 and rw.replace_if_compatible(instr, instr.operands[0])


@rewrite("concatenate")
def concat_drop_empty_operands(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConcatenate: zero-element operands are dropped (one left: it replaces the concatenate)."""
    kept = [o for o in instr.operands if not is_zero_element(o.shape)]
    if len(kept) == len(instr.operands):
        return False
    if len(kept) <= 1:
        return rw.replace_if_compatible(instr, kept[0] if kept else instr.operands[0])
    return rw.replace_if_compatible(instr, rw.clone(instr, kept))


@rewrite("concatenate")
def concat_flatten_nested(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConcatenate (layout insensitive): concat(x, concat(y, z)) along one dimension =>
    concat(x, y, z)."""
    if rw.opts.is_layout_sensitive:
        return False
    dim = instr.attrs["dimensions"]
    flat = []
    for o in instr.operands:
        flat.extend(o.operands if o.opcode == "concatenate" and o.attrs["dimensions"] == dim else [o])
    return len(flat) != len(instr.operands) and \
        rw.replace_with_new(instr, "concatenate", flat, {"dimensions": dim})


def _adjacent(a: HloInstruction, b: HloInstruction, dim: int, end: int) -> bool:
    return b.opcode == "slice" and _unstrided(b) and b.operands[0] is a.operands[0] \
        and _spec(b)[dim][0] == end \
        and all(_spec(a)[k][0] == _spec(b)[k][0] for k in range(len(_spec(a))) if k != dim)


@rewrite("concatenate")
def concat_merge_adjacent_slices(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConcatenate (layout insensitive): consecutive unstrided slices of one operand that are
    adjacent along the concatenated dimension merge into one slice."""
    if rw.opts.is_layout_sensitive:
        return False
    dim = instr.attrs["dimensions"][0]
    ops = instr.operands
    merged, i = [], 0
    while i < len(ops):
        a = ops[i]
        if a.opcode != "slice" or not _unstrided(a):
            merged.append(a)
            i += 1
            continue
        j, end = i + 1, _spec(a)[dim][1]
        while j < len(ops) and _adjacent(a, ops[j], dim, end):
            end = _spec(ops[j])[dim][1]
            j += 1
        if j - i > 1:
            starts = [s for s, _l, _st in _spec(a)]
            limits = [lim for _s, lim, _st in _spec(a)]
            limits[dim] = end
            a = make_slice(rw, a.operands[0], starts, limits)
        merged.append(a)
        i = j
    if len(merged) == len(ops):
        return False
    return rw.replace_if_compatible(instr, rw.clone(instr, merged))


@rewrite("concatenate")
def concat_with_broadcast_scalar_to_pad(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConcatenate (layout insensitive): concat(x, broadcast(s)) or concat(broadcast(s), x)
    => pad(x, s) with the broadcast's width as high or low edge padding."""
    if rw.opts.is_layout_sensitive or len(instr.operands) != 2:
        return False
    a, b = instr.operands
    low = a.opcode == "broadcast" and a.operands[0].shape.rank == 0
    high = b.opcode == "broadcast" and b.operands[0].shape.rank == 0
    if not (low or high):
        return False
    dim = instr.attrs["dimensions"][0]
    config = [(0, 0, 0)] * instr.shape.rank
    config[dim] = (a.shape.dims[dim], 0, 0) if low else (0, b.shape.dims[dim], 0)
    value, x = (a.operands[0], b) if low else (b.operands[0], a)
    pad = rw.add("pad", [x, value], instr.shape, {"padding": PaddingConfig(tuple(config))})
    return rw.replace(instr, pad)


@rewrite("concatenate")
def concat_of_same_size1_operand(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConcatenate (layout insensitive): concat(x, x, ..., x) with x of size 1 along the
    concatenated dimension => broadcast(reshape(x))."""
    x = instr.operands[0]
    dim = instr.attrs["dimensions"][0]
    if rw.opts.is_layout_sensitive or any(o is not x for o in instr.operands) or x.shape.dims[dim] != 1:
        return False
    dims = tuple(d for d in range(x.shape.rank) if d != dim)
    squeezed = rw.reshape(x, [x.shape.dims[d] for d in dims])
    return rw.replace(instr, rw.broadcast(squeezed, instr.shape, dims))


# -- pad -------------------------------------------------------------------------------------------
@rewrite("pad")
def pad_of_zero_element_operand(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandlePad: padding an empty array gives a broadcast of the padding value."""
    return is_zero_element(instr.operands[0].shape) and \
        rw.replace_with_new(instr, "broadcast", [instr.operands[1]], {"dimensions": ()})


@rewrite("pad")
def pad_clear_interior_on_size1(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandlePad: interior padding of a size-1 dimension does nothing and is cleared."""
    dims = instr.operands[0].shape.dims
    config = _padding(instr)
    if not any(it > 0 and dims[k] == 1 for k, (_lo, _hi, it) in enumerate(config)):
        return False
    cleared = tuple((lo, hi, 0 if dims[k] == 1 else it) for k, (lo, hi, it) in enumerate(config))
    return rw.replace_with_new(instr, "pad", list(instr.operands), {"padding": PaddingConfig(cleared)})


@rewrite("pad")
def pad_is_noop(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandlePad: a pad without edge padding (and so, shapes permitting, no interior) is removed."""
    return all(lo == 0 and hi == 0 for lo, hi, _it in _padding(instr)) and \
        rw.replace_if_compatible(instr, instr.operands[0])


@rewrite("pad")
def pad_negative_to_slice(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandlePad (enable_negative_padding_replacement): negative edge padding becomes a pad with
    the non-negative part followed by a slice."""
    config = _padding(instr)
    if not rw.opts.enable_negative_padding_replacement or all(lo >= 0 and hi >= 0 for lo, hi, _ in config):
        return False
    positive = tuple((max(lo, 0), max(hi, 0), it) for lo, hi, it in config)
    padded = rw.add("pad", list(instr.operands), None, {"padding": PaddingConfig(positive)})
    padded.shape = padded.shape.with_layout(instr.shape.layout)  # XLA copies the pad's layout
    starts = [-lo if lo < 0 else 0 for lo, _hi, _it in config]
    limits = [size + hi if hi < 0 else size for size, (_lo, hi, _it) in zip(padded.shape.dims, config)]
    return rw.replace(instr, make_slice(rw, padded, starts, limits, shape=instr.shape))
