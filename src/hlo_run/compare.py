"""Compare a run's results with a reference run, the way run_hlo_module does.

XLA's rule (xla/literal_comparison.cc): a floating-point element mismatches only when it exceeds
*both* bounds, `|a - e| > abs_bound` and `|a - e| / |e| > rel_bound`. NaN against NaN matches,
NaN against anything else is an infinite error, and so is an infinity against anything but the
same infinity. Complex numbers compare their real and imaginary parts separately. Integers and
pred compare exactly, whatever the bounds. Tuples compare leaf by leaf (`out0`, `out1`, ... in
depth-first order, as `--output` names them).

A bound left as None is fitted to each leaf's element type (`default_bounds`): f32, f64 and
complex types get run_hlo_module's 1e-3; bf16 and f16 2e-2 (a few units in the last place of
their 8 and 11 significant bits); f8 and narrower floats twice their machine epsilon (f8e4m3:
0.25, f8e5m2: 0.5, f4e2m1: 1.0); integers and pred compare exactly (bounds 0). A bound given as a
number applies to every leaf. Each leaf records the bounds it was compared with.

    >>> r = compare_values(np.float32([1, 2]), np.float32([1, 2.5]), 1e-3, 1e-3)
    >>> r.ok, r.leaves[0].mismatches
    (False, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlo_common.hlo.dtypes import from_numpy_dtype

WORST_SHOWN = 5
WIDE_FLOAT_BOUND = 1e-3  # f32, f64, complex: run_hlo_module's default
HALF_FLOAT_BOUND = 2e-2  # bf16, f16


def default_bounds(dtype) -> tuple[float, float]:
    """(abs, rel) bounds that fit an element type (see the module docstring)."""
    t = from_numpy_dtype(np.dtype(dtype))
    if t.kind == "complex" or t.name in ("f32", "f64"):
        return WIDE_FLOAT_BOUND, WIDE_FLOAT_BOUND
    if t.name in ("bf16", "f16"):
        return HALF_FLOAT_BOUND, HALF_FLOAT_BOUND
    if t.kind == "float":
        import ml_dtypes

        eps = 2.0 * float(ml_dtypes.finfo(t.np_dtype).eps)
        return eps, eps
    return 0.0, 0.0


def bounds_for(dtype, abs_bound: float | None, rel_bound: float | None) -> tuple[float, float]:
    """The bounds one leaf is compared with: the given ones, the type's default for the others."""
    fit_abs, fit_rel = default_bounds(dtype)
    return (fit_abs if abs_bound is None else abs_bound), (fit_rel if rel_bound is None else rel_bound)


@dataclass
class LeafComparison:
    """The comparison of one array leaf: counts, largest errors and the worst elements."""

    name: str
    shape_text: str
    elements: int = 0
    mismatches: int = 0
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    problem: str | None = None  # a structural difference (shape, type) instead of values
    abs_bound: float = 0.0
    rel_bound: float = 0.0
    worst: list[tuple[tuple[int, ...], Any, Any, float, float]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.problem is None and self.mismatches == 0

    def bounds_text(self) -> str:
        if self.abs_bound == 0 and self.rel_bound == 0 and self.shape_text.split("[")[0] in _EXACT:
            return "exact"
        return f"abs {self.abs_bound:g}, rel {self.rel_bound:g}"

    def summary_lines(self) -> list[str]:
        if self.problem is not None:
            return [f"{self.name}: {self.problem}"]
        head = (f"{self.name} ({self.shape_text}): {self.mismatches} of {self.elements} element(s) differ; "
                f"max abs error {self.max_abs_error:.6g}, max rel error {self.max_rel_error:.6g} "
                f"(bounds: {self.bounds_text()})")
        lines = [head]
        for index, actual, expected, abs_err, rel_err in self.worst:
            lines.append(f"  at {list(index)}: got {actual}, expected {expected} "
                         f"(abs error {abs_err:.6g}, rel error {rel_err:.6g})")
        return lines


@dataclass
class Comparison:
    leaves: list[LeafComparison]

    @property
    def ok(self) -> bool:
        return all(leaf.ok for leaf in self.leaves)

    @property
    def max_abs_error(self) -> float:
        return max((leaf.max_abs_error for leaf in self.leaves), default=0.0)

    @property
    def max_rel_error(self) -> float:
        return max((leaf.max_rel_error for leaf in self.leaves), default=0.0)

    def summary_lines(self) -> list[str]:
        return [line for leaf in self.leaves if not leaf.ok for line in leaf.summary_lines()]

    def bounds_lines(self) -> list[str]:
        """`out0 (bf16[3]): abs 0.02, rel 0.02` per leaf: the bounds each was compared with."""
        return [f"{leaf.name} ({leaf.shape_text}): {leaf.bounds_text()}" for leaf in self.leaves
                if leaf.problem is None]

    def one_line(self) -> str:
        bad = [leaf for leaf in self.leaves if not leaf.ok]
        if not bad:
            return "results match"
        first = bad[0]
        if first.problem is not None:
            return f"{first.name}: {first.problem}"
        total = sum(leaf.mismatches for leaf in bad)
        return (f"{total} element(s) in {len(bad)} output(s) differ; max abs error {self.max_abs_error:.3g}, "
                f"max rel error {self.max_rel_error:.3g}")


def flatten_leaves(value: Any) -> list[Any]:
    """The array leaves of a (possibly nested) tuple value, depth first; tokens are skipped."""
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in flatten_leaves(v)]
    if isinstance(value, np.ndarray) or np.isscalar(value):
        return [np.asarray(value)]
    return []


def compare_values(actual: Any, expected: Any, abs_bound: float | None = None,
                   rel_bound: float | None = None) -> Comparison:
    """Compare two results (arrays or nested tuples of arrays) leaf by leaf; a bound left None is
    fitted to each leaf's type (`default_bounds`)."""
    a_leaves, e_leaves = flatten_leaves(actual), flatten_leaves(expected)
    if len(a_leaves) != len(e_leaves):
        problem = f"{len(a_leaves)} output leaves, the reference has {len(e_leaves)}"
        return Comparison([LeafComparison("result", "", problem=problem)])
    return Comparison([compare_arrays(f"out{i}", a, e, abs_bound, rel_bound)
                       for i, (a, e) in enumerate(zip(a_leaves, e_leaves))])


def compare_arrays(name: str, actual: np.ndarray, expected: np.ndarray, abs_bound: float | None = None,
                   rel_bound: float | None = None) -> LeafComparison:
    shape_text = _shape_text(expected)
    leaf = LeafComparison(name, shape_text, elements=int(expected.size))
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        leaf.problem = f"got {_shape_text(actual)}, the reference has {shape_text}"
        return leaf
    try:
        abs_bound, rel_bound = bounds_for(expected.dtype, abs_bound, rel_bound)
    except KeyError:  # a dtype with no element type: compare exactly
        abs_bound, rel_bound = abs_bound or 0.0, rel_bound or 0.0
    leaf.abs_bound, leaf.rel_bound = abs_bound, rel_bound
    kind = from_numpy_dtype(expected.dtype).kind
    if kind == "complex":
        errors = [_float_errors(actual.real, expected.real), _float_errors(actual.imag, expected.imag)]
        abs_err = np.maximum(errors[0][0], errors[1][0])
        bad = (_fails(*errors[0], abs_bound, rel_bound)) | (_fails(*errors[1], abs_bound, rel_bound))
        rel_err = np.maximum(errors[0][1], errors[1][1])
    elif kind == "float":
        abs_err, rel_err = _float_errors(actual, expected)
        bad = _fails(abs_err, rel_err, abs_bound, rel_bound)
    else:  # integers and pred: exact
        a64, e64 = actual.astype(np.int64), expected.astype(np.int64)
        bad = a64 != e64
        abs_err = np.abs(a64.astype(np.float64) - e64.astype(np.float64))
        rel_err = np.where(bad, abs_err / np.maximum(np.abs(e64.astype(np.float64)), 1e-300), 0.0)
    _fill(leaf, actual, expected, abs_err, rel_err, bad)
    return leaf


def _float_errors(actual: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(actual).astype(np.float64)
    e = np.asarray(expected).astype(np.float64)
    with np.errstate(all="ignore"):
        abs_err = np.abs(a - e)
        both_nan = np.isnan(a) & np.isnan(e)
        same_inf = np.isinf(a) & np.isinf(e) & (a == e)
        abs_err = np.where(both_nan | same_inf, 0.0, abs_err)
        abs_err = np.where(np.isnan(abs_err), np.inf, abs_err)  # NaN against a number
        rel_err = np.where(abs_err == 0, 0.0, abs_err / np.abs(e))
        rel_err = np.where(np.isnan(rel_err), np.inf, rel_err)
    return abs_err, rel_err


def _fails(abs_err: np.ndarray, rel_err: np.ndarray, abs_bound: float, rel_bound: float) -> np.ndarray:
    return (abs_err > abs_bound) & (rel_err > rel_bound)


def _fill(leaf: LeafComparison, actual, expected, abs_err, rel_err, bad) -> None:
    leaf.mismatches = int(np.count_nonzero(bad))
    if abs_err.size:
        leaf.max_abs_error = float(np.max(abs_err))
        leaf.max_rel_error = float(np.max(rel_err))
    if not leaf.mismatches:
        return
    flat_bad = np.flatnonzero(np.asarray(bad).reshape(-1))
    order = np.argsort(-np.asarray(abs_err).reshape(-1)[flat_bad], kind="stable")[:WORST_SHOWN]
    for pos in flat_bad[order]:
        index = tuple(int(i) for i in np.unravel_index(pos, expected.shape)) if expected.ndim else ()
        leaf.worst.append((index, _scalar(actual, pos), _scalar(expected, pos),
                           float(abs_err.reshape(-1)[pos]), float(rel_err.reshape(-1)[pos])))


def _scalar(arr: np.ndarray, pos: int):
    v = arr.reshape(-1)[pos]
    kind = from_numpy_dtype(arr.dtype).kind
    if kind == "float":
        return float(v)
    if kind == "complex":
        return complex(v)
    if kind == "pred":
        return bool(v)
    return int(v)


_EXACT = frozenset({"pred", "s1", "s2", "s4", "s8", "s16", "s32", "s64", "u1", "u2", "u4", "u8", "u16",
                    "u32", "u64"})


def _shape_text(arr: np.ndarray) -> str:
    try:
        name = from_numpy_dtype(arr.dtype).name
    except KeyError:
        name = str(arr.dtype)
    return f"{name}[{','.join(str(d) for d in arr.shape)}]"
