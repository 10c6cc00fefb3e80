"""Recognising the common scalar reducers, so reductions can take numpy fast paths.

A reduce, reduce-window, all-reduce or scatter names its combiner as a computation. Most are one
binary op of the two parameters; `classify_reducer` says which, whatever the parameter order or
element type, and returns None for anything else (the caller then uses `ev.map_computation`).

    >>> classify_reducer(parse_module(
    ...     "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(b, a) }"
    ... ).entry)
    'add'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloComputation
from hlo_common.hlo.shape import Shape

REDUCER_KINDS = ("add", "multiply", "maximum", "minimum", "and", "or")


def classify_reducer(comp: HloComputation) -> str | None:
    """"add" | "multiply" | "maximum" | "minimum" | "and" | "or" for `op(p0, p1)` reducers, else None.

    The computation must have exactly two scalar parameters of one element type, and its root must
    be that op applied to both of them (either order). For pred, `add` and `maximum` are reported as
    "or", `multiply` and `minimum` as "and", since they agree on booleans.
    """
    params = comp.parameters
    root = comp.root
    if len(params) != 2 or root is None or root.opcode not in REDUCER_KINDS:
        return None
    p0, p1 = params
    shapes = (p0.shape, p1.shape, root.shape)
    if any(s.is_tuple or not s.is_array or s.rank != 0 for s in shapes):
        return None
    if not (p0.shape.element_type is p1.shape.element_type is root.shape.element_type):
        return None
    if len(root.operands) != 2 or {id(o) for o in root.operands} != {id(p0), id(p1)}:
        return None
    et = root.shape.element_type
    kind = root.opcode
    if kind in ("and", "or") and not (et.is_pred or et.is_integer):
        return None
    if et.is_pred:
        kind = {"add": "or", "maximum": "or", "minimum": "and", "multiply": "and"}.get(kind, kind)
    return kind


# A fixed sample for `is_associative`: small integers are exact in every float type, so the two
# bracketings can only differ when the reducer itself is not associative.
_PROBE_SAMPLES = 64
_PROBE_SEED = 20240611


def is_associative(comp: HloComputation, ev: Any) -> bool:
    """True when the reducer `comp` (N accumulators, then N elements) combines associatively.

    Decided by evaluating f(f(x, y), z) and f(x, f(y, z)) on a fixed sample of small integer
    values (many ties, so tie-breaking rules such as argmax's smaller index are exercised too).
    A reducer that is not associative (XLA leaves its result to the evaluation order) must be
    folded in element order; an associative one may be folded as a tree.
    """
    params = comp.parameters
    n = len(params) // 2
    if n == 0 or len(params) != 2 * n:
        return False
    rng = np.random.default_rng(_PROBE_SEED)
    x, y, z = ([_probe_values(p.shape, rng) for p in params[:n]] for _ in range(3))
    try:
        left = ev.map_computation(comp, ev.map_computation(comp, x + y) + z)
        right = ev.map_computation(comp, x + ev.map_computation(comp, y + z))
    except HloError:
        return False
    return all(_same(a, b) for a, b in zip(left, right))


def _probe_values(shape: Shape, rng: np.random.Generator) -> np.ndarray:
    if shape.is_tuple or not shape.is_array or shape.rank != 0:
        raise HloError(f"reducer parameter of shape {shape} is not a scalar")
    et = shape.element_type
    if et.is_pred:
        return rng.integers(0, 2, _PROBE_SAMPLES).astype(bool)
    values = rng.integers(0 if et.kind == "unsigned" else -4, 5, _PROBE_SAMPLES)
    if et.is_complex:
        return (values + 1j * rng.integers(-4, 5, _PROBE_SAMPLES)).astype(et.np_dtype)
    return values.astype(np.float64 if et.is_float else np.int64).astype(et.np_dtype)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal element for element (NaN equal to NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    return bool(np.array_equal(a.astype(wide), b.astype(wide), equal_nan=True))
