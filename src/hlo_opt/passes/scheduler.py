"""HloMemoryScheduler ("hlo-memory-scheduler"): the order every computation runs in, chosen for
the lowest peak memory, as XLA:GPU's `ScheduleGpuModule` does without the latency-hiding
scheduler (`gpu_hlo_schedule.cc`: DefaultMemoryScheduler per computation).

Where it sits: the `scheduling` pipeline, after pre-scheduling copy insertion (whose control
dependencies it respects) and before the post-scheduling passes; hlo-codegen then runs the
instructions in the printed order and packs buffers by the live ranges that order gives.

Computations are scheduled callees first, so a while loop or conditional knows the peak of the
computations it runs. For every global computation (the entry, while bodies and conditions,
conditional branches, called computations) the list, DFS and post-order schedulers each propose
an order (`scheduler_algorithms.py`), `ScheduleMemoryModel.peak_memory` measures it, and the
lowest peak wins (ties: list, then DFS, then post order, XLA's preference; in a module that is
already scheduled, its current order is a candidate that wins ties, so rescheduling changes
nothing). Fusion bodies and other computations that run inside one kernel keep a plain post order.

The schedule is the instruction order itself: the pass reorders each computation's instruction
list and sets `is_scheduled=true`; the printer prints instructions in that order and the verifier
checks that operands come first. It changes the module when an order or the flag changes.

    ENTRY e {                                        ENTRY e {            (DFS: peak 12 units;
      p = f32[256] parameter(0)                        p = ... parameter(0)  list and post order,
      U = f32[256] reverse(p)                   =>     Bg = ... broadcast(p) which run U first,
      Bg = f32[10,256] broadcast(p)                    z = ... constant(0)   keep it live through
      z = f32[] constant(0)                            Rd = ... reduce(Bg, z) the broadcast: 13)
      Rd = f32[256] reduce(Bg, z), to_apply=add        U = ... reverse(p)
      ROOT r = f32[512] concatenate(U, Rd)             ROOT r = ... concatenate(U, Rd)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hlo_common.analysis.call_graph import xla_computation_post_order
from hlo_common.analysis.schedule_memory import ScheduleMemoryModel
from hlo_common.hlo.ir import HloComputation, HloModule
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.passes.scheduler_algorithms import ALGORITHMS, post_order_schedule


@dataclass
class ComputationScheduleReport:
    """What the scheduler measured for one computation (for tests and `--time-passes` readers)."""

    chosen: str
    peaks: dict[str, int]


@register_pass
@dataclass
class HloMemoryScheduler(HloPass):
    """Schedules every non-fusion computation for the lowest peak memory (list, DFS, post order)."""

    name = "hlo-memory-scheduler"
    algorithms: tuple[str, ...] = ("list", "dfs", "post-order")
    report: dict[str, ComputationScheduleReport] = field(default_factory=dict, compare=False)

    def run(self, module: HloModule) -> bool:
        unknown = [a for a in self.algorithms if a not in ALGORITHMS]
        if unknown or not self.algorithms:
            raise ValueError(f"unknown scheduler algorithms {unknown}; known: {sorted(ALGORITHMS)}")
        model = ScheduleMemoryModel(module)
        callee_memory: dict[HloComputation, int] = {}
        self.report = {}
        changed = not module.is_scheduled
        for comp in xla_computation_post_order(module):
            if model.is_global(comp):
                sequence = hide_latency(self._best_sequence(comp, model, callee_memory, module.is_scheduled))
            else:
                sequence = post_order_schedule(comp)
            if len(sequence) != len(comp.instructions):
                raise AssertionError(f"schedule of {comp.name} has {len(sequence)} of "
                                     f"{len(comp.instructions)} instructions")
            if any(a is not b for a, b in zip(sequence, comp.instructions)):
                comp.instructions = sequence
                changed = True
        module.is_scheduled = True
        return changed

    def _best_sequence(self, comp: HloComputation, model: ScheduleMemoryModel,
                       callee_memory: dict[HloComputation, int], scheduled: bool):
        memory = model.computation(comp)
        best = None
        peaks: dict[str, int] = {}
        candidates = [(name, lambda name=name: ALGORITHMS[name](comp, memory, callee_memory))
                      for name in self.algorithms]
        if scheduled and _is_valid_order(comp.instructions):  # rescheduling a schedule is a no-op
            candidates.insert(0, ("current", lambda: list(comp.instructions)))
        for name, make in candidates:
            sequence = make()
            peaks[name] = memory.peak_memory(sequence, callee_memory)
            if best is None or peaks[name] < peaks[best[0]]:
                best = (name, sequence)
        callee_memory[comp] = peaks[best[0]]
        self.report[comp.name] = ComputationScheduleReport(best[0], peaks)
        return best[1]


ASYNC_STARTS = frozenset({"all-reduce-start", "all-gather-start", "collective-permute-start", "async-start"})
ASYNC_DONES = frozenset({"all-reduce-done", "all-gather-done", "collective-permute-done", "async-done"})


def hide_latency(sequence: list) -> list:
    """`sequence` with each asynchronous collective's start moved up to just after its last
    operand and each done down to just before its first user, so that the kernels in between run
    while the transfer does (the aim of XLA's latency-hiding scheduler, without its cost model).
    Starts keep their order among themselves, and so do dones; applied twice it changes nothing."""
    if not any(i.opcode in ASYNC_STARTS for i in sequence):
        return sequence
    seq = list(sequence)
    for start in [i for i in seq if i.opcode in ASYNC_STARTS]:
        seq.remove(start)
        deps = {id(d) for d in start.operands} | {id(d) for d in start.control_predecessors}
        pos = max((k + 1 for k, i in enumerate(seq) if id(i) in deps), default=0)
        seq.insert(pos, start)
    for done in reversed([i for i in seq if i.opcode in ASYNC_DONES]):
        seq.remove(done)
        users = {id(u) for u in done.users} | {id(u) for u in done.control_successors}
        pos = next((k for k, i in enumerate(seq) if id(i) in users), len(seq))
        seq.insert(pos, done)
    return seq


def _is_valid_order(sequence) -> bool:
    """Operands and control predecessors come before each instruction."""
    seen: set[int] = set()
    for instr in sequence:
        if any(id(d) not in seen for d in instr.operands) or \
                any(id(d) not in seen for d in instr.control_predecessors):
            return False
        seen.add(id(instr))
    return True
