"""The three memory schedulers XLA's DefaultMemoryScheduler tries (`hlo_memory_scheduler.cc`):
list, DFS and post order. Each returns one computation's instructions in an order that respects
operands and control predecessors; `hlo-memory-scheduler` (scheduler.py) keeps the one with the
lowest peak memory.

- `list_schedule`: greedy; among the ready instructions it runs the one that frees the most bytes
  net of what it defines (a called computation's peak counts as defined), more users breaking
  ties, effective scalars first; equal priorities go to the instruction that became ready (or
  had its priority changed) last, as XLA's multimap does.
- `dfs_schedule`: a post-order DFS from the root that visits the operands with the largest
  transitive fan-out first, then the largest transitive sizes, then by name.
- `post_order_schedule`: XLA's `MakeInstructionPostOrder`.

    >>> seq = list_schedule(comp, model.computation(comp), callee_memory={})   # doctest: +SKIP
"""

from __future__ import annotations

import heapq

from hlo_common.analysis.call_graph import xla_instruction_post_order
from hlo_common.analysis.schedule_memory import ComputationMemory, callee_peak
from hlo_common.hlo.graph import post_order
from hlo_common.hlo.ir import HloComputation, HloInstruction

_ALWAYS_FIRST = (1 << 62, 1 << 62)
_CONTROL_FLOW = frozenset({"while", "call", "conditional"})


def is_effective_scalar(instr: HloInstruction) -> bool:
    shape = instr.shape
    return shape.is_array and all(d == 1 for d in shape.dims)


class _ListScheduler:
    def __init__(self, comp: HloComputation, model: ComputationMemory, callee_memory: dict):
        self.comp = comp
        self.model = model
        self.callee_memory = callee_memory
        self.unscheduled_uses = model.use_counts()
        self._waiting = {id(i): len(_unique(i.operands)) + len(_unique(i.control_predecessors))
                         for i in comp.instructions}

    def priority(self, instr: HloInstruction) -> tuple[int, int]:
        if is_effective_scalar(instr):
            return _ALWAYS_FIRST
        model, counts = self.model, self.unscheduled_uses
        freed = sum(model.sizes[b] for b in model.uses.get(instr, ())
                    if counts[b] == 1 and b not in model.ignored)
        sub = callee_peak(instr, self.callee_memory)
        if sub > 0 and instr.opcode in _CONTROL_FLOW:
            defined = sub  # the result lives in the callee's root buffer: do not count it twice
        else:
            defined = model.bytes_defined(instr) + sub
        return freed - defined, len(instr.users)

    def run(self) -> list[HloInstruction]:
        instrs = self.comp.instructions
        heap: list = []
        current: dict[int, tuple] = {}  # id -> the live heap key
        seq = 0

        def push(instr: HloInstruction) -> None:
            nonlocal seq
            seq += 1
            p = self.priority(instr)
            key = (-p[0], -p[1], -seq)
            current[id(instr)] = key
            heapq.heappush(heap, (key, instr))

        for i in instrs:
            if self._waiting[id(i)] == 0:
                push(i)
        schedule: list[HloInstruction] = []
        while heap:
            key, best = heapq.heappop(heap)
            if current.get(id(best)) != key:
                continue  # stale entry: its priority changed since
            del current[id(best)]
            schedule.append(best)
            self._retire(best, push, current)
        if len(schedule) != len(instrs):
            raise AssertionError(f"list scheduler left instructions of {self.comp.name} unscheduled "
                                 "(a cycle?)")
        return schedule

    def _retire(self, best: HloInstruction, push, current: dict) -> None:
        adjust = False
        for b in self.model.uses.get(best, ()):
            self.unscheduled_uses[b] -= 1
            adjust |= self.unscheduled_uses[b] == 1
        for succ in _unique(best.users) + _unique(best.control_successors):  # counted apart, as waited on
            self._waiting_done(succ, push)
        if adjust:  # some buffers have one reader left: those readers now free them
            for operand in _unique(best.operands):
                for user in operand.users:
                    key = current.get(id(user))
                    if key is not None and self.priority(user) != (-key[0], -key[1]):
                        push(user)

    def _waiting_done(self, instr: HloInstruction, push) -> None:
        self._waiting[id(instr)] -= 1
        if self._waiting[id(instr)] == 0:
            push(instr)


def _unique(instrs: list[HloInstruction]) -> list[HloInstruction]:
    seen: set[int] = set()
    out = []
    for i in instrs:
        if id(i) not in seen:
            seen.add(id(i))
            out.append(i)
    return out


def list_schedule(comp: HloComputation, model: ComputationMemory,
                  callee_memory: dict[HloComputation, int]) -> list[HloInstruction]:
    """XLA's ListScheduler (see the module docstring)."""
    return _ListScheduler(comp, model, callee_memory).run()


def _ignored(instr: HloInstruction) -> bool:
    return instr.opcode in ("parameter", "constant")


def dfs_schedule(comp: HloComputation, model: ComputationMemory,
                 callee_memory: dict[HloComputation, int]) -> list[HloInstruction]:
    """XLA's DFSMemoryScheduler (see the module docstring)."""
    extra_users: dict[int, int] = {}
    total_sizes: dict[int, int] = {}
    cumulative, count = 0, len(comp.instructions)
    for hlo in xla_instruction_post_order(comp):
        if _ignored(hlo):
            extra_users[id(hlo)] = total_sizes[id(hlo)] = 0
            continue
        extra = len(hlo.users) - 1 if hlo.users else 0
        size = sum(model.sizes[b] for b in model.defines.get(hlo, ()))
        cumulative += size
        total = size
        for operand in _unique(hlo.operands):
            extra += extra_users[id(operand)]
            total += total_sizes[id(operand)]
        total_sizes[id(hlo)] = min(total, cumulative)
        extra_users[id(hlo)] = min(extra, count)

    def order_key(i: HloInstruction):
        return (-extra_users[id(i)], -total_sizes[id(i)], i.name)

    def deps(node: HloInstruction) -> list[HloInstruction]:  # the first in order is visited first
        return sorted(_unique(node.operands + node.control_predecessors), key=order_key)

    roots = [i for i in comp.instructions
             if not i.users and not i.control_successors and i is not comp.root] + [comp.root]
    return post_order(roots, deps)


def post_order_schedule(comp: HloComputation, model: ComputationMemory | None = None,
                        callee_memory: dict[HloComputation, int] | None = None) -> list[HloInstruction]:
    """XLA's PostOrderMemoryScheduler: `MakeInstructionPostOrder`."""
    return xla_instruction_post_order(comp)


ALGORITHMS = {"list": list_schedule, "dfs": dfs_schedule, "post-order": post_order_schedule}
