"""PriorityFusion ("priority-fusion"): XLA:GPU's one fusion pass (`priority_fusion.cc`; the RFC in
seeds/004; xla-facts.md section d). It runs in the `fusion` pipeline, before multi-output fusion.

Per computation that is not a fusion body nor a reducer (entry, while bodies and conditions,
conditional branches, called computations):

1. Every instruction with users that is fusible (not a parameter, tuple or get-tuple-element) is a
   candidate producer. Its priority is the time the GPU performance model
   (`hlo_opt.gpu_model.GpuPerformanceModel.estimate_run_times`) says fusing it into all its
   users saves: unfused - fused, kernel launch 1 us. A producer that cannot be fused into every
   non-bitcast user (`hlo_opt.fusion.gpu_fusible.can_fuse`) gets -inf: a producer is duplicated into
   all of its users or into none. Fusible bitcasts get +inf (fused first), constants -inf.
2. The queue is a heap keyed (priority, unique id), largest first, so ties break the same way on
   every run. Negative priorities are not queued.
3. The best producer is fused into each of its users (a user becomes a fusion first; the kind,
   kLoop or kInput, comes from `hlo_common.gpu.hlo_fusion_analysis`); the producer goes when no user is
   left. Only the new fusions and their operands are costed again (incremental update); cached
   figures of the changed instructions are dropped.
4. At the end every scalar (one-element) constant is fused into its fusible users.

With `--dump-to` and a `--dump-pass-re` that selects the pass (`.*` or `priority-fusion`, as
XLA's DumpingEnabledForHloPass asks), the decisions go to
`module_NNNN.<name>.priority_fusion_dump.txt` next to the HLO dumps (XLA writes its
`FusionProcessDumpProto` under that name): one line per step,

    update_priority producer=e consumers=y,row_sum us_unfused=2.0205 us_fused=1.0015 us_saved=1.0190
    fusion fusion=fusion.4 producer=e consumer=y kind=kLoop
    producer_ineligible producer=row_max reason="cannot fuse into max_b: fusion into output of a reduce
        fusion would create a loop fusion [reduction_becomes_loop]"      (one line in the file)

Differences from XLA: no Triton paths (generic Triton fusions, heroless Triton fusion and Triton
multi-output fusion are off by default in XLA too); a producer's priority is recomputed over all its
users from cached pair estimates rather than by XLA's subtract-the-removed-consumers delta (same
figures, up to rounding); and a fusion reading more than WIDE_FUSION_OPERANDS fusible producers
re-costs only the producers a step added, the others when they reach the top of the queue.
Compared with XLA:GPU (H100, `--xla_gpu_enable_triton_gemm=false`, triton-softmax-rewriter off) the
fusions of softmax, GELU, the transformer layer and the corpus modules tried are XLA's wherever the
input to the pass is the same; the differences found come from passes before it (cuBLASLt
epilogues, slice sinking, batch-dimension collapsing of GEMMs).

Under `--verify-each`, every fusion step is checked as it is made (the new fused computation and
the fusion instruction's signature), so a decision that breaks the verifier is one error line
naming the producer, the consumer and the rule that chose the step.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import math
from dataclasses import dataclass, field

from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.gpu.hlo_fusion_analysis import fusion_kind_for_emitter
from hlo_opt.fusion.fusion_utils import FusionEditor, verify_fusion_step
from hlo_opt.gpu_model.moved_fusion_cost import grown_fusion_cost, moved_fusion_cost
from hlo_opt.fusion.gpu_fusible import (ALLOW, FusionContext, FusionDecision, can_fuse, is_fusible,
                                        is_fusible_bitcast, scatter_output_or_in_place_operand)
from hlo_common.hlo_pass.pass_base import DevicePass, register_pass
from hlo_common.hlo.hlo_utils import CONTROL_FLOW_CALLERS
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule

INF = math.inf
_NOT_CANDIDATES = frozenset({"parameter", "tuple", "get-tuple-element"})
# A fusion reading more fusible producers than this re-costs, after a step, only the producers the
# step added; the others are marked stale and re-costed when they reach the top of the queue (XLA
# re-costs them all at once; in Python a fusion absorbing hundreds of ops one at a time made that
# quadratic in its size times its operand count).
WIDE_FUSION_OPERANDS = 8
RULE_BITCAST = "bitcast-first"
RULE_BENEFIT = "max-benefit"
RULE_CONSTANT = "scalar-constant"


def fusible_computations(module: HloModule) -> list[HloComputation]:
    """XLA's GetFusibleComputations: computations in post order, except fusion bodies and those
    called by non-control-flow ops (reducers, comparators, scatter combiners, custom calls)."""
    order = module.computation_post_order()
    skip: set[int] = set()
    for comp in order:
        for instr in comp.instructions:
            if instr.opcode in CONTROL_FLOW_CALLERS and instr.opcode not in ("async-start", "async-update",
                                                                                "async-done"):
                continue
            for called in instr.called_computations():
                skip.add(id(called))
    return [c for c in order if id(c) not in skip]


def is_small_constant(instr: HloInstruction) -> bool:
    return instr.opcode == "constant" and instr.shape.is_array and instr.shape.num_elements <= 1


@dataclass
class DecisionLog:
    """One line per step, in the order the steps happen (the `--dump-to` decision log)."""

    lines: list[str] = field(default_factory=list)

    def computation(self, comp: HloComputation) -> None:
        self.lines.append(f"computation {comp.name}")

    def priority(self, producer: HloInstruction, unfused: float, fused: float) -> None:
        consumers = ",".join(u.name for u in producer.users)
        self.lines.append(f"update_priority producer={producer.name} consumers={consumers} "
                          f"us_unfused={unfused * 1e6:.4f} us_fused={fused * 1e6:.4f} "
                          f"us_saved={(unfused - fused) * 1e6:.4f}")

    def ineligible(self, producer: HloInstruction, decision: FusionDecision) -> None:
        reason = decision.explain().replace('"', "'")
        self.lines.append(f'producer_ineligible producer={producer.name} reason="{reason}"')

    def fusion(self, fusion: HloInstruction, producer: str, consumer: str, rule: str) -> None:
        self.lines.append(f"fusion fusion={fusion.name} producer={producer} consumer={consumer} "
                          f"kind={fusion.attrs.get('kind')} rule={rule}")

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


class _Queue:
    """The producers of one computation by priority (XLA's PriorityFusionQueue)."""

    def __init__(self, comp: HloComputation, pass_: PriorityFusion, model, log: DecisionLog | None):
        self.comp = comp
        self.device = pass_.device or H100
        self.model = model
        self.log = log
        self.analyses = model.analyses  # the model's fusion analyses, shared with can_fuse
        self.context = FusionContext(self.device, self.analyses, model.cost)
        self.heap: list[tuple[float, int, int, HloInstruction]] = []
        self.current: dict[HloInstruction, tuple[float, int]] = {}  # producer -> (priority, version)
        self.version = 0
        self.can_fuse_cache: dict[HloInstruction, dict[HloInstruction, FusionDecision]] = {}
        self.stale: set[HloInstruction] = set()  # membership only, never iterated

    # -- fusibility ---------------------------------------------------------------------------------
    def can_fuse(self, producer: HloInstruction, consumer: HloInstruction) -> FusionDecision:
        per = self.can_fuse_cache.setdefault(producer, {})
        decision = per.get(consumer)
        if decision is None:
            decision = per[consumer] = can_fuse(producer, consumer, self.context)
        return decision

    def can_fuse_with_all_non_bitcast_users(self, producer: HloInstruction) -> FusionDecision:
        if not producer.users:
            return FusionDecision.forbid("no_users", "no users to fuse")
        has_non_bitcast = False
        per = self.can_fuse_cache.get(producer)
        if per is None:
            per = self.can_fuse_cache[producer] = {}
        for user in producer.users:
            if user.opcode == "bitcast" and is_fusible_bitcast(user):
                continue
            has_non_bitcast = True
            decision = per.get(user)  # `can_fuse`'s cache read inline: most users are answered there
            if decision is None:
                decision = per[user] = can_fuse(producer, user, self.context)
            if not decision:
                return FusionDecision(decision.rule, f"cannot fuse into {user.name}: {decision.reason}")
        if not has_non_bitcast:
            return FusionDecision.forbid("only_bitcast_users",
                                         "not fusing because there are only bitcast users")
        return ALLOW

    # -- priorities ---------------------------------------------------------------------------------
    def priority(self, producer: HloInstruction) -> float:
        if is_fusible_bitcast(producer):
            return INF
        if producer.opcode == "constant":
            return -INF
        decision = self.can_fuse_with_all_non_bitcast_users(producer)
        if not decision:
            if self.log is not None:
                self.log.ineligible(producer, decision)
            return -INF
        times = self.model.estimate_run_times(producer, list(producer.users))
        if self.log is not None:
            self.log.priority(producer, times.time_unfused, times.time_fused)
        return times.time_unfused - times.time_fused

    def set_priorities(self, producers: list[HloInstruction]) -> None:
        for producer in producers:
            if producer.parent is not self.comp:
                continue
            prio = self.priority(producer)
            old = self.current.get(producer)
            if old is not None and old[0] == prio:
                continue
            if prio < 0:
                self.current.pop(producer, None)
                continue
            self.version += 1
            self.current[producer] = (prio, self.version)
            heapq.heappush(self.heap, (-prio, -producer.unique_id, self.version, producer))

    def remove(self, instr: HloInstruction) -> None:
        self.current.pop(instr, None)

    def mark_stale(self, producer: HloInstruction) -> None:
        if producer in self.current:
            self.stale.add(producer)

    def pop(self) -> tuple[HloInstruction, list[HloInstruction], float] | None:
        """The best producer and the consumers to fuse it into, or None when the queue is empty.
        A stale producer is re-costed first and goes back into the queue unless it still leads."""
        while self.heap:
            neg_prio, _uid, version, producer = heapq.heappop(self.heap)
            entry = self.current.get(producer)
            if entry is None or entry[1] != version or producer.parent is not self.comp:
                continue
            if producer in self.stale:
                self.stale.discard(producer)
                del self.current[producer]
                self.set_priorities([producer])
                if producer in self.current:
                    prio, version = self.current[producer]
                    if self.heap and (-self.heap[0][0], -self.heap[0][1]) > (prio, producer.unique_id):
                        continue  # pushed back with its new priority by set_priorities
                    # still the best: take it (its fresh heap entry becomes stale by version)
                    self.version += 1
                    neg_prio = -prio
                else:
                    continue
            del self.current[producer]
            consumers = list(producer.users)
            if is_fusible_bitcast(producer):
                consumers = [c for c in consumers if self.can_fuse(producer, c)]
            if consumers:
                return producer, consumers, -neg_prio
        return None

    # -- incremental costs of grown fusions --------------------------------------------------------------
    def costs_before_step(self, producer: HloInstruction, consumer: HloInstruction) -> tuple | None:
        """The producer's and consumer's figures as computed before a step (nothing is computed)."""
        cost = getattr(self.model, "cost", None)
        if cost is None or not hasattr(cost, "cached"):
            return None
        return cost, cost.cached(producer), cost.cached(consumer)

    @staticmethod
    def seed_step(editor: FusionEditor, costs: tuple | None) -> None:
        """Figures for the fusion a step made from those of its parts (see `moved_fusion_cost`): a
        fusion grown one op at a time is costed per op, not per fusion size."""
        if costs is None:
            return
        cost, producer_cost, consumer_cost = costs
        if editor.last_move is not None:
            cost.seed(editor.last_move.fusion, moved_fusion_cost(cost, editor.last_move, producer_cost))
        elif editor.last_grow is not None:
            cost.seed(editor.last_grow.fusion, grown_fusion_cost(cost, editor.last_grow, consumer_cost))

    # -- invalidation ---------------------------------------------------------------------------------
    def invalidate(self, instr: HloInstruction) -> None:
        self.can_fuse_cache.pop(instr, None)
        for op in instr.operands:
            per = self.can_fuse_cache.get(op)
            if per is not None:
                per.pop(instr, None)
        self.model.invalidate(instr)  # its estimates, costs and fusion analyses


@contextlib.contextmanager
def _collector_paused():
    """The pass makes and drops millions of cache entries (analyses, estimates) that die by
    reference count; the cyclic collector would scan each one still alive at its collections, a
    tenth of the pass on a 20,000-op chain. Nothing the pass makes forms cycles that must be
    freed early (the fusion editor takes dead bodies apart), so the collector waits for its end."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@register_pass
@dataclass
class PriorityFusion(DevicePass):
    """Fuses producers into consumers by the cost model's benefit, largest first (XLA's
    PriorityFusion)."""

    name = "priority-fusion"
    device: DeviceDescription | None = None
    verify_each: bool = False
    dumper: object | None = None
    log: DecisionLog | None = None
    model_factory: object | None = None  # device -> performance model (tests); default GpuPerformanceModel

    def run_with_options(self, module: HloModule, options) -> bool:
        self.take_device(options)
        self.verify_each = options.verify_each
        dumper = options.dumper
        # XLA writes the log when the dump's pass regex selects the pass (DumpingEnabledForHloPass)
        self.dumper = dumper if dumper is not None and dumper.options.should_dump_pass(self.name) else None
        try:
            return self.run(module)
        finally:
            self.dumper = None

    def run(self, module: HloModule) -> bool:
        factory = self.model_factory
        if factory is None:
            from hlo_opt.gpu_model import GpuPerformanceModel as factory
        device = self.device or H100
        self.log = DecisionLog() if self.dumper is not None else None
        editor = FusionEditor(module)
        changed = False
        with _collector_paused():
            for comp in fusible_computations(module):
                model = factory(device)
                changed |= self._run_on_computation(comp, editor, model)
            editor.flush()
        if self.log is not None and self.dumper is not None:
            self._write_log(module)
        return changed

    # -- one computation --------------------------------------------------------------------------
    def _run_on_computation(self, comp: HloComputation, editor: FusionEditor, model) -> bool:
        if self.log is not None:
            self.log.computation(comp)
        queue = _Queue(comp, self, model, self.log)
        candidates = [i for i in comp.post_order()
                      if i.opcode not in _NOT_CANDIDATES and i.users and is_fusible(i)]
        queue.set_priorities(candidates)
        changed = False
        while True:
            step = queue.pop()
            if step is None:
                break
            producer, consumers, prio = step
            rule = RULE_BITCAST if prio == INF else RULE_BENEFIT
            to_update: dict[HloInstruction, None] = {}
            producer_name = producer.name
            for consumer in consumers:
                if is_fusible_bitcast(consumer):
                    continue
                consumer_name = consumer.name
                kind = fusion_kind_for_emitter(queue.analyses.get_pair(producer, consumer))
                costs = queue.costs_before_step(producer, consumer)
                queue.invalidate(consumer)
                old_operands = set(consumer.operands)
                fusion = self._fuse(editor, producer, consumer, kind, rule, prio)
                if fusion is not consumer:
                    queue.remove(consumer)
                queue.invalidate(fusion)
                queue.seed_step(editor, costs)
                if self.log is not None:
                    self.log.fusion(fusion, producer_name, consumer_name, rule)
                operands = [op for op in fusion.operands
                            if op is not producer and op.opcode not in ("constant", "get-tuple-element")
                            and is_fusible(op)]
                wide = len(operands) > WIDE_FUSION_OPERANDS
                for op in operands:
                    if wide and op in old_operands:
                        queue.mark_stale(op)  # re-costed when it reaches the top of the queue
                    else:
                        to_update[op] = None  # its figures with other users still hold
                to_update[fusion] = None
                changed = True
            queue.invalidate(producer)
            if producer.parent is None:
                queue.remove(producer)
                to_update.pop(producer, None)
            queue.set_priorities([i for i in to_update if i.parent is comp])
        changed |= self._fuse_constants(comp, editor, queue)
        return changed

    def _fuse(self, editor: FusionEditor, producer: HloInstruction, consumer: HloInstruction,
              kind: str, rule: str, prio: float) -> HloInstruction:
        names = (producer.name, consumer.name)
        fusion = editor.fuse_producer_into_consumer(producer, consumer, kind)
        if self.verify_each:
            self._verify_step(fusion, names, rule, prio)
        return fusion

    def _fuse_constants(self, comp: HloComputation, editor: FusionEditor, queue: _Queue) -> bool:
        changed = False
        for constant in [i for i in comp.instructions if is_small_constant(i)]:
            for user in list(constant.users):
                if constant.parent is None or not self._can_fuse_constant(constant, user, queue):
                    continue
                kind = fusion_kind_for_emitter(queue.analyses.get_pair(constant, user))
                consumer_name = user.name
                queue.invalidate(user)
                fusion = self._fuse(editor, constant, user, kind, RULE_CONSTANT, -INF)
                queue.invalidate(fusion)
                if self.log is not None:
                    self.log.fusion(fusion, constant.name, consumer_name, RULE_CONSTANT)
                changed = True
        return changed

    @staticmethod
    def _can_fuse_constant(constant: HloInstruction, user: HloInstruction, queue: _Queue) -> bool:
        """XLA fuses a small constant into every fusible user but a scatter's in-place operand."""
        return bool(scatter_output_or_in_place_operand(constant, user, queue.context)) and is_fusible(user)

    # -- checks and output --------------------------------------------------------------------------
    def _verify_step(self, fusion: HloInstruction, names: tuple[str, str], rule: str, prio: float) -> None:
        saved = "" if math.isinf(prio) else f", {prio * 1e6:.3f} us saved"
        verify_fusion_step(fusion,
                           f"priority-fusion: fusing %{names[0]} into %{names[1]} (rule {rule}{saved})")

    def _write_log(self, module: HloModule) -> None:
        from hlo_common.cli_util import write_file_atomically

        dumper = self.dumper
        path = dumper.options.directory / dumper.file_name("priority_fusion_dump", "text")
        write_file_atomically(path, self.log.text())
        dumper.written.append(path)
