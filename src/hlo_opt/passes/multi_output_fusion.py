"""MultiOutputFusion ("multi_output_fusion"): fusions that read the same operand, or a producer
and its consumer, become one kernel with several outputs.

Runs in the `fusion` pipeline after priority fusion, CSE and DCE (xla-facts.md section d;
XLA's `xla/backends/gpu/transforms/multi_output_fusion.cc`). Priority fusion duplicates a
producer into every consumer or leaves it alone; this pass catches what is left:

- siblings: two users of one (non-scalar) operand, at least one of them a fusion, are merged
  so the operand is read once:

      %a = f32[8] fusion(%p), kind=kLoop        %m = (f32[8], f32[]) fusion(%p), kind=kInput
      %b = f32[] fusion(%p), kind=kInput   =>   %a = get-tuple-element(%m), index=0 ...

- producer-consumer: a producer with several users is computed inside one consumer and written
  out from there as an extra output (its other users read that output), saving its own kernel.

Order as XLA: each fusible computation (the ones priority fusion visits: not fusion bodies, not
reducers, comparators and other computations embedded in an op) is walked once in reverse post order (users before
producers); at each instruction its users are sibling-fused first (multi-output fusions first,
then fusions, then plain ops, stably), then the instruction is fused as a producer into the
preferred consumer that passes every check (a multi-output fusion over a fusion over a plain
op, first in user order on ties). Constants are skipped; custom fusions (library calls, Triton)
are never producers, but their users may be siblings (as XLA's current tests want). The checks
and their reasons are in `hlo_opt.fusion.multi_output_fusible`; a producer-consumer fusion must
also not be slower by the GPU performance model (`estimate_run_times_for_multi_output_fusion`:
two launches and both kernels unfused against one launch writing both outputs). Every decision
is kept in `decisions` (one line each: fused, or the rule that refused), in visiting order, and
written next to the `--dump-to` dumps as `*.multi_output_fusion_dump.txt` when there is any.
The walk depends only on the module text, never on hashing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hlo_common.gpu.device import H100, DeviceDescription, load_device
from hlo_opt.fusion.fusion_utils import FusionEditor, verify_fusion_step
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_opt.fusion.multi_output_editing import MultiOutputEditor, Reachability
from hlo_opt.gpu_model.cost_analysis import GpuHloCostAnalysis
from hlo_opt.fusion.multi_output_fusible import (
    HeroCache,
    can_fuse_siblings,
    choose_fusion_kind,
    fusion_priority,
    is_custom_fusion,
    is_effective_scalar,
    is_multi_output_fusion,
    is_producer_multi_output_fusible,
    is_sibling_fusion_candidate,
    producer_candidate_is_fusible,
)
from hlo_opt.passes.priority_fusion import fusible_computations


def _performance_model(device: DeviceDescription):
    from hlo_opt.gpu_model import GpuPerformanceModel

    return GpuPerformanceModel(device)


@register_pass
@dataclass
class MultiOutputFusion(HloPass):
    """Sibling and producer-consumer multi-output fusion (one kernel, several outputs)."""

    name = "multi_output_fusion"
    device: DeviceDescription | str | None = None  # None: the run's `--device`, else the H100
    cost_model: bool = True  # False: skip the performance-model check (tests of the rules alone)
    verify_each: bool = False  # verify each fused computation and its caller after each step
    # XLA at HEAD refuses a column reduction with an elementwise sibling; the XLA we measure
    # against (jaxlib 0.10.2) does not (see hlo_opt.fusion.multi_output_fusible).
    column_reduction_rule: bool = False
    decisions: list[str] = field(default_factory=list, compare=False, repr=False)

    def run_with_options(self, module: HloModule, options) -> bool:
        self.verify_each = options.verify_each
        run_device = getattr(options, "device", None)
        if self.device is None and run_device is not None:
            changed = self._run(module, run_device)
        else:
            changed = self.run(module)
        dumper = getattr(options, "dumper", None)
        if dumper is not None and self.decisions:  # nothing considered: no file
            from hlo_common.cli_util import write_file_atomically

            path = dumper.options.directory / dumper.file_name("multi_output_fusion_dump", "text")
            write_file_atomically(path, "".join(line + "\n" for line in self.decisions))
            dumper.written.append(path)
        return changed

    def run(self, module: HloModule) -> bool:
        device = self.device if self.device is not None else H100
        return self._run(module, load_device(device) if isinstance(device, str) else device)

    def _run(self, module: HloModule, device: DeviceDescription) -> bool:
        self.decisions = []
        editor = MultiOutputEditor(FusionEditor(module))
        changed = False
        for comp in fusible_computations(module):
            model = _performance_model(device) if self.cost_model else None
            run = _Run(comp, device, model, editor, self.decisions, self.verify_each)
            run.column_rule = self.column_reduction_rule
            changed |= run.run()
        editor.flush()
        return changed


class _Run:
    """One computation: XLA's DoMultiOutputFusion."""

    def __init__(self, comp: HloComputation, device: DeviceDescription, model, editor: MultiOutputEditor,
                 log: list[str], verify_each: bool = False):
        self.comp = comp
        self.verify_each = verify_each
        self.device = device
        self.model = model
        self.editor = editor
        self.log = log
        self.reach = Reachability(comp)
        self.cache = HeroCache()
        # IR sizes for the IR-size rule: the model's cost analysis, or one of the run's own
        self.cost = model.cost if model is not None else GpuHloCostAnalysis(device)
        self.column_rule = False

    def _invalidate(self, *instrs: HloInstruction) -> None:
        for instr in instrs:
            self.cache.invalidate(instr)
            self.cost.invalidate(instr)
            if self.model is not None:
                self.model.invalidate(instr)

    def run(self) -> bool:
        changed = False
        for producer in reversed(self.comp.post_order()):
            if producer.parent is not self.comp:  # merged away earlier in this walk
                continue
            if producer.opcode == "constant":
                continue
            changed |= self.fuse_siblings(producer)
            if not is_custom_fusion(producer):  # its consumers may share it, it joins none
                changed |= self.fuse_producer(producer)
        return changed

    # -- siblings ---------------------------------------------------------------------------------
    def fuse_siblings(self, parent: HloInstruction) -> bool:
        if parent.shape.is_array and is_effective_scalar(parent.shape):
            return False
        siblings = [u for u in parent.users if is_sibling_fusion_candidate(u, self.cache)]
        siblings.sort(key=lambda s: -fusion_priority(s))  # stable: user order within a priority
        changed = False
        i = 0
        while i < len(siblings):
            remaining = siblings[i]
            i += 1
            if remaining.opcode != "fusion":
                continue
            j = i
            while j < len(siblings):
                other = siblings[j]
                decision = can_fuse_siblings(remaining, other, parent, self.reach, self.device, self.cache,
                                             self.column_rule)
                if not decision:
                    self.log.append(f"not fusing siblings {remaining.name} and {other.name} "
                                    f"(operand {parent.name}): {decision.explain()}")
                    j += 1
                    continue
                self.log.append(f"fusing sibling {other.name} into {remaining.name} (operand {parent.name})")
                self._invalidate(remaining, other)
                input_fusion = other.opcode == "fusion" and other.attrs.get("kind") == "kInput"
                if other.opcode == "fusion":
                    created = self.editor.merge_fusion_into_multi_output(remaining, other)
                else:
                    created = self.editor.fuse_instruction_into_multi_output(remaining, other)
                if input_fusion:
                    remaining.attrs["kind"] = "kInput"
                self._verify_step(remaining, f"fusing sibling %{other.name} into %{remaining.name} "
                                             f"(rule sibling, operand %{parent.name})")
                self.reach.merge(remaining, other, created)
                siblings.pop(j)
                changed = True
        return changed

    # -- producer-consumer ------------------------------------------------------------------------
    def fuse_producer(self, producer: HloInstruction) -> bool:
        if not is_producer_multi_output_fusible(producer):
            return False
        users = producer.users
        if len(users) == 1 and not is_multi_output_fusion(users[0]):
            return False  # priority fusion already weighed fusing into its only user
        candidates = []
        for consumer in users:
            decision = producer_candidate_is_fusible(producer, consumer, self.reach, self.device, self.model,
                                                     self.cache, self.cost)
            if decision:
                candidates.append(consumer)
            else:
                self.log.append(f"not fusing producer {producer.name} into {consumer.name}: "
                                f"{decision.explain()}")
        if not candidates:
            return False
        consumer = max(candidates, key=fusion_priority)  # the first of the highest priority
        names = (producer.name, consumer.name)
        self.log.append(f"fusing producer {producer.name} into {consumer.name} as an extra output")
        self._invalidate(producer, consumer)
        if consumer.opcode == "fusion":
            fusion = consumer
        else:
            fusion = self.editor.wrap_in_fusion(consumer, choose_fusion_kind(producer, consumer, self.cache))
            self.reach.replace(consumer, fusion)
        created = self.editor.fuse_instruction_into_multi_output(fusion, producer)
        self._verify_step(fusion, f"fusing producer %{names[0]} into %{names[1]} (rule producer_consumer)")
        self.reach.merge(fusion, producer, created)
        return True

    # -- --verify-each ----------------------------------------------------------------------------
    def _verify_step(self, fusion: HloInstruction, step: str) -> None:
        """Under --verify-each: the step's fusion and the computation around it verify."""
        if self.verify_each:
            verify_fusion_step(fusion, f"multi_output_fusion: {step}", self.comp)
