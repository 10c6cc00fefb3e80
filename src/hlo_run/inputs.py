"""Deterministic random arguments for a module's entry parameters (`hlo-run --seed N`).

In the spirit of XLA's `MakeFakeArguments` (xla/tests/test_utils.cc), which run_hlo_module uses:
values are random but chosen so that the module means something, and the same seed gives the
same arrays on every machine.

The rule (also in docs/tools.md):

- Each entry parameter `i` gets its own generator, `numpy.random.default_rng([seed, i])` (PCG64
  seeded through a SeedSequence of the two numbers), so argument `i` does not depend on the sizes
  of the others. Values are drawn in row-major order.
- On several devices (`hlo_run.devices`), device `d`'s argument `i` comes from
  `numpy.random.default_rng([seed, i, d])`, so each device gets its own values.
- floats (f16, bf16, f32, f64, f8 and narrower): uniform in [-1, 1), drawn as float64 and rounded
  to the element type (round to nearest even) a million at a time, into an array of that type;
  complex: real and imaginary parts each so.
- pred: 0 or 1 with equal chance.
- integers: uniform in [-8, 7] for signed and [0, 15] for unsigned types, clipped to the type's
  range. Small on purpose: a parameter may be a loop bound or a shift amount.
- constrained parameters, found by following the parameter's values through convert,
  reduce-precision, reshape, bitcast, transpose, copy, slice, broadcast, concatenate, reverse,
  the data operands of dynamic-slice, dynamic-update-slice, gather, pad and select, and into
  fusions and calls (so an index read out of a parameter that is itself sliced stays in bounds):
  * start indices of dynamic-slice / dynamic-update-slice: uniform in [0, operand dim - slice
    dim], so no start is clamped;
  * indices of gather / scatter: uniform in [0, min over the indexed operand dims - 1] (sorted
    when the instruction says `indices_are_sorted=true`);
  * indices of a scatter with `unique_indices=true` (XLA: no element is scattered to twice), when
    the parameter is the indices operand itself (or a convert / copy of it, same dims): each index
    vector starts a distinct window, windows tiled in the operand without overlap (the start in
    operand dim d a multiple of the update window size there, with the window in bounds), cells
    drawn without replacement (sorted by cell when `indices_are_sorted=true`); when the scatter
    has batching dims, or there are more index vectors than cells, the bound above applies;
  * init values of reduce / reduce-window / select-and-scatter: the identity of the reducer when
    it is a plain add (0), multiply (1), maximum (-inf or the type's minimum), minimum (+inf or
    the maximum), and (all ones) or or/xor (0); otherwise random;
  * keys (operand 0) of a key-value or stable sort: distinct values along the sorted dimension,
    each row a shuffled iota 0..m-1 (minus m/2 for signed and float types; the whole array one
    iota when the parameter is reshaped on its way), so the order of equal keys cannot matter;
    not done when the type cannot hold m distinct integers exactly (bf16: m <= 256).
  When several constraints meet, an index bound wins over an init value over distinct keys.
- tuple parameters get their leaves in order (without constraints); tokens are tokens.
- `--large-float-range` (XLA: --use_large_float_range) changes the unconstrained floats only:
  each value is sign * m * 2**e with the sign a fair coin, m uniform in [1, 2) and the exponent
  e uniform over the type's normal exponents [minexp, maxexp - 1] (so the exponent, not the
  value, is uniform: a log-uniform spread over the whole finite range), then rounded to the type;
  complex numbers get both parts so. As in XLA, reductions over such values may overflow to inf.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from hlo_common.hlo.dtypes import PrimitiveType
from hlo_common.interpreter.registry import TOKEN
from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.shape import Shape

FLOAT_RANGE = (-1.0, 1.0)
SIGNED_RANGE = (-8, 7)
UNSIGNED_RANGE = (0, 15)

# Ops through which a parameter's values reach a constrained use unchanged (or re-shaped)...
_FORWARDING = frozenset({
    "convert", "reduce-precision", "reshape", "bitcast", "transpose", "copy", "slice", "broadcast",
    "concatenate", "reverse",
})
# ... and those that pass on the values of some of their operands only.
_FORWARDING_OPERANDS = {"dynamic-slice": {0}, "dynamic-update-slice": {0, 1}, "gather": {0}, "pad": {0},
                        "select": {1, 2}}


@dataclass(frozen=True)
class Constraint:
    """What a parameter's values must satisfy: at most one of the three fields is set."""

    index_bound: int | None = None  # values in [0, index_bound]
    sorted: bool = False
    init_identity: str | None = None  # reducer opcode whose identity to use
    distinct: bool = False
    distinct_axis: int | None = None  # the sorted dimension, when the keys are the parameter as is
    key_dims: tuple[int, ...] = ()
    unique_windows: UniqueWindows | None = None  # with index_bound: a scatter's unique_indices


@dataclass(frozen=True)
class UniqueWindows:
    """Scatter indices whose windows never overlap: component c of each index vector is a multiple
    of `strides[c]` below `cells[c] * strides[c]`; the index vectors lie along `index_vector_dim`
    of an array of `dims`."""

    dims: tuple[int, ...]
    index_vector_dim: int
    cells: tuple[int, ...]
    strides: tuple[int, ...]


def make_fake_arguments(module: HloModule, seed: int = 0, *, large_float_range: bool = False,
                        device: int | None = None) -> list[Any]:
    """One value per entry parameter of `module`, by the rule in this module's docstring; on
    several devices, device d's values come from the seed sequence (seed, parameter, d). Each
    parameter's size is checked against the memory hlo-run may use before it is made."""
    from hlo_run.memory_budget import available_bytes, check_fits

    params = module.entry.parameters
    budget = available_bytes()
    total = 0
    for p in params:
        need = parameter_bytes(p.shape)
        total += need
        check_fits(need, f"parameter {p.parameter_number} ({p.shape.to_string(False)})", budget)
        if p.parameter_number:
            check_fits(total, f"parameters 0..{p.parameter_number} together", budget, plural=True)
    return [make_fake_argument(p, seed, large_float_range=large_float_range, device=device) for p in params]


def parameter_bytes(shape: Shape) -> int:
    """Bytes of the numpy arrays a parameter's value takes (sub-byte types take a byte each)."""
    leaves = [s for _, s in shape.leaf_shapes() if s.is_array]
    return sum(s.num_elements * s.element_type.np_dtype.itemsize for s in leaves)


def make_fake_argument(param: HloInstruction, seed: int = 0, *, large_float_range: bool = False,
                       device: int | None = None) -> Any:
    key = [int(seed), int(param.parameter_number)] + ([int(device)] if device is not None else [])
    rng = np.random.default_rng(key)
    shape = param.shape
    if shape.is_tuple or not shape.is_array:
        return _random_value(shape, rng, large_float_range)
    return _constrained_array(shape, find_constraint(param), rng, large_float_range)


# -- finding constraints -----------------------------------------------------------------------------

def find_constraint(param: HloInstruction) -> Constraint:
    """The strongest constraint among the uses the parameter's values flow into."""
    found: list[Constraint] = []
    seen: set[int] = set()
    work = [param]
    while work:
        value = work.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        for user in value.users:
            for k, op in enumerate(user.operands):
                if op is value:
                    _classify_use(user, k, found, work)
    for pick in (lambda c: c.index_bound is not None, lambda c: c.init_identity is not None,
                 lambda c: c.distinct):
        matching = [c for c in found if pick(c)]
        if matching:
            return _merge(matching)
    return Constraint()


def _merge(constraints: list[Constraint]) -> Constraint:
    first = constraints[0]
    if first.index_bound is None:
        return first
    same = all(c.unique_windows == first.unique_windows for c in constraints)
    unique = first.unique_windows if same else None
    return Constraint(index_bound=min(c.index_bound for c in constraints),
                      sorted=any(c.sorted for c in constraints), unique_windows=unique)


def _classify_use(user: HloInstruction, k: int, found: list[Constraint], work: list) -> None:
    op = user.opcode
    n = len(user.operands)
    if op in _FORWARDING or k in _FORWARDING_OPERANDS.get(op, ()):
        work.append(user)
    elif op in ("fusion", "call"):
        callee = user.attrs.get("calls") or user.attrs.get("to_apply")
        if callee is not None and not isinstance(callee, list):
            work.extend(p for p in callee.parameters if p.parameter_number == k)
    elif op == "dynamic-slice" and k >= 1:
        found.append(Constraint(index_bound=_dynamic_bound(user.operands[0].shape, user.shape, k - 1, n - 1)))
    elif op == "dynamic-update-slice" and k >= 2:
        found.append(Constraint(index_bound=_dynamic_bound(user.operands[0].shape, user.operands[1].shape,
                                                           k - 2, n - 2)))
    elif op == "gather" and k == 1:
        found.append(_gather_bound(user, user.attrs.get("start_index_map", ())))
    elif op == "scatter" and k == (n - 1) // 2:
        bound = _gather_bound(user, user.attrs.get("scatter_dims_to_operand_dims", ()))
        found.append(_with_unique_windows(bound, user))
    elif op in ("reduce", "reduce-window") and k >= n // 2:
        found.append(Constraint(init_identity=_reducer_kind(user.attrs.get("to_apply"))))
    elif op == "select-and-scatter" and k == 2:
        found.append(Constraint(init_identity=_reducer_kind(user.attrs.get("scatter"))))
    elif op == "sort" and k == 0 and (n >= 2 or user.attrs.get("is_stable")):
        axis = int(user.attrs.get("dimensions", (0,))[0])
        keys = user.operands[0].shape
        found.append(Constraint(distinct=True, distinct_axis=axis, key_dims=tuple(keys.dims)))


def _dynamic_bound(operand: Shape, window: Shape, index: int, num_indices: int) -> int:
    if operand.is_tuple or window.is_tuple or operand.rank == 0:
        return 0
    if num_indices == 1 and operand.rank > 1:  # old form: one vector of start indices
        return max(0, min(o - w for o, w in zip(operand.dims, window.dims)))
    if index >= operand.rank:
        return 0
    return max(0, operand.dims[index] - window.dims[index])


def _gather_bound(instr: HloInstruction, dims) -> Constraint:
    operand = instr.operands[0].shape
    if operand.is_tuple or not dims:
        return Constraint(index_bound=0)
    bound = min(operand.dims[d] - 1 for d in dims if d < operand.rank) if operand.rank else 0
    return Constraint(index_bound=max(0, bound), sorted=bool(instr.attrs.get("indices_are_sorted")))


def _with_unique_windows(bound: Constraint, scatter: HloInstruction) -> Constraint:
    """`bound` plus the non-overlapping windows of a `unique_indices=true` scatter, when they exist."""
    attrs = scatter.attrs
    if attrs.get("unique_indices") is not True or attrs.get("input_batching_dims"):
        return bound
    num = (len(scatter.operands) - 1) // 2
    operand, indices, updates = (scatter.operands[i].shape for i in (0, num, num + 1))
    if not (operand.is_array and indices.is_array and updates.is_array):
        return bound
    if not _plain_parameter(scatter.operands[num]):
        return bound
    inserted = set(attrs.get("inserted_window_dims", ()))
    window_dims = [d for d in range(operand.rank) if d not in inserted]
    update_window_dims = list(attrs.get("update_window_dims", ()))
    if len(window_dims) != len(update_window_dims):
        return bound
    size = [1] * operand.rank
    for d, u in zip(window_dims, update_window_dims):
        size[d] = updates.dims[u]
    to_operand = list(attrs.get("scatter_dims_to_operand_dims", ()))
    cells = tuple(operand.dims[d] // size[d] if size[d] else 0 for d in to_operand)
    ivd = int(attrs.get("index_vector_dim", indices.rank))
    vectors = indices.num_elements // max(1, len(to_operand))
    if not to_operand or 0 in cells or vectors > int(np.prod(cells, dtype=np.int64)):
        return bound
    windows = UniqueWindows(tuple(indices.dims), ivd, cells, tuple(size[d] for d in to_operand))
    return Constraint(index_bound=bound.index_bound, sorted=bound.sorted, unique_windows=windows)


def _plain_parameter(value: HloInstruction) -> bool:
    """Is `value` a parameter, or a convert / copy chain of one with the same dims?"""
    while value.opcode in ("convert", "copy") and value.operands[0].shape.dims == value.shape.dims:
        value = value.operands[0]
    return value.opcode == "parameter"


def _reducer_kind(comp) -> str | None:
    """The opcode of a reducer that is exactly `op(param0, param1)`, else None."""
    if comp is None or isinstance(comp, list):
        return None
    root = comp.root
    if len(comp.parameters) != 2 or len(root.operands) != 2:
        return None
    a, b = root.operands
    if a.opcode != "parameter" or b.opcode != "parameter" or a is b:
        return None
    return root.opcode if root.opcode in _IDENTITIES else None


# -- generating values -------------------------------------------------------------------------------

_IDENTITIES = {
    "add": lambda t: 0,
    "or": lambda t: 0,
    "xor": lambda t: 0,
    "multiply": lambda t: 1,
    "and": lambda t: True if t.is_pred else -1 if t.kind == "signed" else _int_max(t),
    "maximum": lambda t: False if t.is_pred else -np.inf if t.is_float else _int_min(t),
    "minimum": lambda t: True if t.is_pred else np.inf if t.is_float else _int_max(t),
}


def _int_min(t: PrimitiveType) -> int:
    return -(1 << (t.bits - 1)) if t.kind == "signed" else 0


def _int_max(t: PrimitiveType) -> int:
    return (1 << (t.bits - 1)) - 1 if t.kind == "signed" else (1 << t.bits) - 1


def _constrained_array(shape: Shape, c: Constraint, rng: np.random.Generator,
                       large: bool = False) -> np.ndarray:
    t = shape.element_type
    dims = shape.dims
    n = shape.num_elements
    if c.unique_windows is not None and c.unique_windows.dims == tuple(dims) and t.is_integer:
        vals = _unique_window_starts(c.unique_windows, c.sorted, rng)
        if int(vals.max(initial=0)) <= _int_max(t):
            return vals.astype(t.np_dtype)
    if c.index_bound is not None and (t.is_integer or t.is_float):
        hi = c.index_bound if t.is_float else min(c.index_bound, _int_max(t))
        vals = rng.integers(0, hi + 1, n, dtype=np.int64)
        if c.sorted:
            vals = np.sort(vals)
        return vals.astype(t.np_dtype).reshape(dims)
    if c.init_identity is not None and not t.is_complex:
        fill = _IDENTITIES[c.init_identity](t)
        return np.full(dims, fill, dtype=t.np_dtype)
    if c.distinct and (t.is_integer or t.is_float):
        keys = _distinct_keys(shape, c, rng)
        if keys is not None:
            return keys
    return _random_array(shape, rng, large)


def _unique_window_starts(w: UniqueWindows, sort: bool, rng: np.random.Generator) -> np.ndarray:
    """Index vectors naming distinct cells of the window grid, laid out along index_vector_dim."""
    k = len(w.cells)
    vectors = int(np.prod(w.dims, dtype=np.int64)) // k
    cells = rng.choice(int(np.prod(w.cells, dtype=np.int64)), size=vectors, replace=False)
    if sort:
        cells = np.sort(cells)
    starts = np.stack(np.unravel_index(cells, w.cells), axis=-1) * np.asarray(w.strides)  # [vectors, k]
    if w.index_vector_dim >= len(w.dims):  # an implicit trailing index vector of one component
        return starts.reshape(w.dims)
    batch = [d for i, d in enumerate(w.dims) if i != w.index_vector_dim]
    return np.moveaxis(starts.reshape(*batch, k), -1, w.index_vector_dim)


def _distinct_keys(shape: Shape, c: Constraint, rng: np.random.Generator) -> np.ndarray | None:
    """Shuffled iotas along the sort axis (or over the whole array); None when `t` cannot hold them."""
    t = shape.element_type
    per_row = c.distinct_axis is not None and c.key_dims == tuple(shape.dims) and shape.rank > 0
    m = shape.dims[c.distinct_axis] if per_row else shape.num_elements
    if m > _distinct_capacity(t):
        return None
    if per_row:
        vals = np.argsort(rng.random(shape.dims), axis=c.distinct_axis, kind="stable").astype(np.int64)
    else:
        vals = rng.permutation(m).astype(np.int64).reshape(shape.dims)
    if t.is_float or t.kind == "signed":
        vals -= m // 2
    return vals.astype(t.np_dtype)


def _distinct_capacity(t: PrimitiveType) -> int:
    """How many consecutive integers around 0 the type holds exactly."""
    if t.is_float:
        return 1 << (int(ml_dtypes.finfo(t.np_dtype).nmant) + 1)
    return 1 << t.bits


def _random_value(shape: Shape, rng: np.random.Generator, large: bool = False) -> Any:
    if shape.is_tuple:
        return tuple(_random_value(s, rng, large) for s in shape.tuple_shapes)
    if not shape.is_array:
        return TOKEN
    return _random_array(shape, rng, large)


def _log_uniform(dtype: np.dtype, size, rng: np.random.Generator) -> np.ndarray:
    """sign * [1, 2) * 2**e, e uniform over the normal exponents of `dtype` (float64 values)."""
    info = ml_dtypes.finfo(dtype)
    lo_exp, hi_exp = int(np.log2(float(info.smallest_normal))), int(np.log2(float(info.max)))
    exps = rng.integers(lo_exp, hi_exp + 1, size)
    mant = rng.uniform(1.0, 2.0, size)
    signs = np.where(rng.integers(0, 2, size) == 1, -1.0, 1.0)
    vals = signs * np.ldexp(mant, exps)
    return np.clip(vals, -float(info.max), float(info.max))


CHUNK = 1 << 20  # values drawn (as float64 / int64) per step, each step rounded into the result


def _random_array(shape: Shape, rng: np.random.Generator, large: bool = False) -> np.ndarray:
    """The result is allocated in its own type and filled CHUNK values at a time, so a big f32
    parameter never exists as a float64 array twice its size; the draws, and so the values, are
    those of one draw of all n values (the generators fill sequentially). `--large-float-range`
    draws its three streams (exponents, mantissas, signs) for all n values at once."""
    t = shape.element_type
    n = shape.num_elements
    if large and (t.is_float or t.is_complex):
        return _large_range_array(shape, rng)
    out = np.empty(n, dtype=t.np_dtype)
    for start in range(0, n, CHUNK):
        out[start:start + CHUNK] = _draw(t, min(CHUNK, n - start), rng)
    return out.reshape(shape.dims)


def _draw(t: PrimitiveType, n: int, rng: np.random.Generator) -> np.ndarray:
    lo, hi = FLOAT_RANGE
    if t.is_pred:
        return rng.integers(0, 2, n, dtype=np.int64).astype(bool)
    if t.is_float:
        return rng.uniform(lo, hi, n).astype(t.np_dtype)
    if t.is_complex:
        parts = rng.uniform(lo, hi, (n, 2))
        return (parts[:, 0] + 1j * parts[:, 1]).astype(t.np_dtype)
    rlo, rhi = SIGNED_RANGE if t.kind == "signed" else UNSIGNED_RANGE
    values = rng.integers(max(rlo, _int_min(t)), min(rhi, _int_max(t)) + 1, n, dtype=np.int64)
    return values.astype(t.np_dtype)


def _large_range_array(shape: Shape, rng: np.random.Generator) -> np.ndarray:
    t = shape.element_type
    n = shape.num_elements
    if t.is_float:
        vals = _log_uniform(t.np_dtype, n, rng)
    else:
        part = np.float32 if t.np_dtype == np.complex64 else np.float64
        parts = _log_uniform(np.dtype(part), (n, 2), rng)
        vals = parts[:, 0] + 1j * parts[:, 1]
    return vals.astype(t.np_dtype).reshape(shape.dims)
