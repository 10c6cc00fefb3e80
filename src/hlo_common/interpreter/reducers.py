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

from hlo_common.ir import HloComputation

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
