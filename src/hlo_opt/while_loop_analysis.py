"""Trip counts of while loops (XLA's `while_loop_analysis.cc`), for `simplify-while-loops`.

A loop has a known trip count when one tuple element is an induction variable: the condition's
root is computed only from it (and constants) and the body updates it only from itself (and
constants). The count comes from the pattern `i = c0; i < N (or <=); i += k` when it matches, and
otherwise from running the condition and the update at compile time for a few iterations.

    >>> compute_while_loop_trip_count(while_op)       # 0, 1, ... or None when unknown
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.hlo_evaluation import try_evaluate

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_NOT_SCALAR_OPS = frozenset({"send", "send-done", "recv", "recv-done", "custom-call"})


def trace_through_copy_and_gte_tuple_chain(instr: HloInstruction) -> HloInstruction:
    """Skip copies and get-tuple-element(tuple(...)) pairs to the value's producer."""
    while True:
        if instr.opcode == "get-tuple-element" and instr.operands[0].opcode == "tuple":
            instr = instr.operands[0].operands[instr.attrs["index"]]
        elif instr.opcode in ("copy", "copy-start", "copy-done"):
            instr = instr.operands[0]
        else:
            return instr


def unique_gte(tup: HloInstruction, index: int) -> HloInstruction | None:
    """The one get-tuple-element of `tup` at `index` (None when there are none or several)."""
    found = [u for u in tup.users if u.opcode == "get-tuple-element" and u.attrs["index"] == index]
    return found[0] if len(found) == 1 else None


def _is_scalar_op(instr: HloInstruction) -> bool:
    from hlo_common.hlo.opcodes import SIDE_EFFECTING

    if instr.opcode in _NOT_SCALAR_OPS or instr.opcode in SIDE_EFFECTING:
        return False
    for comp in instr.called_computations():
        if not all(_is_scalar_op(i) for i in comp.instructions):
            return False
    return instr.shape.is_array and instr.shape.rank == 0


def gte_dependence_indices(out: HloInstruction, tup: HloInstruction) -> set[int] | None:
    """The indices i such that `out` is a scalar function of get-tuple-element(tup, i)s (through
    copies and tuples) and nothing else but constants; None otherwise."""
    if out.parent is not tup.parent or not tup.shape.is_tuple:
        return None
    indices: set[int] = set()
    seen: set[int] = set()
    work = [out]
    while work:
        instr = work.pop()
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        if instr is tup or instr.opcode == "parameter":
            return None
        if instr.opcode == "get-tuple-element":
            if instr.shape.rank != 0 or not instr.shape.is_array:
                return None
            source = instr.operands[0]
            while source.opcode == "copy":
                source = source.operands[0]
            if source is tup:
                indices.add(instr.attrs["index"])
            elif source.opcode == "tuple":
                work.extend(source.operands)
            else:
                return None
        elif instr.opcode == "copy":
            work.append(instr.operands[0])
        elif not _is_scalar_op(instr) or instr.opcode in ("fusion", "call"):
            return None
        else:
            work.extend(instr.operands)
    return indices or None


def get_loop_induction_var_tuple_idx(while_op: HloInstruction) -> int | None:
    """The tuple index N read by the condition alone and updated by the body from itself alone."""
    cond, body = while_op.attrs["condition"], while_op.attrs["body"]
    cond_indices = gte_dependence_indices(cond.root, cond.parameters[0])
    if cond_indices is None or len(cond_indices) != 1 or while_op.operands[0].opcode != "tuple":
        return None
    (index,) = cond_indices
    if body.root.opcode != "tuple":
        return None
    inc = trace_through_copy_and_gte_tuple_chain(body.root.operands[index])
    body_indices = gte_dependence_indices(inc, body.parameters[0])
    if body_indices != {index}:
        return None
    return index


def scalar_int(value: Any) -> int | None:
    """LiteralAsScalarInt64: an integer scalar (or one-element array) in int64 range, else None."""
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "iu":
        return None
    v = int(arr.reshape(()))
    return v if _INT64_MIN <= v <= _INT64_MAX else None


def _non_constant_operand(instr: HloInstruction) -> HloInstruction | None:
    found = None
    for op in instr.operands:
        if op.opcode != "constant":
            if found is not None and found is not op:
                return None
            found = op
    return found


def _induction_step(while_op: HloInstruction, index: int) -> int | None:
    body = while_op.attrs["body"]
    update = trace_through_copy_and_gte_tuple_chain(body.root.operands[index])
    indvar = _non_constant_operand(update)
    if indvar is None or update.opcode != "add" or \
            trace_through_copy_and_gte_tuple_chain(indvar) is not unique_gte(body.parameters[0], index):
        return None
    const = update.operands[1] if update.operands[0] is indvar else update.operands[0]
    if const.opcode != "constant" or const.shape.num_elements != 1 or const.literal_unknown:
        return None
    step = scalar_int(const.literal)
    return step if step is not None and step > 0 else None


def match_trivial_loop_trip_count(while_op: HloInstruction, index: int, init: int) -> int | None:
    """`i = init; i < N (or i <= N); i += k` with constant N and k > 0."""
    step = _induction_step(while_op, index)
    if step is None:
        return None
    cond = while_op.attrs["condition"]
    root = cond.root
    indvar = unique_gte(cond.parameters[0], index)
    if indvar is None or _non_constant_operand(root) is not indvar or root.opcode != "compare" \
            or root.operands[0] is not indvar:
        return None
    bound_instr = root.operands[1]
    if bound_instr.opcode != "constant" or bound_instr.shape.num_elements != 1 or bound_instr.literal_unknown:
        return None
    bound = scalar_int(bound_instr.literal)
    direction = root.attrs.get("direction")
    if bound is None or direction not in ("LT", "LE"):
        return None
    trips = bound - init
    if not _INT64_MIN <= trips <= _INT64_MAX:
        return None
    if direction == "LT":
        return 0 if trips <= 0 else (trips - 1) // step + 1
    return 0 if trips < 0 else trips // step + 1


def compute_while_loop_trip_count(while_op: HloInstruction, max_brute_force_iters: int = 128) -> int | None:
    """The exact number of iterations, from the pattern or by running the loop's scalar parts."""
    index = get_loop_induction_var_tuple_idx(while_op)
    if index is None:
        return None
    init_instr = trace_through_copy_and_gte_tuple_chain(while_op.operands[0].operands[index])
    value = try_evaluate(init_instr)
    if value is None:
        return None
    init = scalar_int(value)
    if init is not None:
        count = match_trivial_loop_trip_count(while_op, index, init)
        if count is not None:
            return count
    body, cond = while_op.attrs["body"], while_op.attrs["condition"]
    update = body.root.operands[index]
    body_indvar = _non_constant_operand(update)
    if body_indvar is None or body_indvar is not unique_gte(body.parameters[0], index):
        return None
    cond_indvar = _non_constant_operand(cond.root)
    if cond_indvar is None or cond_indvar is not unique_gte(cond.parameters[0], index):
        return None
    for trips in range(max_brute_force_iters + 1):
        keep_going = try_evaluate(cond.root, {id(cond_indvar): value})
        if keep_going is None:
            return None
        if not bool(np.asarray(keep_going)):
            return trips
        value = try_evaluate(update, {id(body_indvar): value})
        if value is None:
            return None
    return None
