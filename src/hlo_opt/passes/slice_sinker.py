"""SliceSinker ("slice-sinker", XLA's `slice_sinker.cc`): an elementwise op applied to slices of
whole tensors becomes one op on the tensors, sliced afterwards.

Runs in every `simplification` round, before reshape-mover. A group qualifies when

1. every operand of an elementwise op is a slice, all with the same starts, limits and strides,
   of tensors of the same dimensions (the slice sources);
2. the group's ops have that op's opcode, attributes and result element type;
3. the i-th operand of each is a slice of the same source as the first op's i-th operand, every
   operand of an op taken at the same indices;
4. the group's elements add up to at least a source's (so no element is computed more often
   than before).

Then the op runs once on the sources and each op of the group is replaced by the slice of that
result it computed:

    %a = f32[6] slice(f32[10] %p), slice={[0:6]}      %e = f32[10] exponential(%p)
    %ea = f32[6] exponential(%a)                  =>   %ea' = f32[6] slice(%e), slice={[0:6]}
    %b = f32[4] slice(f32[10] %p), slice={[6:10]}      %eb' = f32[4] slice(%e), slice={[6:10]}
    %eb = f32[4] exponential(%b)

Overlapping slices compute their shared elements once; adjacent ones run as one kernel where
they were several. A model that takes a cosine of each element of a vector separately (the
mass matrix of the compile bench: 35 `cos(slice(q))` of one f32[35] after reshape-mover) gets
one cosine kernel, as XLA:GPU does, where it had 35.

As in XLA: the computations are visited in the module's order and each one's instructions in
post order; the group is gathered from the users of the slices of the first operand's source, in
user order (an op reading two such slices is listed twice, and counts twice for rule 4); the new
op is a clone of the group's first op on the sources, each new slice a clone of the replaced op's
first operand; the replaced ops are left without users for DCE, which also keeps them from
being grouped again.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


def _same_slicing(a: HloInstruction, b: HloInstruction) -> bool:
    return a.attrs["slice"].dims == b.attrs["slice"].dims


def _on_similar_slices(instr: HloInstruction) -> bool:
    """Rule 1: every operand a slice, all of sources of one dimensions at the same indices."""
    if any(op.opcode != "slice" for op in instr.operands):
        return False
    first = instr.operands[0]
    return all(op.operands[0].shape.dims == first.operands[0].shape.dims and _same_slicing(first, op)
               for op in instr.operands[1:])


def _similar(op_on_slices: HloInstruction, candidate: HloInstruction) -> bool:
    """Rules 2 and 3 for `candidate` against `op_on_slices` (an op already replaced has no users)."""
    if not candidate.users or candidate.opcode != op_on_slices.opcode \
            or candidate.attrs != op_on_slices.attrs \
            or candidate.shape.element_type != op_on_slices.shape.element_type \
            or len(candidate.operands) != len(op_on_slices.operands):
        return False
    first = candidate.operands[0]
    return all(s.opcode == "slice" and s.operands[0] is op_on_slices.operands[i].operands[0]
               and _same_slicing(first, s) for i, s in enumerate(candidate.operands))


def _group(op_on_slices: HloInstruction) -> list[HloInstruction] | None:
    """The ops similar to `op_on_slices` (itself included), when rule 4 holds."""
    source = op_on_slices.operands[0].operands[0]
    group = [user for s in source.users if s.opcode == "slice"
             for user in s.users if _similar(op_on_slices, user)]
    elements = sum(op.shape.num_elements for op in group)
    if not group or elements < group[0].operands[0].operands[0].shape.num_elements:
        return None
    return group


def _sink(sources: list[HloInstruction], group: list[HloInstruction]) -> None:
    first = group[0]
    comp = first.parent
    whole = first.clone_with_new_operands(sources, shape=sources[0].shape.with_element_type(
        first.shape.element_type))
    whole.name = comp.unique_name(first.name)
    comp.add_instruction(whole)
    for op in group:
        part = op.operands[0].clone_with_new_operands([whole], shape=op.shape)
        part.name = comp.unique_name(op.operands[0].name)
        comp.add_instruction(part)
        op.replace_all_uses_with(part)


@register_pass
class SliceSinker(HloPass):
    """Elementwise ops on same-indexed slices that cover their sources run once, then are sliced."""

    name = "slice-sinker"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in list(module.computations):
            for instr in comp.post_order():
                if not is_elementwise(instr.opcode) or not instr.operands or not instr.users:
                    continue
                if not _on_similar_slices(instr):
                    continue
                group = _group(instr)
                if group is None:
                    continue
                _sink([op.operands[0] for op in instr.operands], group)
                changed = True
        return changed
