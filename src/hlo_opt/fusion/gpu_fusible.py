"""Which producer may be fused into which consumer on the GPU, apart from whether it pays
(XLA's `gpu_fusible.cc` and `PriorityFusionQueue::CanFuse` in `priority_fusion.cc`; xla-facts.md
section d). Priority fusion asks `can_fuse`; the cost model decides the rest.

    >>> decision = can_fuse(producer, consumer)
    >>> bool(decision), decision.rule, decision.reason
    (False, 'both_significant_reduce', 'both the producer and the consumer contain a reduce')

One small function per rule, all with one signature, `rule(producer, consumer, ctx)` (`ctx` a
`FusionContext`: the device, the fusion-analysis cache and the cost analysis), each returning `ALLOW` or a
`FusionDecision` named after the function that says why in one line; `can_fuse` checks them in
XLA's order:

| rule                               | XLA                                                    |
|------------------------------------|--------------------------------------------------------|
| producer_is_root                   | CanFuse: not fusing into the output of the root        |
| not_fusible                        | IsFusible (side effects, ops the emitters cannot fuse) |
| consumer_is_lone_bitcast           | CanFuseWithNativeEmitter: never into a lone bitcast   |
| scatter_output_or_in_place_operand | CanEmitInputFusedScatter                               |
| both_significant_reduce            | reduce (input/output >= 16) on both sides              |
| reduction_becomes_loop             | epilogue would turn a reduction fusion into a loop     |
| shared_memory                      | FusionFitsInBudget: over 48 KiB of shared memory      |
| unnested_reductions                | FusionFitsInBudget: more than 8 unnested reductions    |
| operand_limit                      | FusionFitsInBudget: more than 96 operands + outputs    |
| ir_size_limit                      | ProducerConsumerMergedTooLarge: IR estimate over 10000 |
| in_place                           | InstructionFusion::ShouldFuseInPlaceOp                 |

The budgets' two counts, `shared_memory_usage` and `num_unnested_reductions` (XLA's), are the
ones multi-output fusion checks too. Emitter kinds come from `hlo_common.gpu.hlo_fusion_analysis`
(through the context's cache), the same analysis hlo-codegen picks its emitters with.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.analysis.sharing import in_place_pairs
from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.gpu.ir_emission_utils import tiled_transpose_description
from hlo_common.gpu.reduction_utils import (
    is_reduction_from_or_to_contiguous_dimensions, reduction_shared_memory_bytes,
)
from hlo_common.hlo.graph import depth_first
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_opt.gpu_model.cost_analysis import MAX_IR_SIZE, GpuHloCostAnalysis
from hlo_opt.gpu_model.fusion_analysis_cache import HloFusionAnalysisCache

MAX_OPERANDS_AND_OUTPUTS_PER_FUSION = 96
MAX_UNNESTED_REDUCTION_OUTPUTS_PER_FUSION = 8
SIGNIFICANT_REDUCTION_RATIO = 16

# Non-elementwise ops the loop and input emitters can fuse (priority_fusion.cc's IsFusible).
FUSIBLE_NON_ELEMENTWISE = frozenset({
    "copy", "iota", "constant", "reduce", "broadcast", "concatenate", "dynamic-slice",
    "dynamic-update-slice", "gather", "pad", "reduce-window", "reshape", "reverse", "scatter",
    "slice", "transpose", "fusion",
})
NEVER_FUSIBLE = frozenset({"domain", "parameter", "while", "conditional", "call"})


@dataclass(frozen=True)
class FusionDecision:
    """Allowed (truthy), or forbidden by `rule` for `reason` (one line)."""

    rule: str | None = None
    reason: str | None = None

    def __bool__(self) -> bool:
        return self.rule is None

    def explain(self) -> str:
        return "" if self.rule is None else f"{self.reason} [{self.rule}]"

    @staticmethod
    def forbid(rule: str, reason: str) -> FusionDecision:
        return FusionDecision(rule, reason)


ALLOW = FusionDecision()


@dataclass
class FusionContext:
    """What the rules consult besides the two instructions: the device, the fusion analyses and
    the cost analysis (IR sizes). Priority fusion passes its cost model's, so the rules and the
    model see one analysis and one cost figure per instruction."""

    device: DeviceDescription = H100
    analyses: HloFusionAnalysisCache | None = None
    cost: GpuHloCostAnalysis | None = None

    def __post_init__(self) -> None:
        if self.analyses is None:
            self.analyses = HloFusionAnalysisCache(self.device)
        if self.cost is None:
            self.cost = GpuHloCostAnalysis(self.device)


# -- instruction queries -----------------------------------------------------------------------------
def is_elementwise_instr(instr: HloInstruction) -> bool:
    return is_elementwise(instr.opcode)


def is_fusible_bitcast(instr: HloInstruction) -> bool:
    """A bitcast that keeps the element bit width (priority fusion fuses these first)."""
    if instr.opcode != "bitcast":
        return False
    a, b = instr.shape, instr.operands[0].shape
    return a.is_array and b.is_array and a.element_type.bits == b.element_type.bits


def fusion_kind_attr(instr: HloInstruction) -> str | None:
    """The `kind=` of a fusion instruction (kLoop, kInput, ...); None for any other op."""
    return instr.attrs.get("kind") if instr.opcode == "fusion" else None


def is_custom_fusion(instr: HloInstruction) -> bool:
    """A kCustom fusion (library calls, Triton, cuDNN, our normalization kernels): never fused."""
    return fusion_kind_attr(instr) == "kCustom"


def is_fusible(instr: HloInstruction) -> bool:
    """XLA's HloInstruction::IsFusible plus priority fusion's list of what its emitters fuse."""
    op = instr.opcode
    if op in NEVER_FUSIBLE:
        return False
    if op == "fusion":
        return not is_custom_fusion(instr)
    if op not in ("map", "reduce", "reduce-window") and instr.has_side_effect:
        return False
    if op == "rng" and len(instr.users) > 1:
        return False
    if is_elementwise(op) or is_fusible_bitcast(instr):
        return True
    return op in FUSIBLE_NON_ELEMENTWISE


def fused_instructions(instr: HloInstruction) -> list[HloInstruction]:
    """The instructions a fusion computes (parameters excluded), or [instr] for a plain one."""
    if instr.opcode == "fusion":
        return [i for i in instr.fused_computation().instructions if i.opcode != "parameter"]
    return [instr]


def fused_with_opcode(instr: HloInstruction, *opcodes: str) -> list[HloInstruction]:
    """The instructions of `opcodes` a fusion computes (from its computation's opcode index: a
    question about a fusion of thousands of ops costs what the answer holds), or [instr]."""
    if instr.opcode == "fusion":
        return instr.fused_computation().with_opcode(*opcodes)
    return [instr] if instr.opcode in opcodes else []


def is_unnested_reduction(instr: HloInstruction, device: DeviceDescription = H100) -> bool:
    """XLA's IsReductionFromOrToContiguousDimensions: a reduce the reduction emitter takes."""
    return instr.opcode == "reduce" and is_reduction_from_or_to_contiguous_dimensions(
        instr, device.threads_per_warp)


# -- budgets (FusionFitsInBudget's two counts, the ones priority and multi-output fusion share) --------
def shared_memory_usage(instr: HloInstruction, device: DeviceDescription = H100) -> int:
    """XLA's SharedMemoryUsage (gpu_fusible.cc), the shared memory the fusion budget counts: a
    fusion sums its instructions (nested fusions included), an unnested reduce budgets its tile
    for the widest vector (`reduction_shared_memory_bytes`), a tiled transpose (a transpose or
    layout-changing copy the transpose emitter tiles) its shared tile, any other op nothing. The
    kernels hlo-codegen emits stay within it (the tests check every testdata fusion)."""
    if instr.opcode == "fusion":
        return sum(shared_memory_usage(i, device)
                   for i in fused_with_opcode(instr, "fusion", "reduce", "transpose", "copy"))
    if is_unnested_reduction(instr, device):
        return reduction_shared_memory_bytes(instr)
    desc = tiled_transpose_description(instr)
    return desc.shmem_usage if desc is not None else 0


def num_unnested_reductions(instr: HloInstruction, device: DeviceDescription = H100) -> int:
    """XLA's NumUnnestedReductions: the reduces of `instr` the reduction emitter takes (a fusion's,
    nested fusions included); more than 8 in one kernel risk spilling."""
    if instr.opcode == "fusion":
        return sum(num_unnested_reductions(i, device) for i in fused_with_opcode(instr, "fusion", "reduce"))
    return 1 if is_unnested_reduction(instr, device) else 0


# -- the rules -----------------------------------------------------------------------------------------
def producer_is_root(producer: HloInstruction, consumer: HloInstruction,
                     ctx: FusionContext) -> FusionDecision:
    comp = producer.parent
    if comp is not None and comp.root is producer:
        return FusionDecision.forbid("producer_is_root", "not fusing into the output of the root instruction")
    return ALLOW


def not_fusible(producer: HloInstruction, consumer: HloInstruction, ctx: FusionContext) -> FusionDecision:
    if not is_fusible(producer):
        return FusionDecision.forbid("not_fusible", f"the producer ({producer.opcode}) is not fusible")
    if not is_fusible(consumer):
        return FusionDecision.forbid("not_fusible", f"the consumer ({consumer.opcode}) is not fusible")
    if producer.shape.is_tuple:
        return FusionDecision.forbid("not_fusible", "the producer is a multi-output (tuple) value")
    return ALLOW


def consumer_is_lone_bitcast(producer: HloInstruction, consumer: HloInstruction,
                             ctx: FusionContext) -> FusionDecision:
    if is_fusible_bitcast(consumer):
        return FusionDecision.forbid("consumer_is_lone_bitcast",
                                     "not fusing into a single bitcast as consumer")
    return ALLOW


def is_input_fusible_scatter(instr: HloInstruction) -> bool:
    """A scatter, or an input fusion whose root is one (XLA's IsInputFusibleScatter)."""
    if instr.opcode == "scatter":
        return True
    return (instr.opcode == "fusion" and fusion_kind_attr(instr) == "kInput"
            and instr.fused_computation().root.opcode == "scatter")


def scatter_output_or_in_place_operand(producer: HloInstruction, consumer: HloInstruction,
                                       ctx: FusionContext) -> FusionDecision:
    """CanEmitInputFusedScatter: nothing fuses into a scatter's output, nor its in-place operand."""
    def forbid(reason: str) -> FusionDecision:
        return FusionDecision.forbid("scatter_output_or_in_place_operand", reason)

    if is_input_fusible_scatter(producer):
        return forbid("do not fuse into the output of scatter")
    if not is_input_fusible_scatter(consumer):
        return ALLOW
    if consumer.opcode == "fusion":
        updated = consumer.fused_computation().root.operands[0]
        if updated.opcode != "parameter":
            return forbid("the scatter's operand is computed inside the fusion")
        in_place = consumer.operands[updated.parameter_number]
    else:
        in_place = consumer.operands[0]
    if in_place is producer:
        return forbid("do not fuse into the in-place operand of scatter")
    if in_place in producer.operands:
        return forbid("the producer uses the in-place operand of a scatter")
    return ALLOW


def _contains_significant_reduce(instr: HloInstruction) -> bool:
    for node in fused_with_opcode(instr, "reduce"):
        if node.shape.is_array and node.shape.num_elements:
            if node.operands[0].shape.num_elements // node.shape.num_elements >= SIGNIFICANT_REDUCTION_RATIO:
                return True
    return False


def both_significant_reduce(producer: HloInstruction, consumer: HloInstruction,
                            ctx: FusionContext) -> FusionDecision:
    if _contains_significant_reduce(producer) and _contains_significant_reduce(consumer):
        return FusionDecision.forbid("both_significant_reduce",
                                     "both the producer and the consumer contain a reduce")
    return ALLOW


def reduction_becomes_loop(producer: HloInstruction, consumer: HloInstruction,
                           ctx: FusionContext) -> FusionDecision:
    """A reduction fusion's epilogue must keep the reduction emitter (the fused analysis loop)."""
    if not fused_with_opcode(producer, "reduce"):
        return ALLOW  # no reduce, no reduction emitter: spare the analysis
    if ctx.analyses.get(producer).emitter_kind != "reduction":
        return ALLOW
    if ctx.analyses.get_pair(producer, consumer).emitter_kind in ("loop", "in_place_dynamic_update_slice"):
        return FusionDecision.forbid("reduction_becomes_loop",
                                     "fusion into output of a reduce fusion would create a loop fusion")
    return ALLOW


def shared_memory(producer: HloInstruction, consumer: HloInstruction, ctx: FusionContext) -> FusionDecision:
    budget = ctx.device.shared_memory_per_block
    used = shared_memory_usage(producer, ctx.device) + shared_memory_usage(consumer, ctx.device)
    if used > budget:
        return FusionDecision.forbid("shared_memory", f"shared memory usage would be over the budget of "
                                                      f"{budget}B ({used}B)")
    return ALLOW


def unnested_reductions(producer: HloInstruction, consumer: HloInstruction,
                        ctx: FusionContext) -> FusionDecision:
    n = num_unnested_reductions(producer, ctx.device) + num_unnested_reductions(consumer, ctx.device)
    if n > MAX_UNNESTED_REDUCTION_OUTPUTS_PER_FUSION:
        return FusionDecision.forbid("unnested_reductions",
                                     f"over {MAX_UNNESTED_REDUCTION_OUTPUTS_PER_FUSION} unnested reductions "
                                     f"in fusion ({n})")
    return ALLOW


def _output_count(instr: HloInstruction) -> int:
    return len(instr.shape.tuple_shapes) if instr.shape.is_tuple else 1


def operand_limit(producer: HloInstruction, consumer: HloInstruction, ctx: FusionContext) -> FusionDecision:
    """The fused kernel's distinct operands plus outputs stay within ptxas' parameter budget."""
    operands = set()  # instructions hash by identity
    for ops in (consumer.operands, producer.operands):
        for op in ops:
            if op is not producer and op.opcode != "tuple" and op.opcode != "get-tuple-element":
                operands.add(op)
    n = len(operands) + _output_count(consumer)
    if n > MAX_OPERANDS_AND_OUTPUTS_PER_FUSION:
        return FusionDecision.forbid("operand_limit", f"number of operands and outputs ({n}) exceeds "
                                                      f"{MAX_OPERANDS_AND_OUTPUTS_PER_FUSION}")
    return ALLOW


def ir_size_limit(producer: HloInstruction, consumer: HloInstruction, ctx: FusionContext) -> FusionDecision:
    """ProducerConsumerMergedTooLarge, as the cost analysis estimates IR sizes."""
    if ctx.cost.producer_consumer_merged_too_large(producer, consumer):
        merged = ctx.cost.merged_ir_size(producer, consumer)
        return FusionDecision.forbid("ir_size_limit", "the fusion would result in an overly large code "
                                                      f"duplication (IR size {merged:g} > {MAX_IR_SIZE})")
    return ALLOW


def _non_elementwise(instr: HloInstruction) -> list[HloInstruction]:
    return [i for i in fused_instructions(instr)
            if i.opcode not in ("fusion", "bitcast", "parameter") and not is_elementwise(i.opcode)]


def _constant_value(instr: HloInstruction) -> int | None:
    if instr.opcode == "constant" and instr.literal is not None and instr.shape.is_array:
        try:
            return int(instr.literal.reshape(-1)[0])
        except (AttributeError, IndexError, TypeError, ValueError):
            return None
    return None


def _real_operand(owner: HloInstruction, node: HloInstruction) -> HloInstruction:
    if owner.opcode == "fusion" and node.opcode == "parameter":
        return owner.operands[node.parameter_number]
    return node


def _reaches(start: HloInstruction, targets: list[HloInstruction]) -> bool:
    wanted = {id(t) for t in targets}
    return any(id(node) in wanted for node in depth_first([start], lambda node: node.users))


def _fusion_param_of(consumer: HloInstruction, producer: HloInstruction) -> HloInstruction:
    return consumer.fused_computation().parameter(consumer.operands.index(producer))


def _slice_into_dus_is_safe(producer: HloInstruction, consumer: HloInstruction,
                            dus: HloInstruction) -> bool:
    """No non-elementwise op of the consumer other than the DUS reads the producer's value."""
    if consumer.opcode != "fusion":
        return True
    others = [i for i in fused_instructions(consumer)
              if i is not dus and not is_elementwise(i.opcode) and i.opcode != "parameter"]
    return not _reaches(_fusion_param_of(consumer, producer), others)


def in_place(producer: HloInstruction, consumer: HloInstruction, ctx: FusionContext) -> FusionDecision:
    """ShouldFuseInPlaceOp: the consumer updates a buffer in place that the producer reads."""
    for operand_number, _index, out_index in in_place_pairs(consumer):
        buffer = consumer.operands[operand_number]
        if consumer.operands.count(buffer) > 1:
            return _forbid_in_place("the consumer is an in-place operation that has an additional operand "
                                    "with the in-place buffer's value")
        if buffer is not producer and buffer not in producer.operands:
            continue
        producer_ops = _non_elementwise(producer)
        if len(producer_ops) > 1:
            return _forbid_in_place("producer fusion has multiple non-elementwise ops")
        if not producer_ops:
            return _elementwise_producer_in_place(producer, consumer, out_index)
        return _producer_slice_into_dus(producer, consumer, producer_ops[0])
    return ALLOW


def _forbid_in_place(reason: str) -> FusionDecision:
    return FusionDecision.forbid("in_place", reason)


def _elementwise_producer_in_place(producer: HloInstruction, consumer: HloInstruction,
                                   out_index: tuple[int, ...]) -> FusionDecision:
    """An elementwise producer conflicts only through another non-elementwise op of the consumer
    that reads its value besides the in-place update."""
    if consumer.opcode != "fusion" or producer not in consumer.operands:
        return ALLOW
    root = consumer.fused_computation().root
    target = root.operands[out_index[0]] if root.opcode == "tuple" and out_index else root
    others = [i for i in _non_elementwise(consumer) if i is not target]
    if _reaches(_fusion_param_of(consumer, producer), others):
        return _forbid_in_place("non-elementwise ops in the consumer lead to an in-place conflict after "
                                "fusion")
    return ALLOW


def _producer_slice_into_dus(producer: HloInstruction, consumer: HloInstruction,
                             op: HloInstruction) -> FusionDecision:
    """A producer whose one non-elementwise op `op` reads the buffer a DUS of the consumer
    updates: safe when `op` is a slice or dynamic-slice of exactly the region the DUS writes."""
    dus_ops = fused_with_opcode(consumer, "dynamic-update-slice")
    if not dus_ops:
        return ALLOW
    if len(dus_ops) > 1:
        return _forbid_in_place("multiple dynamic-update-slice ops")
    dus = dus_ops[0]
    if op.opcode not in ("slice", "dynamic-slice"):
        return _forbid_in_place(f"unrecognized in-place update with a {op.opcode} producer reading the "
                                "in-place buffer")
    if op.shape != dus.operands[1].shape:
        return _forbid_in_place(f"{op.opcode} shape differs from the update of the DUS")
    starts = [_real_operand(consumer, s) for s in dus.operands[2:]]
    same = _slice_at(op, starts) if op.opcode == "slice" else _dynamic_slice_at(op, producer, starts)
    if not same:
        return _forbid_in_place(f"DUS and {op.opcode} index mismatch")
    if not _slice_into_dus_is_safe(producer, consumer, dus):
        return _forbid_in_place("fusing the slice into the DUS would also fuse another non-elementwise op "
                                "reading the DUS buffer")
    return ALLOW


def _slice_at(slice_: HloInstruction, starts: list[HloInstruction]) -> bool:
    """A unit-stride slice starting at the constant indices `starts`."""
    dims = slice_.attrs["slice"].dims
    return all(_constant_value(s) == lo and st == 1 for s, (lo, _hi, st) in zip(starts, dims))


def _dynamic_slice_at(ds: HloInstruction, producer: HloInstruction, starts: list[HloInstruction]) -> bool:
    """A dynamic-slice (of `producer`) starting at the same constants or the same values as `starts`."""
    for ds_start, dus_start in zip(ds.operands[1:], starts):
        a = _real_operand(producer, ds_start)
        ca, cb = _constant_value(a), _constant_value(dus_start)
        if ca != cb or (ca is None and a is not dus_start):
            return False
    return True


RULES = (producer_is_root, not_fusible, consumer_is_lone_bitcast, scatter_output_or_in_place_operand,
         both_significant_reduce, reduction_becomes_loop, shared_memory, unnested_reductions, operand_limit,
         ir_size_limit, in_place)


def can_fuse(producer: HloInstruction, consumer: HloInstruction,
             ctx: FusionContext | None = None) -> FusionDecision:
    """Every rule in XLA's order; the first that forbids decides. `ctx` (default: the H100, a
    fresh analysis cache) keeps fusion analyses between calls (priority fusion passes its own)."""
    ctx = ctx if ctx is not None else FusionContext()
    for rule in RULES:
        decision = rule(producer, consumer, ctx)
        if not decision:
            return decision
    return ALLOW
