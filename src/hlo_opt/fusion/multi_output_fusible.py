"""Multi-output fusion on the GPU: which fusions may share one kernel as several outputs, and the
edits that build such fusions (XLA's multi-output rules of `gpu_fusible.cc`, the checks of
`multi_output_fusion.cc`, and `HloFusionInstruction::FuseInstructionIntoMultiOutput` /
`MergeFusionInstructionIntoMultiOutput`; xla-facts.md section d).

The `multi_output_fusion` pass (`hlo_opt.passes.multi_output_fusion`) runs after priority fusion
and asks two questions, each answered by a `FusionDecision` (truthy, or the rule and a one-line
reason):

- sibling fusion: may two users of one operand become one kernel that reads the operand once?
  (`is_sibling_fusion_candidate`, `can_fuse_siblings`)
- producer-consumer fusion: may a producer with several users be computed inside one consumer
  and written out from there as an extra output, instead of running as a kernel of its own?
  (`is_producer_multi_output_fusible`, `producer_candidate_is_fusible`)

    %a = f32[8] fusion(%p), kind=kLoop, calls=%fa        %m = (f32[8], f32[]) fusion(%p), ...
    %b = f32[] fusion(%p), kind=kInput, calls=%fb   =>   %a = f32[8] get-tuple-element(%m), index=0
                                                         %b = f32[] get-tuple-element(%m), index=1

The rules, in XLA's order (names are the `rule` of the decision):

| rule                     | XLA                                                                |
|--------------------------|--------------------------------------------------------------------|
| not_mof_root             | IsFusibleAsMultiOutputFusionRoot (reduce/transpose input, loop,    |
|                          | elementwise; never custom fusions)                                 |
| producer_not_mof_fusible | IsProducerMultiOutputFusible: multi-output, in-place (DUS, scatter |
|                          | ...), not loop-fusible, physically transposing producers           |
| heroes                   | FusionHeroesAreCompatible: reductions of one kind and shape,       |
|                          | equivalent tiled transposes, no transpose with a reduction         |
| loop_shapes              | ShapesCompatibleForMultiOutputFusion: one loop shape (reshape or   |
|                          | transpose bitcasts of each other)                                  |
| cycle                    | OperandReachableFromProducer / siblings connected                  |
| column_reduction         | a column reduction and an elementwise sibling read the operand in  |
|                          | conflicting orders (XLA at HEAD; off by default, see below)        |
| non_overlapping_slices   | ParameterSlicesAreNonOverlapping (operands >= 1 KiB)               |
| multiple_dus             | LegalToFuse: a dynamic-update-slice root on either side            |
| shared_memory,           | FusionFitsInBudget: 48 KiB shared memory, 8 unnested reductions,   |
| unnested_reductions,     | 96 operands + outputs (counting both outputs: the producer stays  |
| operand_limit            | an output)                                                         |
| ir_size                  | ProducerConsumerMergedTooLarge                                     |
| slower                   | the performance model says the fused kernel is slower              |

The column_reduction rule is XLA's newest (multi_output_fusion.cc at HEAD); the XLA that
`bench/fusion_vs_xla.py` compares against (jaxlib 0.10.2) does not have it and sibling-fuses a
column reduction with elementwise users of its operand (e.g. the three users of the gradient in a
batch-norm backward: one kernel fewer). The pass follows the XLA it is measured against by
default; `multi_output_fusion(column_reduction_rule=True)` gives HEAD's behaviour.

Hero queries come from `hlo_opt.fusion.multi_output_heroes` (cached per fusion by `HeroCache`), budgets
from `hlo_opt.fusion.gpu_fusible`, IR sizes from the cost analysis (`hlo_opt.gpu_model.cost_analysis`,
the IR-size check priority fusion uses too). The edits that build multi-output fusions, and the
reachability the cycle checks ask, are in `hlo_opt.fusion.multi_output_editing`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hlo_common.analysis.sharing import in_place_pairs
from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.gpu.ir_emission_utils import tiled_transpose_description, transpose_is_bitcast
from hlo_common.gpu.reduction_utils import is_reduction_from_or_to_contiguous_dimensions
from hlo_opt.fusion.gpu_fusible import (
    ALLOW,
    MAX_OPERANDS_AND_OUTPUTS_PER_FUSION,
    MAX_UNNESTED_REDUCTION_OUTPUTS_PER_FUSION,
    FusionDecision,
    fusion_kind_attr,
    is_custom_fusion,
    is_fusible,
    is_input_fusible_scatter,
    num_unnested_reductions,
    shared_memory_usage,
)
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape
from hlo_opt.fusion.multi_output_heroes import (
    HeroCache, get_real_hero_for_multi_output_fusion, is_column_reduction_hero, is_input_fusible_reduction,
    is_input_fusible_transpose, shapes_compatible_for_multi_output_fusion,
)
from hlo_opt.gpu_model.cost_analysis import GpuHloCostAnalysis

if TYPE_CHECKING:
    from hlo_opt.fusion.multi_output_editing import Reachability

SMALL_SLICED_OPERAND_BYTES = 1024  # ParameterSlicesAreNonOverlapping: smaller operands always allowed

_LOOP_FUSIBLE = frozenset({"broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice", "gather",
                           "pad", "reduce-window", "reshape", "reverse", "slice", "transpose"})


def _forbid(rule: str, reason: str) -> FusionDecision:
    return FusionDecision.forbid(rule, reason)


# -- instruction queries ----------------------------------------------------------------------------
def is_multi_output_fusion(instr: HloInstruction) -> bool:
    """A fusion whose root is a tuple (XLA's IsMultiOutputFusion)."""
    return instr.opcode == "fusion" and instr.fused_computation().root.opcode == "tuple"


def _root(fusion: HloInstruction) -> HloInstruction:
    return fusion.fused_computation().root


def is_effective_scalar(shape: Shape) -> bool:
    return shape.is_array and all(d == 1 for d in shape.dims)


def is_input_fusible(instr: HloInstruction, cache: HeroCache | None = None) -> bool:
    return is_fusible(instr) and (is_input_fusible_reduction(instr, cache) or is_input_fusible_scatter(instr)
                                  or is_input_fusible_transpose(instr, cache))


def is_universally_loop_fusible(instr: HloInstruction) -> bool:
    op = instr.opcode
    if is_elementwise(op) and instr.operands and op != "copy":
        return True
    if op == "copy":
        return tiled_transpose_description(instr) is None
    if op == "fusion":
        return fusion_kind_attr(instr) == "kLoop"
    if op == "bitcast":
        a, b = instr.shape, instr.operands[0].shape
        return a.is_array and b.is_array and a.element_type.bits == b.element_type.bits
    return op in _LOOP_FUSIBLE


def is_loop_fusible_as_producer(instr: HloInstruction) -> bool:
    if not is_fusible(instr):
        return False
    if instr.opcode in ("iota", "constant"):
        return True
    if instr.opcode == "reduce":
        return not instr.shape.is_tuple
    return is_universally_loop_fusible(instr)


def is_physically_transposing(instr: HloInstruction) -> bool:
    """A copy, or a transpose that moves data (XLA's IsPhysicallyTransposing), or a fusion with one."""
    if instr.opcode == "fusion":
        return any(is_physically_transposing(i) for i in instr.fused_computation().instructions)
    if instr.opcode == "copy":
        return True
    return instr.opcode == "transpose" and not transpose_is_bitcast(
        instr.operands[0].shape, instr.shape, instr.attrs["dimensions"])


def is_nestable_variadic_reduction(instr: HloInstruction) -> bool:
    if not instr.shape.is_tuple:
        return False
    if instr.opcode == "reduce":
        return not is_reduction_from_or_to_contiguous_dimensions(instr)
    return fusion_kind_attr(instr) == "kLoop" and _root(instr).opcode == "reduce"


def is_fusible_as_multi_output_fusion_root(instr: HloInstruction, cache: HeroCache | None = None) -> bool:
    """Reductions, tiled transposes, loop fusions and elementwise ops may root a multi-output
    fusion; scatters and custom fusions may not."""
    return (is_fusible(instr) and not is_custom_fusion(instr)
            and (is_input_fusible_reduction(instr, cache) or is_input_fusible_transpose(instr, cache)
                 or fusion_kind_attr(instr) == "kLoop" or is_elementwise(instr.opcode)))


def choose_fusion_kind(producer: HloInstruction, consumer: HloInstruction,
                       cache: HeroCache | None = None) -> str:
    """kInput when either side needs an input emitter (reduction, transpose, scatter), else kLoop."""
    return "kInput" if is_input_fusible(consumer, cache) or is_input_fusible(producer, cache) else "kLoop"


def is_producer_multi_output_fusible(producer: HloInstruction) -> FusionDecision:
    if is_multi_output_fusion(producer):
        return _forbid("producer_not_mof_fusible", "producer is a multi-output fusion")
    if in_place_pairs(producer):
        return _forbid("producer_not_mof_fusible", "in-place operations are present")
    if not is_loop_fusible_as_producer(producer):
        return _forbid("producer_not_mof_fusible", "producer is not loop-fusible")
    if is_physically_transposing(producer):
        return _forbid("producer_not_mof_fusible", "producer is physically transposing")
    return ALLOW


def _output_buffers(instr: HloInstruction) -> int:
    """ShapeUtil::SubshapeCount: every node of the shape tree (a tuple counts itself)."""
    shape = instr.shape
    if not shape.is_tuple:
        return 1
    return 1 + sum(_subshapes(s) for s in shape.tuple_shapes)


def _subshapes(shape: Shape) -> int:
    return 1 + sum(_subshapes(s) for s in shape.tuple_shapes) if shape.is_tuple else 1


def fusion_fits_in_budget(instr1: HloInstruction, instr2: HloInstruction, device: DeviceDescription = H100,
                          is_consumer_producer_fusion: bool = False) -> FusionDecision:
    """XLA's FusionFitsInBudget for a multi-output fusion of `instr1` and `instr2`: shared memory,
    unnested reductions, and operands plus the outputs of both (both stay outputs)."""
    used = shared_memory_usage(instr1, device) + shared_memory_usage(instr2, device)
    if used > device.shared_memory_per_block:
        return _forbid("shared_memory", f"shared memory usage would be over the budget of "
                                        f"{device.shared_memory_per_block}B ({used}B)")
    n = num_unnested_reductions(instr1, device) + num_unnested_reductions(instr2, device)
    if n > MAX_UNNESTED_REDUCTION_OUTPUTS_PER_FUSION:
        return _forbid("unnested_reductions", f"over {MAX_UNNESTED_REDUCTION_OUTPUTS_PER_FUSION} "
                                              f"unnested reductions in fusion ({n})")
    outputs = _output_buffers(instr1) + _output_buffers(instr2)
    if len(instr1.operands) + len(instr2.operands) - 1 + outputs <= MAX_OPERANDS_AND_OUTPUTS_PER_FUSION:
        return ALLOW
    operands = {id(o): o for o in list(instr1.operands) + list(instr2.operands)}
    operands.pop(id(instr1), None)
    operands.pop(id(instr2), None)
    if is_consumer_producer_fusion and len(operands) <= len(instr1.operands):
        return ALLOW
    if len(operands) + outputs > MAX_OPERANDS_AND_OUTPUTS_PER_FUSION:
        return _forbid("operand_limit", f"number of operands and output buffers ({len(operands) + outputs}) "
                                        f"is larger than allowed budget per fusion "
                                        f"({MAX_OPERANDS_AND_OUTPUTS_PER_FUSION})")
    return ALLOW


def _unique_slice(parent: HloInstruction, instr: HloInstruction):
    """The one slice through which `instr` reads `parent` (FindUniqueSlice), or None."""
    if instr.opcode == "slice":
        return instr
    if instr.opcode != "fusion":
        return None
    body = instr.fused_computation()
    result = None
    for i, op in enumerate(instr.operands):
        if op is not parent:
            continue
        if result is not None:
            return None
        param = body.parameter(i)
        if len(param.users) != 1:
            return None
        result = _unique_slice(param, param.users[0])
        if result is None:
            return None
    return result


def parameter_slices_are_non_overlapping(instr1: HloInstruction, instr2: HloInstruction,
                                         parent: HloInstruction) -> FusionDecision:
    """Two siblings that read disjoint slices of a big common operand share nothing worth a
    multi-output kernel."""
    if parent.shape.is_tuple or parent.shape.byte_size() < SMALL_SLICED_OPERAND_BYTES:
        return ALLOW
    s1, s2 = _unique_slice(parent, instr1), _unique_slice(parent, instr2)
    if s1 is None or s2 is None:
        return ALLOW
    for (lo1, hi1, _), (lo2, hi2, _) in zip(s1.attrs["slice"].dims, s2.attrs["slice"].dims):
        if not (lo1 < hi2 and lo2 < hi1):
            return _forbid("non_overlapping_slices", "slices are non-overlapping")
    return ALLOW


def legal_to_fuse(instr1: HloInstruction, instr2: HloInstruction,
                  device: DeviceDescription = H100) -> FusionDecision:
    """The in-place DUS emitter takes one DUS root only; then the budget."""
    if _root(instr1).opcode == "dynamic-update-slice" or (
            instr2.opcode == "fusion" and _root(instr2).opcode == "dynamic-update-slice"):
        return _forbid("multiple_dus", "can't fuse multiple DUSs")
    return fusion_fits_in_budget(instr1, instr2, device, False)


def fusion_priority(instr: HloInstruction) -> int:
    """Multi-output fusions first, then fusions, then plain ops (keeps fusion opportunities)."""
    if is_multi_output_fusion(instr):
        return 2
    return 1 if instr.opcode == "fusion" else 0


def operand_reachable_from_producer(producer: HloInstruction, consumer: HloInstruction,
                                    reach: Reachability) -> FusionDecision:
    for operand in consumer.operands:
        if operand is not producer and reach.is_reachable(producer, operand):
            return _forbid("cycle", f"{producer.name} would introduce a cycle when fused")
    return ALLOW


# -- the two questions of the pass --------------------------------------------------------------------
def is_sibling_fusion_candidate(instr: HloInstruction, cache: HeroCache | None = None) -> bool:
    if not instr.users or not is_fusible_as_multi_output_fusion_root(instr, cache):
        return False
    if is_nestable_variadic_reduction(instr):
        return False
    if is_multi_output_fusion(instr):
        # Its body is taken apart and fused op by op: tuple-shaped ops inside (variadic reduces)
        # would need tuple-shaped fusion producers, which fusion_utils does not build.
        body = instr.fused_computation()
        if any(i.shape.is_tuple for i in body.instructions if i is not body.root):
            return False
        return all(u.opcode == "get-tuple-element" for u in instr.users)
    # Tuple-shaped outputs that are not a root tuple (variadic reduces) would become nested
    # tuples inside the multi-output fusion, which hlo-codegen does not emit: left alone.
    return not instr.shape.is_tuple


def can_fuse_siblings(sibling1: HloInstruction, sibling2: HloInstruction, common: HloInstruction,
                      reach: Reachability, device: DeviceDescription = H100,
                      cache: HeroCache | None = None, column_rule: bool = False) -> FusionDecision:
    """`column_rule`: refuse a column reduction with an elementwise sibling (XLA at HEAD)."""
    if reach.is_connected(sibling1, sibling2):
        return _forbid("cycle", f"{sibling1.name} and {sibling2.name} are connected")
    decision = shapes_compatible_for_multi_output_fusion(sibling1, sibling2, cache)
    if not decision:
        return decision
    if column_rule and _column_reduction_with_elementwise(sibling1, sibling2, cache):
        return _forbid("column_reduction",
                       "sibling multi-output fusion of a column reduction with an element-wise root")
    decision = parameter_slices_are_non_overlapping(sibling1, sibling2, common)
    if not decision:
        return decision
    return legal_to_fuse(sibling1, sibling2, device)


def _column_reduction_with_elementwise(sibling1: HloInstruction, sibling2: HloInstruction,
                                       cache: HeroCache | None) -> bool:
    hero1 = get_real_hero_for_multi_output_fusion(sibling1, cache)
    hero2 = get_real_hero_for_multi_output_fusion(sibling2, cache)

    def plain(hero: HloInstruction) -> bool:
        return (not is_reduction_from_or_to_contiguous_dimensions(hero)
                and tiled_transpose_description(hero) is None and hero.opcode != "transpose")

    return ((is_column_reduction_hero(hero1) and plain(hero2))
            or (is_column_reduction_hero(hero2) and plain(hero1)))


def producer_candidate_is_fusible(producer: HloInstruction, consumer: HloInstruction, reach: Reachability,
                                  device: DeviceDescription = H100, model=None,
                                  cache: HeroCache | None = None,
                                  cost: GpuHloCostAnalysis | None = None) -> FusionDecision:
    """May `producer` be computed inside `consumer` and written out from there? `model` is a
    GpuPerformanceModel (None: no run-time check); IR sizes come from `cost`, else the model's
    cost analysis, else a fresh one."""
    if not is_fusible_as_multi_output_fusion_root(consumer, cache):
        return _forbid("not_mof_root", "consumer not eligible as multi-output fusion root")
    if consumer.shape.is_tuple and not is_multi_output_fusion(consumer):
        return _forbid("not_mof_root", "consumer has a tuple-shaped output that is not a root tuple")
    if consumer.shape.is_tuple and any(u.opcode != "get-tuple-element" for u in consumer.users):
        # one more output would change the tuple that user reads whole
        return _forbid("not_mof_root", "a user of the multi-output consumer reads its whole tuple")
    decision = shapes_compatible_for_multi_output_fusion(consumer, producer, cache)
    if not decision:
        return decision
    decision = operand_reachable_from_producer(producer, consumer, reach)
    if not decision:
        return decision
    decision = fusion_fits_in_budget(producer, consumer, device, False)
    if not decision:
        return decision
    if cost is None:
        cost = model.cost if model is not None else GpuHloCostAnalysis(device)
    if cost.producer_consumer_merged_too_large(producer, consumer):
        return _forbid("ir_size", "will generate too large IR")
    if model is not None:
        t = model.estimate_run_times_for_multi_output_fusion(producer, consumer)
        if t.time_fused > t.time_unfused:
            return _forbid("slower", f"will execute slower if fused ({t.time_fused * 1e6:.3f} us > "
                                     f"{t.time_unfused * 1e6:.3f} us)")
    return ALLOW
