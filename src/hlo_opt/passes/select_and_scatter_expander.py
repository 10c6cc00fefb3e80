"""SelectAndScatterExpander ("select-and-scatter-expander"): select-and-scatter becomes a variadic
reduce-window that finds each window's selected position, then a scatter of the source there.

Runs in the `optimization` pipeline (XLA:GPU has no select-and-scatter emitter):

    %s = f32[4,6] select-and-scatter(%operand, %source, %init), window=..., select=%ge, scatter=%add
      =>
    %iota.k = s32[4,6] iota(), iota_dimension=k                      (one per operand dimension)
    %rw = (f32[2,3], s32[2,3], s32[2,3]) reduce-window(%operand, %iota.0, %iota.1, %init, -1, -1),
          window=..., to_apply=%ge.reduce_window
    %idx = s32[2,3,2] concatenate(reshape(gte(%rw, 1)), reshape(gte(%rw, 2))), dimensions={2}
    %s = f32[4,6] scatter(broadcast(%init), %idx, %source), update_window_dims={},
         inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=2, to_apply=%add

The reduce-window computation carries (value, index...) pairs and keeps the left one when the
select computation (inlined into it) prefers it and it is a real element (index != -1), or when
the right one is the padding/init (index == -1). Windows made only of padding select index -1,
which the scatter skips. Every select-and-scatter of a non-fusion computation is expanded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import add_embedded_computation, make_broadcast, make_concatenate, \
    make_gte, make_iota, make_reshape
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes.op_expander_pass import OpExpanderPass


def inline_into(target: HloComputation, callee: HloComputation, args: list[HloInstruction]) -> HloInstruction:
    """Copy `callee`'s instructions into `target` with its parameters bound to `args`; its root's copy."""
    mapping = {id(p): args[p.parameter_number] for p in callee.parameters}
    for instr in callee.post_order():
        if instr.opcode == "parameter":
            continue
        copy = instr.clone_with_new_operands([mapping[id(o)] for o in instr.operands])
        copy.name = target.unique_name(instr.name)
        mapping[id(instr)] = target.add_instruction(copy)
    return mapping[id(callee.root)]


def window_reducer(sas: HloInstruction, rank: int) -> HloComputation:
    """(value, iota_0..iota_{r-1}) x 2 -> the pair the select computation picks."""
    select: HloComputation = sas.attrs["select"]
    et = sas.operands[0].shape.element_type
    comp = HloComputation(f"{select.name}.reduce_window")
    scalar, s32 = Shape.array(et, ()), Shape.array("s32", ())
    n = rank + 1

    def param(number: int, shape: Shape, name: str) -> HloInstruction:
        return comp.add_new_instruction("parameter", [], shape, name=name, parameter_number=number)

    lhs, rhs = param(0, scalar, "operand_lhs"), param(n, scalar, "operand_rhs")
    iota_lhs = [param(1 + k, s32, "iota_lhs") for k in range(rank)]
    iota_rhs = [param(n + 1 + k, s32, "iota_rhs") for k in range(rank)]
    neg_one = comp.add_new_instruction("constant", [], s32, literal=np.int32(-1))
    lhs_real = comp.add_new_instruction("compare", [iota_lhs[0], neg_one], attrs={"direction": "NE"})
    rhs_real = comp.add_new_instruction("compare", [iota_rhs[0], neg_one], attrs={"direction": "NE"})
    rhs_init = comp.add_new_instruction("not", [rhs_real])
    picked = inline_into(comp, select, [lhs, rhs])
    pred = comp.add_new_instruction("or", [comp.add_new_instruction("and", [picked, lhs_real]), rhs_init])
    results = [comp.add_new_instruction("select", [pred, lhs, rhs])]
    results += [comp.add_new_instruction("select", [pred, a, b]) for a, b in zip(iota_lhs, iota_rhs)]
    comp.root = comp.add_new_instruction("tuple", results)
    return add_embedded_computation(sas.parent.parent, comp, before=sas.parent)


@register_pass
@dataclass
class SelectAndScatterExpander(OpExpanderPass):
    """Rewrites select-and-scatter as a reduce-window (argmax-like) plus a scatter."""

    name = "select-and-scatter-expander"

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        return instr.opcode == "select-and-scatter"

    def expand_instruction(self, sas: HloInstruction) -> HloInstruction:
        comp = sas.parent
        operand, source, init = sas.operands
        rank = operand.shape.rank
        iotas = [make_iota(comp, "s32", operand.shape.dims, k) for k in range(rank)]
        reducer = window_reducer(sas, rank)
        neg_one = comp.add_new_instruction("constant", [], Shape.array("s32", ()), literal=np.int32(-1))
        shapes = [source.shape.with_element_type(operand.shape.element_type)]
        shapes += [Shape.array("s32", source.shape.dims)] * rank
        window = comp.add_new_instruction(
            "reduce-window", [operand] + iotas + [init] + [neg_one] * rank, Shape.tuple_of(shapes),
            {"window": sas.attrs["window"], "to_apply": reducer})
        columns = [make_reshape(make_gte(window, 1 + k), source.shape.dims + (1,)) for k in range(rank)]
        indices = make_concatenate(columns, source.shape.rank)
        dims = tuple(range(rank))
        return comp.add_new_instruction(
            "scatter", [make_broadcast(init, sas.shape.dims), indices, source], sas.shape,
            {"update_window_dims": (), "inserted_window_dims": dims, "scatter_dims_to_operand_dims": dims,
             "index_vector_dim": source.shape.rank,
             "to_apply": sas.attrs["scatter"]})
