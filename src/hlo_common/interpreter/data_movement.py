"""Interpreter handlers for data movement and shape opcodes.

constant, iota, broadcast, reshape, bitcast, transpose, slice, dynamic-slice, dynamic-update-slice,
concatenate, pad, reverse, copy, tuple, get-tuple-element, get/set-dimension-size, dynamic-reshape,
copy-start/copy-done. Most return numpy views (values are immutable, so sharing is safe);
broadcast never materializes its result.

bitcast is the one layout-aware op: it reinterprets the operand's physical element order (given by
the minor_to_major of its layout) as the result's physical order, and reinterprets bits when the
element types differ. Dynamic slice starts are clamped so the slice stays inside the operand.
"""

from __future__ import annotations

import numpy as np

from hlo_common.errors import InterpreterError
from hlo_common.interpreter.conversions import bitcast_convert_array, convert_array
from hlo_common.interpreter.registry import register
from hlo_common.hlo.shape import Shape



@register("constant")
def _constant(instr, operands, ev):
    lit = instr.literal
    if lit is None:
        raise InterpreterError(f"%{instr.name}: constant without a literal")
    return lit


@register("iota")
def _iota(instr, operands, ev):
    shape = instr.shape
    dim = int(instr.attrs.get("iota_dimension", 0))
    from hlo_common.hlo.dtypes import S64

    n = shape.dims[dim]
    values = convert_array(np.arange(n, dtype=np.int64), S64, shape.element_type)
    view_shape = [1] * shape.rank
    view_shape[dim] = n
    return np.broadcast_to(values.reshape(view_shape), shape.dims)


@register("broadcast")
def _broadcast(instr, operands, ev):
    x = operands[0]
    dims = tuple(instr.attrs.get("dimensions", ()))
    out_dims = instr.shape.dims
    if x.ndim == 0 or not dims:
        return np.broadcast_to(x, out_dims)
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        x = np.transpose(x, order)
        dims = tuple(dims[i] for i in order)
    view_shape = [1] * len(out_dims)
    for i, d in enumerate(dims):
        view_shape[d] = x.shape[i]
    return np.broadcast_to(x.reshape(view_shape), out_dims)


@register("reshape", "dynamic-reshape")
def _reshape(instr, operands, ev):
    return operands[0].reshape(instr.shape.dims)


@register("transpose")
def _transpose(instr, operands, ev):
    return np.transpose(operands[0], tuple(instr.attrs["dimensions"]))


@register("bitcast")
def _bitcast(instr, operands, ev):
    in_shape = instr.operands[0].shape
    out_shape = instr.shape
    x = operands[0]
    same_type = in_shape.element_type is out_shape.element_type
    if same_type and _is_default(in_shape) and _is_default(out_shape):
        return np.reshape(x, out_shape.dims)
    flat = _physical(x, in_shape)
    if not same_type:
        flat = _reinterpret_flat(flat, in_shape.element_type, out_shape.element_type)
    if flat.size != out_shape.num_elements:
        raise InterpreterError(
            f"%{instr.name}: bitcast from {in_shape} to {out_shape} changes the number of bytes")
    return _from_physical(flat, out_shape)


def _reinterpret_flat(flat: np.ndarray, src, dst) -> np.ndarray:
    """A flat run of `src` elements as `dst` elements with the same bits (sub-byte elements are
    packed low bits first, as bitcast-convert packs them)."""
    if src.bits >= 8 and dst.bits >= 8:  # whole bytes: a plain view of the buffer
        if dst.is_pred:
            return np.ascontiguousarray(flat).view(np.uint8) != 0
        return np.ascontiguousarray(flat.astype(np.uint8) if src.is_pred else flat).view(dst.np_dtype)
    if src.bits == dst.bits:
        return bitcast_convert_array(flat, src, dst)
    if src.bits < dst.bits:
        return bitcast_convert_array(flat.reshape(-1, dst.bits // src.bits), src, dst)
    return bitcast_convert_array(flat, src, dst).reshape(-1)


def _is_default(shape: Shape) -> bool:
    return shape.layout is None or shape.layout.is_default()


def _physical(x: np.ndarray, shape: Shape) -> np.ndarray:
    """The elements of logical array `x` in the physical order of `shape`'s layout, flattened."""
    major_to_minor = tuple(reversed(shape.minor_to_major))
    return np.transpose(x, major_to_minor).reshape(-1)


def _from_physical(flat: np.ndarray, shape: Shape) -> np.ndarray:
    major_to_minor = tuple(reversed(shape.minor_to_major))
    phys = flat.reshape([shape.dims[d] for d in major_to_minor])
    return np.transpose(phys, np.argsort(major_to_minor))


# Slices of at most this many elements are copied instead of returned as views: a view keeps its
# whole operand alive and referenced, so a later in-place update of the operand (a loop's buffer
# read at one index, then written) would have to copy all of it.
SMALL_SLICE = 64


def _small_copy(view: np.ndarray) -> np.ndarray:
    return view.copy() if view.size <= SMALL_SLICE else view


@register("slice")
def _slice(instr, operands, ev):
    spec = instr.attrs["slice"]
    return _small_copy(operands[0][tuple(slice(s, l, st) for s, l, st in spec.dims)])


def _start_indices(instr, index_operands, operand_dims, sizes) -> list[int]:
    """Start indices (scalar operands, or one vector in the old form), clamped into bounds."""
    if len(index_operands) == 1 and np.ndim(index_operands[0]) == 1:
        raw = index_operands[0].tolist()
    else:
        raw = [int(v) for v in index_operands]
    if len(raw) != len(operand_dims):
        raise InterpreterError(
            f"%{instr.name}: {len(raw)} start indices for a rank-{len(operand_dims)} operand")
    return [min(max(s, 0), d - z) for s, d, z in zip(raw, operand_dims, sizes)]


@register("dynamic-slice")
def _dynamic_slice(instr, operands, ev):
    x = operands[0]
    sizes = tuple(instr.attrs.get("dynamic_slice_sizes", instr.shape.dims))
    starts = _start_indices(instr, operands[1:], x.shape, sizes)
    return _small_copy(x[tuple(slice(s, s + z) for s, z in zip(starts, sizes))])


@register("dynamic-update-slice")
def _dynamic_update_slice(instr, operands, ev):
    x, update = operands[0], operands[1]
    starts = _start_indices(instr, operands[2:], x.shape, update.shape)
    out = x if ev.owns(x) else np.array(x, copy=True)
    out[tuple(slice(s, s + z) for s, z in zip(starts, update.shape))] = update
    return out


@register("concatenate")
def _concatenate(instr, operands, ev):
    return np.concatenate(operands, axis=int(instr.attrs["dimensions"][0]))


@register("pad")
def _pad(instr, operands, ev):
    x, value = operands
    config = instr.attrs["padding"].dims
    out_dims = instr.shape.dims
    out = np.full(out_dims, value, dtype=instr.shape.element_type.np_dtype)
    dst, src = [], []
    for (lo, _hi, interior), n, size in zip(config, x.shape, out_dims):
        step = interior + 1
        # Operand element i lands at lo + i*step; keep the ones inside [0, size).
        first = 0 if lo >= 0 else (-lo + step - 1) // step
        last = min(n, (size - lo + step - 1) // step) if n else 0
        if last <= first:
            return out
        dst.append(slice(lo + first * step, lo + (last - 1) * step + 1, step))
        src.append(slice(first, last))
    out[tuple(dst)] = x[tuple(src)]
    return out


@register("reverse")
def _reverse(instr, operands, ev):
    return np.flip(operands[0], axis=tuple(instr.attrs.get("dimensions", ())))


@register("copy")
def _copy(instr, operands, ev):
    return operands[0]


@register("tuple")
def _tuple(instr, operands, ev):
    return tuple(operands)


@register("get-tuple-element")
def _get_tuple_element(instr, operands, ev):
    return operands[0][int(instr.attrs["index"])]


@register("get-dimension-size")
def _get_dimension_size(instr, operands, ev):
    dim = int(instr.attrs["dimensions"][0])
    return np.array(np.shape(operands[0])[dim], dtype=instr.shape.element_type.np_dtype)


@register("set-dimension-size")
def _set_dimension_size(instr, operands, ev):
    return operands[0]  # shapes are static here: the padded array is the value


@register("copy-start")
def _copy_start(instr, operands, ev):
    """(destination, source, context...): the copy is done at once; copy-done reads element 0."""
    x = operands[0]
    contexts = tuple(np.zeros(s.dims, s.element_type.np_dtype) for s in instr.shape.tuple_shapes[2:])
    return (x, x) + contexts


@register("copy-done")
def _copy_done(instr, operands, ev):
    return operands[0][0]
