"""Interpreter handlers for custom-call: a table of known targets, each with documented meaning.

A custom call is opaque to XLA itself; the interpreter can only evaluate targets whose meaning is
known. Register one with `register_custom_call`:

    @register_custom_call("MoveToHost")
    def _move_to_host(instr, operands, ev):
        return operands[0]

An unknown target raises `InterpreterError` naming the instruction and the target. Later passes
(the cuBLAS gemm rewriter) add their targets (`__cublas$gemm`, ...) to this table.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from hlo_common.errors import InterpreterError
from hlo_common.hlo.annotations import ANNOTATION_TARGETS, SHARDING_MARKERS
from hlo_common.interpreter.registry import HANDLERS, TOKEN, register
from hlo_common.hlo.xla_builder_math import TARGETS as LIBRARY_MATH_TARGETS, decomposition_for

CUSTOM_CALL_TARGETS: dict[str, Callable] = {}


def register_custom_call(*targets: str) -> Callable:
    """Register a handler `fn(instr, operands, ev) -> value` for custom-call targets."""

    def deco(fn: Callable) -> Callable:
        for t in targets:
            if t in CUSTOM_CALL_TARGETS:
                raise AssertionError(f"two interpreter handlers for custom-call target '{t}'")
            CUSTOM_CALL_TARGETS[t] = fn
        return fn

    return deco


@register("custom-call")
def _custom_call(instr, operands, ev):
    target = str(instr.attrs.get("custom_call_target", ""))
    handler = CUSTOM_CALL_TARGETS.get(target)
    if target.startswith("xla_builder.") and instr.called_computations():
        handler = _call_decomposition
    elif target in LIBRARY_MATH_TARGETS:
        handler = _library_math
    if handler is None:
        raise InterpreterError(
            f"%{instr.name} (custom-call): the interpreter does not know custom-call target '{target}'")
    return handler(instr, operands, ev)


def _call_decomposition(instr, operands, ev):
    """xla_builder's library custom calls carry their own decomposition as the called computation."""
    return ev.call(instr.called_computations()[0], operands)


def _library_math(instr, operands, ev):
    """`xla_builder.math.*` without a computation: the decomposition XLA's builder library would
    attach (`hlo_common.xla_builder_math`, the one definition hlo-opt and hlo-codegen use too)."""
    comp = decomposition_for(instr)
    if comp is None:
        raise InterpreterError(f"%{instr.name} (custom-call {instr.attrs['custom_call_target']}): operands "
                               f"{[str(op.shape) for op in instr.operands]} do not fit the function")
    return ev.call(comp, operands)


# Annotations that only steer sharding, memory space or layout: on one device they pass the value
# on; sharding markers take exactly one operand (XLA's ShardingRemover checks it).
@register_custom_call(*sorted(ANNOTATION_TARGETS | {"SetBound", "SliceToDynamic", "X64Combine"}))
def _identity(instr, operands, ev):
    target = instr.attrs.get("custom_call_target")
    if target in SHARDING_MARKERS and len(operands) != 1:
        raise InterpreterError(f"%{instr.name} (custom-call {target}): takes exactly one operand, has "
                               f"{len(operands)} (XLA's ShardingRemover checks it and aborts)")
    x = operands[0] if operands else None
    if isinstance(x, np.ndarray) and instr.shape.is_array and x.shape != instr.shape.dims:
        raise InterpreterError(
            f"%{instr.name} (custom-call {instr.attrs.get('custom_call_target')}): result {instr.shape} "
            f"differs from the operand's {list(x.shape)}; this needs more than one device")
    return x


@register_custom_call("AllocateBuffer", "CreateBuffer")
def _allocate_buffer(instr, operands, ev):
    """A fresh (uninitialized in XLA) buffer: zeros here, so results are deterministic."""
    return _zeros(instr.shape)


def _zeros(shape):
    if shape.is_tuple:
        return tuple(_zeros(s) for s in shape.tuple_shapes)
    if not shape.is_array:
        return TOKEN
    return np.zeros(shape.dims, shape.element_type.np_dtype)


@register_custom_call("PadToStatic")
def _pad_to_static(instr, operands, ev):
    """(the padded data, then each dimension's size as s32): static shapes make sizes the bounds."""
    x = operands[0]
    sizes = tuple(np.array(d, np.int32) for d in np.shape(x))
    return (x,) + sizes


@register_custom_call("GetRngSeed")
def _get_rng_seed(instr, operands, ev):
    return np.array(ev.rng_seed, dtype=instr.shape.element_type.np_dtype)


@register_custom_call("TopK")
def _topk(instr, operands, ev):
    """The TopK custom call: (values, indices) of the k largest along the last dimension."""
    handler = HANDLERS.get("topk")
    if handler is None:
        raise InterpreterError(f"%{instr.name}: custom-call TopK needs the topk handler")
    import copy

    proxy = copy.copy(instr)
    proxy.opcode = "topk"
    proxy.attrs = dict(instr.attrs, k=instr.shape.tuple_shapes[0].dims[-1], largest=True)
    return handler(proxy, operands, ev)
