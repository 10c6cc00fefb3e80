"""Builders for the instructions passes add (XLA's `hlo_creation_utils.h`): each `make_*` adds one
instruction to the computation of its first operand (or to `comp`) with its shape inferred.

The expanders (`logistic-expander`, `batchnorm_expander`, `select-and-scatter-expander`, ...) and
the canonicalizers (`dot_decomposer`, `gather_simplifier`, ...) build their replacement graphs
from these, so every new instruction gets a unique name and a default-layout shape.

    >>> one = make_scalar_like(x, 1.0)            # broadcast(constant(1)) shaped like x
    >>> y = make_binary("divide", one, make_binary("add", one, make_unary("exponential", x)))
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from hlo_common.hlo.attributes import SliceSpec
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape


def _comp(instr: HloInstruction) -> HloComputation:
    if instr.parent is None:
        raise ValueError(f"%{instr.name} is not in a computation")
    return instr.parent


def _etype(et: PrimitiveType | str) -> PrimitiveType:
    return PRIMITIVE_TYPES[et] if isinstance(et, str) else et


def make_constant(comp: HloComputation, value: Any, et: PrimitiveType | str,
                  name: str = "constant") -> HloInstruction:
    """A constant of element type `et` holding `value` (a scalar or an array)."""
    et = _etype(et)
    arr = np.asarray(value).astype(et.np_dtype)
    return comp.add_new_instruction("constant", [], Shape.array(et, arr.shape), literal=arr, name=name)


def make_broadcast(operand: HloInstruction, dims: Sequence[int],
                   dimensions: Sequence[int] = ()) -> HloInstruction:
    """broadcast(operand) to `dims`, operand dimension i landing on output dimension dimensions[i]."""
    shape = Shape.array(operand.shape.element_type, dims)
    return _comp(operand).add_new_instruction("broadcast", [operand], shape,
                                              {"dimensions": tuple(dimensions)})


def make_scalar_like(instr: HloInstruction, value: Any) -> HloInstruction:
    """XLA's MakeScalarLike: `value` in `instr`'s element type, broadcast to its shape."""
    const = make_constant(_comp(instr), value, instr.shape.element_type)
    if instr.shape.rank == 0:
        return const
    return make_broadcast(const, instr.shape.dims)


def make_unary(opcode: str, operand: HloInstruction) -> HloInstruction:
    return _comp(operand).add_new_instruction(opcode, [operand])


def make_binary(opcode: str, lhs: HloInstruction, rhs: HloInstruction) -> HloInstruction:
    return _comp(lhs).add_new_instruction(opcode, [lhs, rhs])


def make_compare(direction: str, lhs: HloInstruction, rhs: HloInstruction) -> HloInstruction:
    return _comp(lhs).add_new_instruction("compare", [lhs, rhs], attrs={"direction": direction})


def make_select(pred: HloInstruction, on_true: HloInstruction, on_false: HloInstruction) -> HloInstruction:
    return _comp(pred).add_new_instruction("select", [pred, on_true, on_false])


def make_convert(operand: HloInstruction, et: PrimitiveType | str) -> HloInstruction:
    if operand.shape.element_type is _etype(et):
        return operand
    shape = operand.shape.with_element_type(_etype(et))
    return _comp(operand).add_new_instruction("convert", [operand], shape)


def make_reshape(operand: HloInstruction, dims: Sequence[int]) -> HloInstruction:
    if tuple(dims) == operand.shape.dims:
        return operand
    shape = Shape.array(operand.shape.element_type, dims)
    return _comp(operand).add_new_instruction("reshape", [operand], shape)


def make_transpose(operand: HloInstruction, permutation: Sequence[int]) -> HloInstruction:
    if tuple(permutation) == tuple(range(operand.shape.rank)):
        return operand
    attrs = {"dimensions": tuple(permutation)}
    return _comp(operand).add_new_instruction("transpose", [operand], attrs=attrs)


def make_slice(operand: HloInstruction, starts: Sequence[int], limits: Sequence[int],
               strides: Sequence[int] | None = None) -> HloInstruction:
    strides = strides or [1] * len(starts)
    spec = SliceSpec(tuple(zip(starts, limits, strides)))
    return _comp(operand).add_new_instruction("slice", [operand], attrs={"slice": spec})


def make_concatenate(operands: Sequence[HloInstruction], dimension: int) -> HloInstruction:
    if len(operands) == 1:
        return operands[0]
    return _comp(operands[0]).add_new_instruction("concatenate", list(operands),
                                                  attrs={"dimensions": (dimension,)})


def make_gte(tup: HloInstruction, index: int) -> HloInstruction:
    return _comp(tup).add_new_instruction("get-tuple-element", [tup], attrs={"index": index})


def make_tuple(comp: HloComputation, elements: Sequence[HloInstruction]) -> HloInstruction:
    return comp.add_new_instruction("tuple", list(elements))


def make_iota(comp: HloComputation, et: PrimitiveType | str, dims: Sequence[int],
              dimension: int) -> HloInstruction:
    return comp.add_new_instruction("iota", [], Shape.array(_etype(et), dims), {"iota_dimension": dimension})


def scalar_computation(module: HloModule, opcode: str, et: PrimitiveType | str,
                       before: HloComputation | None = None, name: str | None = None) -> HloComputation:
    """A two-parameter scalar computation `opcode(x, y)` (a reducer) added to `module` before
    `before` (the computation that will call it; default the entry)."""
    et = _etype(et)
    comp = HloComputation(module.unique_computation_name(name or f"{opcode}.{et.name}.reducer"))
    scalar = Shape.array(et, ())
    x = comp.add_new_instruction("parameter", [], scalar, name="x", parameter_number=0)
    y = comp.add_new_instruction("parameter", [], scalar, name="y", parameter_number=1)
    comp.root = comp.add_new_instruction(opcode, [x, y])
    return add_embedded_computation(module, comp, before)


def make_reduce(operand: HloInstruction, init: HloInstruction, dimensions: Sequence[int],
                reducer: HloComputation) -> HloInstruction:
    return _comp(operand).add_new_instruction(
        "reduce", [operand, init], attrs={"dimensions": tuple(sorted(dimensions)), "to_apply": reducer})


def make_dot(lhs: HloInstruction, rhs: HloInstruction, attrs: dict[str, Any],
             et: PrimitiveType | None = None) -> HloInstruction:
    """A dot with dimension numbers (and precision) from `attrs`; result type `et` or the lhs type."""
    dot = HloInstruction.create("dot", [lhs, rhs], attrs=attrs)
    if et is not None:
        dot.shape = dot.shape.with_element_type(et)
    dot.name = _comp(lhs).unique_name("dot")
    return _comp(lhs).add_instruction(dot)


def add_embedded_computation(module: HloModule, comp: HloComputation,
                             before: HloComputation | None = None) -> HloComputation:
    """Add `comp` to `module` (renamed if its name is taken), placed before `before` (its caller)."""
    module.add_embedded_computation(comp)
    comps = module.computations
    comps.remove(comp)
    anchor = before if before is not None and before in comps else module.entry
    comps.insert(comps.index(anchor) if anchor in comps else len(comps), comp)
    return comp


def non_fusion_computations(module: HloModule) -> list[HloComputation]:
    """XLA's MakeNonFusionNonCompositeComputations: computations not called by a fusion or a
    composite call, in module order."""
    skip: set[int] = set()
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "fusion" or (instr.opcode == "call" and instr.attrs.get("is_composite")):
                skip.update(id(c) for c in instr.called_computations())
    return [c for c in module.computations if id(c) not in skip]
