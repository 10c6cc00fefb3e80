"""Indexing through a fused computation (XLA's `ComputeGroupedOutputToInputIndexing`).

Where it sits: emitters and the computation partitioner ask, for a fusion root (or a hero),
which elements of every instruction and fused parameter one output element reads. Starting
from the identity map on the target, the fused computation is walked users-before-operands;
each instruction's output-to-input maps (op_indexing.py) are composed onto every map that
reached it, simplified, and collected per producer. A producer read in several ways gets
several maps (`p0 + transpose(p0)` gives `(d0, d1) -> (d0, d1)` and `(d0, d1) -> (d1, d0)`);
equal maps are merged, so reshape chains that cancel give one identity map.

    >>> from hlo_common.hlo.parser import parse_module
    >>> m = parse_module('''
    ... f { p0 = f32[8,16] parameter(0)
    ...     c = f32[128] reshape(p0)
    ...     ROOT e = f32[8,16] reshape(c) }
    ... ENTRY e { p = f32[8,16] parameter(0)
    ...     ROOT r = f32[8,16] fusion(p), kind=kLoop, calls=f }''')
    >>> fusion_output_to_input_indexing(m.entry.root).to_string()
    'operand id = 0 (d0, d1) -> (d0, d1), domain: d0 in [0, 7], d1 in [0, 15]'
"""

from __future__ import annotations

from hlo_codegen.indexing.indexing_map import IndexingMap
from hlo_codegen.indexing.op_indexing import compute_output_to_input_indexing, output_shape
from hlo_codegen.indexing.operand_indexing import (
    HloInstructionIndexing, OperandIndexing, compose_operand_indexing,
)
from hlo_common.hlo.ir import HloComputation, HloInstruction


def compute_grouped_output_to_input_indexing(
        computation: HloComputation, target: HloInstruction
) -> dict[HloInstruction, list[OperandIndexing]]:
    """Maps from `target`'s output index to every instruction of `computation` it depends on.

    Keys are instructions (fused parameters included), in the order they are reached; each
    value is a duplicate-free list. `target` itself maps to the identity."""
    initial = OperandIndexing(IndexingMap.identity(output_shape(target).dims))
    grouped: dict[HloInstruction, list[OperandIndexing]] = {target: [initial]}
    order = computation.post_order()
    start = next(i for i, instr in enumerate(order) if instr is target)
    for instr in reversed(order[:start + 1]):
        consumers = grouped.get(instr)
        if consumers is None or instr.opcode == "parameter":
            continue
        producer_indexing = compute_output_to_input_indexing(instr, 0)
        for operand, producer_maps in zip(instr.operands, producer_indexing.indexing_maps):
            bucket = grouped.setdefault(operand, [])
            for producer in producer_maps:
                for consumer in consumers:
                    composed = compose_operand_indexing(consumer, producer)
                    composed = composed.simplify().remove_unused_symbols()
                    if composed not in bucket:
                        bucket.append(composed)
    return grouped


def fusion_root(computation: HloComputation, output_id: int = 0) -> HloInstruction:
    """The instruction computing output `output_id` (through a root tuple of a multi-output fusion)."""
    root = computation.root
    if root.opcode == "tuple":
        return root.operands[output_id]
    return root


def fusion_output_to_input_indexing(fusion: HloInstruction, output_id: int = 0) -> HloInstructionIndexing:
    """For each operand of `fusion`, the maps from output `output_id` to that operand's indices."""
    computation = fusion.fused_computation()
    grouped = compute_grouped_output_to_input_indexing(computation, fusion_root(computation, output_id))
    groups = []
    for operand_id in range(len(fusion.operands)):
        groups.append(grouped.get(computation.parameter(operand_id), []))
    return HloInstructionIndexing(groups)
