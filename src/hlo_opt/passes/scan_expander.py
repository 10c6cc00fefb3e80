"""ScanExpander ("scan_expander"): a `scan` becomes a `while` loop that calls its body once per
position along the scan dimension.

Runs in the `optimization` pipeline after DynamicDimensionSimplifier, where XLA:GPU runs its scan
rewriters (no emitter takes a scan). `scan(inputs..., inits...), dimensions={d}, num_carries=C,
to_apply=%f` calls `%f(input slices..., carries...) -> (output slices..., new carries...)` and
returns `(outputs stacked along d..., final carries...)`; `is_reverse=true` walks d backwards.

    %scan = (f32[10], f32[]) scan(%operand, %init), dimensions={0}, num_carries=1, to_apply=%f
      =>
    %state = (s64[], f32[], f32[10], f32[10]) tuple(s64[] 0, %init, %operand, broadcast(f32[] 0))
    %while = (s64[], f32[], f32[10], f32[10]) while(%state), condition=%scan_condition, body=%scan_body
    %scan.1 = (f32[10], f32[]) tuple(get-tuple-element(%while, 3), get-tuple-element(%while, 1))

The loop state is (step, carries..., inputs..., outputs...); the condition is `step < length`.
The body slices every input at the step (dynamic-slice of size 1 along d, reshaped to drop d),
inlines `%f` on (slices..., carries...), writes each output slice into its array with a
dynamic-update-slice at the step, and adds 1 to the step. For a reverse scan the position is
`length - 1 - step`. Output arrays start as zeros. Scans inside fused computations are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import (
    add_embedded_computation, make_binary, make_broadcast, make_compare, make_constant, make_gte,
    make_reshape, make_tuple,
)
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes.op_expander_pass import OpExpanderPass
from hlo_opt.passes.select_and_scatter_expander import inline_into


@dataclass(frozen=True)
class _ScanParts:
    """How a scan's operands and results line up."""

    dim: int
    length: int
    num_carries: int
    num_inputs: int
    num_outputs: int
    reverse: bool

    @staticmethod
    def of(scan: HloInstruction) -> _ScanParts:
        carries = int(str(scan.attrs.get("num_carries", 0)))
        inputs = len(scan.operands) - carries
        results = len(scan.shape.tuple_shapes) if scan.shape.is_tuple else 1
        dim = int(scan.attrs["dimensions"][0])
        return _ScanParts(dim, scan.operands[0].shape.dims[dim], carries, inputs, results - carries,
                          str(scan.attrs.get("is_reverse", "false")).lower() == "true")


def _result_shapes(scan: HloInstruction) -> list[Shape]:
    return list(scan.shape.tuple_shapes) if scan.shape.is_tuple else [scan.shape]


def _loop_state_shape(scan: HloInstruction, parts: _ScanParts) -> Shape:
    """(step, carries..., inputs..., outputs...)."""
    inits = [op.shape for op in scan.operands[parts.num_inputs:]]
    inputs = [op.shape for op in scan.operands[:parts.num_inputs]]
    outputs = _result_shapes(scan)[:parts.num_outputs]
    return Shape.tuple_of([Shape.array("s64", ())] + inits + inputs + outputs)


def _condition(scan: HloInstruction, parts: _ScanParts, state: Shape) -> HloComputation:
    comp = HloComputation(f"{scan.name}_condition")
    param = comp.add_new_instruction("parameter", [], state, name="loop_state", parameter_number=0)
    step = make_gte(param, 0)
    comp.root = make_compare("LT", step, make_constant(comp, parts.length, "s64"))
    return comp


def _starts(comp: HloComputation, rank: int, dim: int, position: HloInstruction) -> list[HloInstruction]:
    zero = make_constant(comp, 0, "s64")
    return [position if d == dim else zero for d in range(rank)]


def _slice_input(x: HloInstruction, dim: int, position: HloInstruction) -> HloInstruction:
    comp = x.parent
    sizes = tuple(1 if d == dim else n for d, n in enumerate(x.shape.dims))
    piece = comp.add_new_instruction("dynamic-slice", [x] + _starts(comp, x.shape.rank, dim, position),
                                     attrs={"dynamic_slice_sizes": sizes})
    return make_reshape(piece, [n for d, n in enumerate(x.shape.dims) if d != dim])


def _update_output(array: HloInstruction, value: HloInstruction, dim: int,
                   position: HloInstruction) -> HloInstruction:
    comp = array.parent
    dims = [1 if d == dim else n for d, n in enumerate(array.shape.dims)]
    piece = make_reshape(value, dims)
    return comp.add_new_instruction(
        "dynamic-update-slice", [array, piece] + _starts(comp, array.shape.rank, dim, position))


def _body(scan: HloInstruction, parts: _ScanParts, state: Shape) -> HloComputation:
    comp = HloComputation(f"{scan.name}_body")
    param = comp.add_new_instruction("parameter", [], state, name="loop_state", parameter_number=0)
    step = make_gte(param, 0)
    carries = [make_gte(param, 1 + i) for i in range(parts.num_carries)]
    first_input = 1 + parts.num_carries
    inputs = [make_gte(param, first_input + i) for i in range(parts.num_inputs)]
    outputs = [make_gte(param, first_input + parts.num_inputs + i) for i in range(parts.num_outputs)]
    position = step
    if parts.reverse:
        position = make_binary("subtract", make_constant(comp, parts.length - 1, "s64"), step)
    args = [_slice_input(x, parts.dim, position) for x in inputs] + carries
    result = inline_into(comp, scan.attrs["to_apply"], args)
    leaves = [make_gte(result, i) for i in range(parts.num_outputs + parts.num_carries)] \
        if result.shape.is_tuple else [result]
    updated = [_update_output(a, v, parts.dim, position) for a, v in zip(outputs, leaves[:parts.num_outputs])]
    next_step = make_binary("add", step, make_constant(comp, 1, "s64"))
    comp.root = make_tuple(comp, [next_step] + leaves[parts.num_outputs:] + inputs + updated)
    return comp


@register_pass
@dataclass
class ScanExpander(OpExpanderPass):
    """Expands every scan of a non-fusion computation into a while loop; see the module docstring."""

    name = "scan_expander"

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        return (instr.opcode == "scan" and len(instr.attrs.get("dimensions") or ()) == 1
                and len(instr.operands) > int(str(instr.attrs.get("num_carries", 0))))

    def expand_instruction(self, scan: HloInstruction) -> HloInstruction | None:
        parts = _ScanParts.of(scan)
        comp = scan.parent
        module = comp.parent
        state = _loop_state_shape(scan, parts)
        condition = add_embedded_computation(module, _condition(scan, parts, state), comp)
        body = add_embedded_computation(module, _body(scan, parts, state), comp)
        zeros = [make_broadcast(make_constant(comp, np.zeros((), s.element_type.np_dtype), s.element_type),
                                s.dims) for s in _result_shapes(scan)[:parts.num_outputs]]
        init = make_tuple(comp, [make_constant(comp, 0, "s64")] + list(scan.operands[parts.num_inputs:])
                          + list(scan.operands[:parts.num_inputs]) + zeros)
        loop = comp.add_new_instruction("while", [init], state, {"condition": condition, "body": body})
        first_output = 1 + parts.num_carries + parts.num_inputs
        results = [make_gte(loop, first_output + i) for i in range(parts.num_outputs)]
        results += [make_gte(loop, 1 + i) for i in range(parts.num_carries)]
        if not scan.shape.is_tuple:
            return results[0]
        return make_tuple(comp, results)
