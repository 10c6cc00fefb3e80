"""Coalescing analysis: is each input of a (possibly hypothetical) fusion read with coalesced
memory accesses? (a simplification of XLA's `xla/service/gpu/model/coalescing_analysis.cc`).

Where it sits: the performance model (`performance_model.py`) divides the DRAM bandwidth of an
uncoalesced read by (DRAM-to-L2 transaction size / element size).

XLA computes loop and transpose fusions from thread-to-input indexing maps and falls back to a
heuristic elsewhere. Here, documented simplification, every fusion kind uses XLA's heuristic
(`IsReadCoalescedHeuristic`) plus one indexing fact:

- a tiled-transpose fusion ("transpose" kind) reads everything coalesced (shared-memory tiles);
- otherwise an op that changes the physical minor dimension (a transpose, or a layout-changing
  copy) anywhere in the fusion makes all of its reads uncoalesced, unless it transposes a
  broadcast or an iota (XLA's allowance);
- a reduction fusion made of a reduction producer and a reduction consumer is uncoalesced;
- the operand a gather indexes (operand 0) is read uncoalesced when its slices are one element
  wide along the physical minor dimension (each thread its own random row); gathered rows are
  contiguous and coalesced, as XLA's indexing analysis finds.
"""

from __future__ import annotations

from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
from hlo_common.gpu.ir_emission_utils import physical_dims, transpose_permutation
from hlo_common.gpu.reduction_utils import is_reduction_from_or_to_contiguous_dimensions
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise


def transposes_minor_dimension(instr: HloInstruction) -> bool:
    """The op reads its operand along a different physical minor dimension than it writes."""
    perm = transpose_permutation(instr)
    if perm is None:
        return False
    out, operand = instr.shape, instr.operands[0].shape
    out_dims = [d for d in physical_dims(out) if out.dims[d] != 1]
    in_dims = [d for d in physical_dims(operand) if operand.dims[d] != 1]
    if not out_dims or not in_dims:
        return False
    return perm[out_dims[-1]] != in_dims[-1]


def _is_broadcast_chain(instr: HloInstruction) -> bool:
    while True:
        if instr.opcode in ("broadcast", "iota"):
            return True
        if len(instr.operands) != 1 or (instr.opcode != "bitcast" and not is_elementwise(instr.opcode)):
            return False
        instr = instr.operands[0]


def coalesced_inputs(analysis: FusionAnalysis) -> dict[HloInstruction, bool]:
    """Outer-computation input -> read coalesced, for every input of the analysed fusion."""
    uncoalesced = uncoalesced_inputs(analysis)
    result = dict.fromkeys(analysis.adaptor.input_values(), True)
    for value in uncoalesced:
        result[value] = False
    return result


def uncoalesced_inputs(analysis: FusionAnalysis) -> dict[HloInstruction, None]:
    """The inputs (outer values) of the analysed fusion read uncoalesced, in input order, as an
    ordered set; usually none, found without listing the inputs (the performance model asks for
    every producer-consumer pair it costs)."""
    adaptor = analysis.adaptor
    if analysis.emitter_kind == "transpose":
        return {}
    ok = True
    for node in adaptor.with_opcode("transpose", "copy"):  # transposes_minor_dimension's opcodes
        if transposes_minor_dimension(node) and not _is_broadcast_chain(node.operands[0]):
            ok = False
            break
    if ok and analysis.emitter_kind == "reduction" and len(adaptor.parts) == 2:
        def has_reduction(part) -> bool:
            if part.comp is None:
                return is_reduction_from_or_to_contiguous_dimensions(part.instr)
            return any(is_reduction_from_or_to_contiguous_dimensions(i) for i in part.comp.with_opcode("reduce"))
        if all(has_reduction(p) for p in adaptor.parts):
            ok = False
    if not ok:
        return dict.fromkeys(adaptor.input_values())
    result: dict[HloInstruction, None] = {}
    for node in adaptor.with_opcode("gather"):
        if _gathers_single_elements(node):
            src = adaptor.operands(node)[0]
            if not adaptor.contains(src):
                result[adaptor.external_value(src)] = None
    return result


def _gathers_single_elements(gather: HloInstruction) -> bool:
    """The gather's slices are one element wide along the operand's physical minor dimension
    (every thread reads its own row: no two neighbours share a transaction)."""
    operand = gather.operands[0].shape
    sizes = gather.attrs.get("slice_sizes", ())
    minor = [d for d in physical_dims(operand) if operand.dims[d] != 1]
    return bool(minor) and len(sizes) == operand.rank and sizes[minor[-1]] == 1
