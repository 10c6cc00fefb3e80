"""Interpreter handlers for reduce-window and select-and-scatter (XLA's HloEvaluator semantics).

Both place a window at every output (or source) position: along each dim the input is base-dilated
(`lhs_dilate`: holes between elements) and padded (negative padding crops); a window element
`k` of output position `x` reads padded position `x*stride + k*rhs_dilate`. Holes and padding are
skipped, exactly as HloEvaluator's IterateThroughWindow does, so the init value is the only
starting point. The loop runs over the (few) window offsets, each step vectorized over all
output positions:

- reduce-window: `acc = f(acc, x)` in window (row-major) order; numpy ufuncs with an identity
  fill for the common reducers, `ev.map_computation` plus a validity mask for any other one.
- select-and-scatter: per window the first valid element is selected and each later one replaces
  it unless `select(selected, current)` holds; the source value is then combined into the output
  at the selected operand position with `scatter(output, source)`, windows in source row-major
  order (XLA:CPU's argument order).
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from hlo_common.hlo.attributes import Window, WindowDim
from hlo_common.hlo.dtypes import from_numpy_dtype
from hlo_common.interpreter.gather_scatter import apply_updates
from hlo_common.interpreter.numeric import to_element_type, unsupported
from hlo_common.interpreter.reducers import classify_reducer
from hlo_common.interpreter.registry import register
from hlo_common.hlo.ir import HloInstruction


def dilate_and_pad(x: np.ndarray, dims: Sequence[WindowDim | None], fill) -> tuple[np.ndarray, np.ndarray]:
    """(padded array filled with `fill` outside the data, boolean mask of where data landed).

    `dims[i]` gives axis i's base dilation and padding (None leaves the axis alone).
    """
    shape, src, dst = [], [], []
    for axis, wd in enumerate(dims):
        size = x.shape[axis]
        if wd is None:
            shape.append(size)
            src.append(slice(None))
            dst.append(slice(None))
            continue
        dil, lo = wd.base_dilation, wd.padding_low
        total = max((size - 1) * dil + 1 + lo + wd.padding_high, 0) if size else max(lo + wd.padding_high, 0)
        shape.append(total)
        first = -(lo // dil) if lo < 0 else 0  # first element landing at a position >= 0
        last = min((total - 1 - lo) // dil, size - 1) if total else -1
        if last < first:
            src.append(slice(0, 0))
            dst.append(slice(0, 0))
            continue
        start = lo + first * dil
        src.append(slice(first, last + 1))
        dst.append(slice(start, start + (last - first) * dil + 1, dil))
    out = np.full(shape, fill, dtype=x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    mask = np.zeros(shape, dtype=bool)
    mask[tuple(dst)] = True
    return out, mask


def output_dims(padded_shape, window: Window) -> list[int]:
    out = []
    for size, wd in zip(padded_shape, window.dims):
        span = (wd.size - 1) * wd.window_dilation + 1
        out.append(0 if size < span else (size - span) // wd.stride + 1)
    return out


def window_offsets(window: Window, out_dims):
    """(offset tuple, slices into the padded array) for every window offset, row-major."""
    for offset in itertools.product(*(range(wd.size) for wd in window.dims)):
        yield offset, tuple(
            slice(k * wd.window_dilation, k * wd.window_dilation + (m - 1) * wd.stride + 1, wd.stride)
            for k, wd, m in zip(offset, window.dims, out_dims))


def _identity(kind: str, dtype: np.dtype):
    """A fill value that leaves the accumulator unchanged (-0.0 keeps a -0 sum, +0 does not)."""
    if kind == "add":
        return np.array(-0.0 if dtype.kind == "f" else 0).astype(dtype)
    if kind == "multiply":
        return np.array(1).astype(dtype)
    if dtype == np.bool_:
        return np.bool_(kind in ("minimum", "and"))
    if dtype.kind == "f":
        return dtype.type(-np.inf if kind == "maximum" else np.inf)
    info = np.iinfo(dtype)
    return {"maximum": info.min, "minimum": info.max, "and": -1 if info.min < 0 else info.max,
            "or": 0}[kind]


_UFUNCS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
           "and": None, "or": None}


def _compute_dtype(x: np.ndarray) -> np.dtype:
    """Integers in 64 bits (wrapped once at the end), narrow floats in f32, others as they are."""
    ptype = from_numpy_dtype(x.dtype)
    if ptype.is_integer:
        return np.dtype(np.uint64 if ptype.kind == "unsigned" and ptype.bits == 64 else np.int64)
    if ptype.is_float and ptype.bits < 32:
        return np.dtype(np.float32)
    return x.dtype


@register("reduce-window")
def _reduce_window(instr: HloInstruction, operands, ev):
    n = len(operands) // 2
    inputs, inits = operands[:n], operands[n:]
    window: Window = instr.attrs.get("window") or Window(())
    if len(window.dims) != inputs[0].ndim:
        raise unsupported(instr, f"window has {len(window.dims)} dims for rank {inputs[0].ndim}")
    comp = instr.attrs["to_apply"]
    kind = classify_reducer(comp) if n == 1 else None
    if kind is not None:
        return _reduce_window_fast(instr, kind, inputs[0], inits[0], window)
    padded, mask = [], None
    for x in inputs:
        p, mask = dilate_and_pad(x, window.dims, np.zeros((), x.dtype))
        padded.append(p)
    out_dims = output_dims(padded[0].shape, window)
    acc = [np.full(out_dims, init, dtype=init.dtype) for init in inits]
    for _, sl in window_offsets(window, out_dims):
        valid = mask[sl]
        if not valid.any():
            continue
        new = ev.map_computation(comp, acc + [p[sl] for p in padded])
        acc = [np.where(valid, v, a) for v, a in zip(new, acc)]
    return tuple(acc) if n > 1 else acc[0]


def _reduce_window_fast(instr, kind: str, x: np.ndarray, init: np.ndarray, window: Window) -> np.ndarray:
    ptype = instr.shape.element_type
    wide = _compute_dtype(x)
    xw = x.astype(wide)
    padded, _ = dilate_and_pad(xw, window.dims, _identity(kind, wide))
    out_dims = output_dims(padded.shape, window)
    acc = np.full(out_dims, init.astype(wide), dtype=wide)
    ufunc = _UFUNCS[kind]
    if ufunc is None:
        ufunc = (np.logical_and if kind == "and" else np.logical_or) if wide == np.bool_ else \
            (np.bitwise_and if kind == "and" else np.bitwise_or)
    for _, sl in window_offsets(window, out_dims):
        acc = ufunc(acc, padded[sl])
    return to_element_type(acc, ptype)


@register("select-and-scatter")
def _select_and_scatter(instr: HloInstruction, operands, ev) -> np.ndarray:
    operand, source, init = operands
    window: Window = instr.attrs.get("window") or Window(())
    select, scatter = instr.attrs["select"], instr.attrs["scatter"]
    padded, mask = dilate_and_pad(operand, window.dims, np.zeros((), operand.dtype))
    # Each padded position's linear index in the operand (-1 for padding / holes).
    positions, _ = dilate_and_pad(np.arange(operand.size, dtype=np.int64).reshape(operand.shape),
                                  window.dims, -1)
    out_dims = output_dims(padded.shape, window)
    if list(source.shape) != out_dims:
        raise unsupported(instr, f"source shape {list(source.shape)} differs from the windows {out_dims}")
    have = np.zeros(out_dims, dtype=bool)
    best = np.zeros(out_dims, dtype=operand.dtype)
    best_pos = np.full(out_dims, -1, dtype=np.int64)
    for _, sl in window_offsets(window, out_dims):
        valid, cur, pos = mask[sl], padded[sl], positions[sl]
        if not valid.any():
            continue
        keep = ev.map_computation(select, [best, cur])[0].astype(bool)
        take = valid & (~have | ~keep)
        best = np.where(take, cur, best)
        best_pos = np.where(take, pos, best_pos)
        have |= valid
    result = np.full(operand.size, init, dtype=operand.dtype)
    chosen = have.reshape(-1)
    apply_updates([result], best_pos.reshape(-1)[chosen], [source.reshape(-1)[chosen]], scatter, ev, instr)
    return result.reshape(operand.shape)
