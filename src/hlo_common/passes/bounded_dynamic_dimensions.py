"""BoundedDynamicDimensions ("bounded-dynamic-dimensions"): bounded dynamic dimensions made static
at their bounds.

Where it sits: hlo-codegen's prepare pipeline (`hlo_codegen.compiler.prepare_pipeline`) runs it on
codegen's own module after the call graph is flat and *before* its static-shape check, which then
only has unbounded dimensions (`?`) left to refuse. XLA:GPU's counterpart is `DynamicPadder`, which keeps
the real sizes beside padded buffers and masks; this module does not.

The rule, exactly the reference interpreter's (`hlo_common.interpreter`: get/set-dimension-size in
`data_movement.py`, SetBound / SliceToDynamic / PadToStatic in `custom_call.py`): every bounded
dynamic dimension is static at its bound, so arrays are full bound-sized and

- every shape's `<=N` dimension (instructions, tuples, buffers, the entry computation layout) is `N`;
- `get-dimension-size` is an s32 constant: the dimension's bound;
- `set-dimension-size` is its operand (its size operand is dropped);
- the custom calls `SetBound` and `SliceToDynamic` are their first operand, when that has the
  result's (now static) shape; SliceToDynamic's size operands are dropped;
- `PadToStatic` is `tuple(operand, one s32 constant per dimension: its bound)`;
- `dynamic-reshape` is a `reshape` of its first operand (the size operands dropped) when the
  bounds hold as many elements as the operand, and an HloError otherwise.

That is also what a run with full-size arguments sees (hlo-run's fake arguments). A program whose
dynamic sizes shrink at run time is outside this rule: XLA would mask the padding, neither the
interpreter nor hlo-codegen does. A module with any unbounded dimension is left as it is, so the
static-shape check refuses it with its usual message. The manifest stores the module as rewritten
here, so the interpreter reference (`hlo-run --reference-platform interpreter`) and the entry
signature both see the static shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


# -- shapes -----------------------------------------------------------------------------------------
def static_shape(shape: Shape) -> Shape:
    """`shape` with every bounded dynamic dimension (`<=N`) static at N; `?` dimensions stay."""
    if shape.buffer_of is not None:
        inner = static_shape(shape.buffer_of)
        return shape if inner is shape.buffer_of else replace(shape, buffer_of=inner)
    if shape.tuple_shapes is not None:
        elements = tuple(static_shape(s) for s in shape.tuple_shapes)
        if all(a is b for a, b in zip(elements, shape.tuple_shapes)):
            return shape
        return replace(shape, tuple_shapes=elements)
    if "<=" not in shape.dynamic:
        return shape
    return replace(shape, dynamic=tuple("" if d == "<=" else d for d in shape.dynamic))


def _has_unbounded(shape: Shape) -> bool:
    if shape.buffer_of is not None:
        return _has_unbounded(shape.buffer_of)
    if shape.tuple_shapes is not None:
        return any(_has_unbounded(s) for s in shape.tuple_shapes)
    return "?" in shape.dynamic


# -- instruction rules (keyed by opcode, custom calls by target) -----------------------------------
def _s32_constant(comp: HloComputation, name: str, value: int, before: HloInstruction) -> HloInstruction:
    const = HloInstruction(name, "constant", Shape.array("s32", ()))
    const.literal = np.asarray(value, np.int32)
    return comp.add_instruction(const, before=before)


def _same_as(instr: HloInstruction, value: HloInstruction) -> HloInstruction:
    """`value`, or a copy of it in `instr`'s layout when only the layouts differ."""
    if value.shape.to_string() == instr.shape.to_string():
        return value
    if not value.shape.compatible(instr.shape):
        raise HloError(f"%{instr.name} ({_what(instr)}): result {instr.shape} does not have the shape of "
                       f"its operand {value.shape} with its dimensions at their bounds "
                       f"(in computation {instr.parent.name})")
    copy = HloInstruction(f"{instr.name}.copy", "copy", instr.shape, [value])
    return instr.parent.add_instruction(copy, before=instr)


def _what(instr: HloInstruction) -> str:
    if instr.opcode == "custom-call":
        return f"custom-call {instr.attrs.get('custom_call_target')}"
    return instr.opcode


def _get_dimension_size(instr: HloInstruction) -> HloInstruction:
    dim = int(instr.attrs["dimensions"][0])
    return _s32_constant(instr.parent, f"{instr.name}.bound", instr.operands[0].shape.dims[dim], instr)


def _first_operand(instr: HloInstruction) -> HloInstruction:
    return _same_as(instr, instr.operands[0])


def _pad_to_static(instr: HloInstruction) -> HloInstruction:
    comp, data = instr.parent, instr.operands[0]
    data = _same_as_leaf(instr, data)
    sizes = [_s32_constant(comp, f"{instr.name}.bound{i}", d, instr) for i, d in enumerate(data.shape.dims)]
    return comp.add_instruction(HloInstruction(f"{instr.name}.tuple", "tuple", instr.shape, [data] + sizes),
                                before=instr)


def _same_as_leaf(instr: HloInstruction, data: HloInstruction) -> HloInstruction:
    """PadToStatic's data leaf: `data` in the layout of the result's element 0."""
    shapes = instr.shape.tuple_shapes
    if shapes is None or len(shapes) != 1 + data.shape.rank:
        raise HloError(f"%{instr.name} (custom-call PadToStatic): result {instr.shape} is not (data, one s32 "
                       f"per dimension of {data.shape}) (in computation {instr.parent.name})")
    want = shapes[0]
    if want.to_string() == data.shape.to_string():
        return data
    if not want.compatible(data.shape):
        raise HloError(f"%{instr.name} (custom-call PadToStatic): data {data.shape} does not fit the "
                       f"result's {want} (in computation {instr.parent.name})")
    copy = HloInstruction(f"{instr.name}.copy", "copy", want, [data])
    return instr.parent.add_instruction(copy, before=instr)


def _dynamic_reshape(instr: HloInstruction) -> HloInstruction:
    data = instr.operands[0]
    if data.shape.num_elements != instr.shape.num_elements:
        raise HloError(f"%{instr.name} (dynamic-reshape): the bounds of {instr.shape} hold "
                       f"{instr.shape.num_elements} elements, the operand {data.shape} "
                       f"{data.shape.num_elements}; only a reshape at the bounds is supported by hlo-codegen "
                       f"(in computation {instr.parent.name})")
    reshape = HloInstruction(f"{instr.name}.reshape", "reshape", instr.shape, [data])
    return instr.parent.add_instruction(reshape, before=instr)


Rule = Callable[[HloInstruction], HloInstruction]
OPCODE_RULES: dict[str, Rule] = {
    "get-dimension-size": _get_dimension_size,
    "set-dimension-size": _first_operand,
    "dynamic-reshape": _dynamic_reshape,
}
CUSTOM_CALL_RULES: dict[str, Rule] = {
    "SetBound": _first_operand,
    "SliceToDynamic": _first_operand,
    "PadToStatic": _pad_to_static,
}


def _rule_for(instr: HloInstruction) -> Rule | None:
    if instr.opcode == "custom-call":
        return CUSTOM_CALL_RULES.get(instr.attrs.get("custom_call_target"))
    return OPCODE_RULES.get(instr.opcode)


# -- the pass ----------------------------------------------------------------------------------------
@register_pass
@dataclass
class BoundedDynamicDimensions(HloPass):
    """Bounded dynamic dimensions (`<=N`) become static at N; get/set-dimension-size ops resolved."""

    name = "bounded-dynamic-dimensions"

    def run(self, module: HloModule) -> bool:
        return resolve_bounded_dynamic_dimensions(module)


def resolve_bounded_dynamic_dimensions(module: HloModule) -> bool:
    """In place: bounded dynamic dimensions static at their bounds, and the dynamic-size ops
    rewritten as the module docstring says. Returns whether anything changed. A module with an
    unbounded (`?`) dimension anywhere is left unchanged for `check_static_shapes` to refuse."""
    comps = list(module.computations)
    if any(_has_unbounded(i.shape) for c in comps for i in c.instructions):
        return False
    changed = False
    for comp in comps:
        for instr in comp.instructions:
            new = static_shape(instr.shape)
            if new is not instr.shape:
                instr.shape, changed = new, True
    if module.entry_computation_layout is not None:
        params, result = module.entry_computation_layout
        module.entry_computation_layout = ([static_shape(p) for p in params], static_shape(result))
    for comp in comps:
        for instr in list(comp.instructions):
            rule = _rule_for(instr)
            if rule is None:
                continue
            replacement = rule(instr)
            _replace(comp, instr, replacement)
            changed = True
    return changed


def _replace(comp: HloComputation, instr: HloInstruction, new: HloInstruction) -> None:
    """`new` takes `instr`'s uses (and, when the rule made it, its control dependencies and
    metadata); `instr` goes. An operand standing in for `instr` keeps its own dependencies: the
    dynamic-size ops do no work, so ordering against them orders nothing."""
    if new.parent is comp and not new.users and new not in instr.operands:
        for pred in list(instr.control_predecessors):
            pred.add_control_dependency_to(new)
        for succ in list(instr.control_successors):
            new.add_control_dependency_to(succ)
        new.metadata = list(instr.metadata)
    instr.replace_all_uses_with(new)
    comp.remove_instruction(instr)
