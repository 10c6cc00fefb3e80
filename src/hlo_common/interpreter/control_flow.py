"""Interpreter handlers for calls, control flow and scheduling-only opcodes.

call, fusion (its fused computation is evaluated like a call), while, conditional (pred form and
branch-index form; an index outside [0, N) runs the last branch, as XLA defines), async-start /
-update / -done (the wrapped computation runs at start; the sugared form `<op>-start` without
`calls` runs the wrapped op's own handler), and the ops that only order things: opt-barrier,
after-all, add-dependency, domain.
"""

from __future__ import annotations

import copy

import numpy as np

from hlo_common.errors import InterpreterError
from hlo_common.interpreter.registry import HANDLERS, TOKEN, register


@register("call")
def _call(instr, operands, ev):
    return ev.call(instr.attrs["to_apply"], operands)


@register("fusion")
def _fusion(instr, operands, ev):
    return ev.call_fusion(instr, operands)


class WhileLimitReached(InterpreterError):
    """A while loop ran `--max-while-iterations` times and still wanted more."""


def while_limit_error(instr, limit: int) -> WhileLimitReached:
    from hlo_common.hlo.hlo_utils import instruction_place

    return WhileLimitReached(f"{instruction_place(instr)}: while %{instr.name} reached "
                             f"--max-while-iterations={limit} and its condition still holds")


@register("while")
def _while(instr, operands, ev):
    condition, body = instr.attrs["condition"], instr.attrs["body"]
    state = operands[0]
    limit = ev.max_while_iterations
    done = 0
    while bool(ev.call(condition, (state,))):
        if limit is not None and done >= limit:
            raise while_limit_error(instr, limit)
        args = [state]
        state = None  # the body owns the state: a buffer it updates for the last time is reused
        state = ev.call_owned(body, args)
        done += 1
    return state


@register("conditional")
def _conditional(instr, operands, ev):
    selector = np.asarray(operands[0])
    if "branch_computations" in instr.attrs:
        branches = instr.attrs["branch_computations"]
        index = int(selector)
        if index < 0 or index >= len(branches):
            index = len(branches) - 1
    else:
        branches = [instr.attrs["true_computation"], instr.attrs["false_computation"]]
        index = 0 if bool(selector) else 1
    return ev.call(branches[index], [operands[1 + index]])


@register("opt-barrier", "add-dependency", "domain")
def _first_operand(instr, operands, ev):
    return operands[0]


@register("after-all")
def _after_all(instr, operands, ev):
    return TOKEN


# -- async wrappers ---------------------------------------------------------------------------------------


def wrapped_op_result(instr, operands, ev, shape):
    """Run what an async-start (or a sugared `<op>-start`) wraps and return its result."""
    calls = instr.attrs.get("calls")
    if calls is not None:
        comp = calls[0] if isinstance(calls, list) else calls
        return ev.call(comp, operands)
    wrapped = instr.attrs.get("async_wrapped_opcode")
    if wrapped is None:
        raise InterpreterError(f"%{instr.name}: async-start without a wrapped computation")
    base = str(wrapped)
    for suffix in ("-start", "-update", "-done"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    handler = HANDLERS.get(base)
    if handler is None:
        raise InterpreterError(f"%{instr.name}: the interpreter cannot evaluate wrapped opcode '{base}'")
    proxy = copy.copy(instr)  # same operands and attributes, the wrapped op's opcode and shape
    proxy.opcode = base
    proxy.shape = shape
    return handler(proxy, operands, ev)


@register("async-start")
def _async_start(instr, operands, ev):
    """((operands...), result, context...): the work happens here, the done op unpacks it."""
    shapes = instr.shape.tuple_shapes
    result = wrapped_op_result(instr, operands, ev, shapes[1])
    contexts = tuple(_zero_context(s) for s in shapes[2:])
    return (tuple(operands), result) + contexts


def _zero_context(shape):
    if shape.is_tuple:
        return tuple(_zero_context(s) for s in shape.tuple_shapes)
    if not shape.is_array:
        return TOKEN
    return np.zeros(shape.dims, shape.element_type.np_dtype)


@register("async-update")
def _async_update(instr, operands, ev):
    return operands[0]


@register("async-done")
def _async_done(instr, operands, ev):
    return operands[0][1]
