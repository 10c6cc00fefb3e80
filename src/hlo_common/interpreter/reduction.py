"""Interpreter handlers for reduce, map and scan (XLA's HloEvaluator role), vectorized.

reduce folds N inputs along `dimensions` with a reducer over 2N scalars (accumulators first,
then the new elements), starting from N init values:

- fast path (one input, a reducer `classify_reducer` recognises): numpy reductions. Sums and
  products of narrow floats (bf16, f16, f8) accumulate in f32 and round once, which is what
  XLA:CPU computes (HloEvaluator itself rounds after every step); f32 sums accumulate in f64,
  except rows of at most `F32_ROW_LIMIT` contiguous elements, which numpy sums in f32 as a
  pairwise tree of 8-way partial sums (an error bound of about 20 f32 ulps of the sum of
  magnitudes, against up to one ulp per element for HloEvaluator's sequential f32 sum, and in
  half the time of a widening f64 sum); integers wrap in two's complement exactly. numpy widens
  the input as it reads it (`dtype=`; a maximum or minimum of narrow floats widens each block
  first, which is faster and gives the same values), and a large reduction over trailing dims
  runs in blocks of whole rows on the interpreter's threads (`parallel.py`; each row is summed
  as by one numpy call, so no value changes).
- general path: the reducer through `ev.map_computation`, vectorized over all output elements:
  in element order (row-major over the reduced dims: HloEvaluator's and XLA:CPU's order) for
  short reductions and for reducers that are not associative (`reducers.is_associative`, e.g. a
  variadic reducer that adds its two accumulators), else as a pairwise tree of adjacent elements
  (same result for associative reducers, e.g. argmax pairs; float sums within rounding).

The evaluator imports this module (and `linalg`, `gather_scatter`, `sort`); importing it also
registers reduce-window and select-and-scatter from `window`. A reduce whose init is not the
reducer's identity uses it exactly once, as HloEvaluator does (XLA:CPU may apply it once per
vectorized partial sum).
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.dtypes import PrimitiveType
from hlo_common.interpreter import narrow, parallel, window  # noqa: F401  (window registers ...)
from hlo_common.interpreter.arith import LOW_FLOAT_DTYPES
from hlo_common.interpreter.numeric import bool_attr, ints_attr, to_element_type, unsupported
from hlo_common.interpreter.reducers import classify_reducer, is_associative
from hlo_common.interpreter.registry import register
from hlo_common.hlo.ir import HloInstruction

# Reductions at most this long run in element order; longer ones use a pairwise tree.
SEQUENTIAL_LIMIT = 16
# Fast-path reductions of at least PARALLEL_ELEMENTS inputs run in blocks of about BLOCK_ELEMENTS.
PARALLEL_ELEMENTS = 1 << 19
BLOCK_ELEMENTS = 1 << 18
# f32 sums of contiguous rows up to this long accumulate in f32 (numpy's pairwise sum), longer
# ones and other layouts in f64.
F32_ROW_LIMIT = 4096


@register("reduce")
def _reduce(instr: HloInstruction, operands, ev):
    n = len(operands) // 2
    inputs, inits = list(operands[:n]), list(operands[n:])
    dims = tuple(sorted(ints_attr(instr, "dimensions")))
    rank = inputs[0].ndim
    if any(not 0 <= d < rank for d in dims):
        raise unsupported(instr, f"dimensions {list(dims)} out of range for rank {rank}")
    comp = instr.attrs["to_apply"]
    kind = classify_reducer(comp) if n == 1 else None
    if kind is not None:  # the input may be the narrower operand of a folded convert (plan.py)
        return _reduce_fast(kind, inputs[0], inits[0], dims, instr.operands[0].shape.element_type)
    kept = [d for d in range(rank) if d not in dims]
    out_shape = tuple(inputs[0].shape[d] for d in kept)
    r = int(np.prod([inputs[0].shape[d] for d in dims], dtype=np.int64))
    m = int(np.prod(out_shape, dtype=np.int64))
    flat = [x.transpose(kept + list(dims)).reshape(m, r) for x in inputs]
    acc = [np.full(m, init, dtype=init.dtype) for init in inits]
    if r <= SEQUENTIAL_LIMIT or not ev.cached_verdict("associative", comp, is_associative):
        for k in range(r):
            acc = ev.map_computation(comp, acc + [f[:, k] for f in flat])
    else:
        acc = ev.map_computation(comp, acc + _pairwise_tree(comp, flat, ev))
    out = tuple(a.reshape(out_shape) for a in acc)
    return out if n > 1 else out[0]


def _pairwise_tree(comp, flat: list[np.ndarray], ev) -> list[np.ndarray]:
    """Reduce [M, R] columns by combining adjacent pairs (left operand first) until one is left."""
    cur = flat
    while cur[0].shape[1] > 1:
        r = cur[0].shape[1]
        half = r // 2
        left = [c[:, 0:2 * half:2] for c in cur]
        right = [c[:, 1:2 * half:2] for c in cur]
        merged = ev.map_computation(comp, left + right)
        if r % 2:
            merged = [np.concatenate([mg, c[:, -1:]], axis=1) for mg, c in zip(merged, cur)]
        cur = merged
    return [c[:, 0] for c in cur]


def _reduce_fast(kind: str, x: np.ndarray, init: np.ndarray, dims: tuple[int, ...],
                 ptype: PrimitiveType) -> np.ndarray:
    """The reduce of `x` as values of element type `ptype` (`x` may hold them in a narrower float
    dtype: each value is widened exactly as it is read)."""
    if ptype.is_pred:
        red = np.logical_and if kind == "and" else np.logical_or
        return red(red.reduce(x, axis=dims), init)
    kept = x.ndim - len(dims)
    trailing = dims == tuple(range(kept, x.ndim)) and x.flags.c_contiguous
    ufunc, wide = fast_reduction(kind, ptype, _row_length(x.shape, dims) if trailing else None)
    if kind in ("maximum", "minimum") and not x.size:
        acc = np.broadcast_to(init.astype(wide), tuple(s for d, s in enumerate(x.shape) if d not in dims))
        return to_element_type(acc, ptype)
    return finish_fast_reduction(kind, ptype, init, _reduce_rows(ufunc, x, dims, wide))


def _row_length(shape: tuple[int, ...], dims: tuple[int, ...]) -> int:
    return int(np.prod([shape[d] for d in dims], dtype=np.int64))


def fast_reduction(kind: str, ptype: PrimitiveType, row: int | None = None) -> tuple[np.ufunc, np.dtype]:
    """(numpy ufunc, accumulation dtype) of a fast-path reduction of non-pred `ptype` values;
    `row`: the elements each result sums when they are contiguous trailing dims (else None).

    The accumulation dtype goes to numpy's reduction (`dtype=`), which widens the input block by
    block as it reads it instead of materializing a widened copy of the whole array."""
    if ptype.is_integer:
        wide = np.dtype(np.uint64 if ptype.kind == "unsigned" and ptype.bits == 64 else np.int64)
    elif ptype.is_float and ptype.bits < 32:
        wide = np.dtype(np.float32)
    elif ptype.name == "f32" and kind == "add" and (row is None or row > F32_ROW_LIMIT):
        wide = np.dtype(np.float64)  # a long or strided f32 sum: at least as close as XLA's own
    else:
        wide = ptype.np_dtype
    return _UFUNCS[kind], wide


def finish_fast_reduction(kind: str, ptype: PrimitiveType, init: np.ndarray, partial: np.ndarray):
    """The reduce's value from the reduction of its input (`partial`, in the accumulation dtype):
    the init value combined once, then rounded or wrapped into the element type."""
    return to_element_type(_UFUNCS[kind](init.astype(partial.dtype), partial), ptype)


_UFUNCS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
           "and": np.bitwise_and, "or": np.bitwise_or}


def _reduce_rows(ufunc: np.ufunc, x: np.ndarray, dims: tuple[int, ...], wide: np.dtype) -> np.ndarray:
    """`ufunc.reduce(x, axis=dims, dtype=wide)`; when the reduced dims are the trailing ones of a
    large array, blocks of its leading dim are reduced on the interpreter's threads (each row is
    reduced exactly as by one call: the blocks are whole rows, fixed by the shape)."""
    kept = x.ndim - len(dims)
    # A maximum or minimum of narrow floats does not depend on how the values are grouped: each
    # block is widened first (one fast cast) instead of through numpy's 8192-element casting
    # buffer inside the reduction (bf16 rows: 20x slower).
    widen = ufunc in (np.maximum, np.minimum) and x.dtype != wide and x.dtype in LOW_FLOAT_DTYPES
    if x.size < PARALLEL_ELEMENTS or kept == 0 or dims != tuple(range(kept, x.ndim)):
        return ufunc.reduce(_widened(x, wide) if widen else x, axis=dims, dtype=wide)
    row = x.size // x.shape[0]
    step = max(1, -(-BLOCK_ELEMENTS // row))
    out = np.empty(x.shape[:kept], wide)

    def block(start: int) -> None:
        part = x[start:start + step]
        part = _widened(part, wide) if widen else part
        ufunc.reduce(part, axis=dims, dtype=wide, out=out[start:start + step])

    parallel.for_each(block, range(0, x.shape[0], step))
    return out


def _widened(x: np.ndarray, wide: np.dtype) -> np.ndarray:
    return narrow.widen(x) if x.dtype == narrow.BF16 and wide == narrow.F32 else x.astype(wide)


@register("map")
def _map(instr: HloInstruction, operands, ev) -> np.ndarray:
    out = ev.map_computation(instr.attrs["to_apply"], list(operands))
    return np.asarray(out[0]).astype(instr.shape.element_type.np_dtype, copy=False)


@register("scan")
def _scan(instr: HloInstruction, operands, ev):
    """scan(inputs..., inits...), dimensions={d}, num_carries=C: one call per step along d.

    The body takes (input slices..., carries...) and returns (output slices..., new carries...);
    the result is (outputs stacked along d..., final carries...). `is_reverse=true` walks d
    backwards. (The parameter order is inferred from the HLO/MHLO import tests; XLA's own
    evaluator for this new opcode was not available to check against.)
    """
    dims = ints_attr(instr, "dimensions")
    num_carries = int(str(instr.attrs.get("num_carries", 1)))
    if len(dims) != 1:
        raise unsupported(instr, "scan needs exactly one dimension")
    axis = dims[0]
    n_in = len(operands) - num_carries
    inputs, carries = list(operands[:n_in]), list(operands[n_in:])
    comp = instr.attrs["to_apply"]
    length = inputs[0].shape[axis] if inputs else 0
    steps = range(length - 1, -1, -1) if bool_attr(instr, "is_reverse", False) else range(length)
    outs: list[list[np.ndarray]] = []
    for i in steps:
        res = ev.call(comp, [np.take(x, i, axis=axis) for x in inputs] + carries)
        res = list(res) if isinstance(res, tuple) else [res]
        n_out = len(res) - num_carries
        outs.append(res[:n_out])
        carries = res[n_out:]
    if bool_attr(instr, "is_reverse", False):
        outs.reverse()
    leaf_shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else (instr.shape,)
    n_out = len(leaf_shapes) - num_carries
    stacked = [np.stack([o[k] for o in outs], axis=axis) if outs else
               np.zeros(leaf_shapes[k].dims, leaf_shapes[k].element_type.np_dtype) for k in range(n_out)]
    result = tuple(stacked) + tuple(carries)
    return result if instr.shape.is_tuple else result[0]
