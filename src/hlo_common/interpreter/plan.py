"""Evaluation plans: how the evaluator walks one computation, worked out once and reused per call.

A plan lists the computation's reachable instructions (dead code is never evaluated) as steps.
Every value lives in a numbered slot; a step names its handler (resolved from the opcode table
once), its operand slots, its result slot, the slots whose last use it is (freed right after
it runs) and how its result is checked against the instruction's shape. Three rearrangements
keep repeated and large computations cheap without changing any value:

- invariant steps (pure instructions that depend on no parameter: constants, iotas, a while
  body's `iota * iota`, ...) come first. From the plan's second run on, the invariant values the
  other steps read are taken from a cache instead of being recomputed;
- runs of large elementwise instructions over one shape become one region step evaluated chunk
  by chunk (`regions.py`); its outputs are unpacked into the members' slots by `_pick` steps;
- a convert that widens floats exactly (bf16 to f32, ...) and is read only by a reduce on numpy's
  fast path is not evaluated: the reduce reads the convert's operand and widens each value as it
  sums it (`_folded_converts`), instead of reading a widened copy of the whole array.

A step is `(handler, instr, fetch, result slot, frees, check, dtype, dims, donate)`: `fetch(values)`
gives the operand values, check is NO_CHECK, ARRAY_CHECK (dtype and dims given) or FULL_CHECK
(tuples and tokens), and `donate` is the slot of an operand whose last use this is, for ops that
may update it in place (dynamic-update-slice, scatter), or -1; the evaluator frees it before the
call and lets the handler write into it if nothing else refers to the array.
"""

from __future__ import annotations

import heapq
import math
from operator import itemgetter
from typing import Callable, Sequence

from hlo_common.interpreter import regions
from hlo_common.interpreter.reducers import classify_reducer
from hlo_common.interpreter.reduction import fast_reduction, finish_fast_reduction
from hlo_common.interpreter.registry import HANDLERS
from hlo_common.hlo.graph import depth_first
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.opcodes import OPCODES

NO_CHECK, ARRAY_CHECK, FULL_CHECK = 0, 1, 2

# Results made only of values already checked where they were produced.
_STRUCTURAL = frozenset({
    "parameter", "tuple", "get-tuple-element", "call", "while", "conditional", "opt-barrier",
    "add-dependency", "domain",
})
# Float types whose values f32 holds exactly (converts from them to f32 / f64 widen exactly).
_EXACT_IN_F32 = frozenset({"bf16", "f16", "f32"})
# Ops whose handler may write its result into operand 0 when the evaluator donates it.
_DONATES = frozenset({"dynamic-update-slice", "scatter"})
# Instructions whose value is not a function of their operands alone (or that talk to others).
_IMPURE = frozenset({
    "rng", "rng-get-and-update-state", "custom-call", "infeed", "outfeed", "async-start",
    "async-update", "async-done",
})


class Plan:
    """The steps of one computation (see the module docstring)."""

    __slots__ = ("computation", "root", "size", "slots", "param_slots", "root_slot", "invariant_steps",
                 "variant_steps", "invariant_slots", "cache", "runs", "_order", "_elementwise")

    def __init__(self, comp: HloComputation, handler_for: Callable[[HloInstruction], Callable],
                 fold_converts: bool = True):
        self.computation = comp  # keeps the computation alive while its id keys the plan cache
        self.root = comp.root
        self.size = len(comp.instructions)
        order = self._order = _reachable_post_order(comp)
        invariant = _invariant_instructions(order)
        folded = _folded_converts(order) if fold_converts else {}
        groups = regions.find_regions(order, invariant, exclude=folded)
        fused = _attach_reductions(order, groups, folded) if fold_converts else set()
        regions.keep_wide_outputs(groups, {id(i) for i in order}, comp.root)
        nodes = _schedule(order, groups, invariant)
        slot = {id(instr): k for k, instr in enumerate(order)}
        for convert, source in folded.items():  # the reduce reads the convert's operand
            slot[convert] = slot[id(source)]
        self.root_slot = slot[id(comp.root)]
        self.param_slots = [(i.parameter_number, slot[id(i)]) for i in order if i.opcode == "parameter"]
        raw: list[list] = []  # [handler, instr, operand slots, result slot, check, is_invariant]
        hidden = len(order)  # slots past the instructions': region results, fused reductions
        partial: dict[int, int] = {}  # id(fused reduce) -> slot of its region's reduction
        for node in nodes:
            if isinstance(node, regions.Region):
                ins = tuple(slot[id(i)] for i in node.inputs)
                whole, hidden = hidden, hidden + 1
                raw.append([node.run, node.members[-1], ins, whole, False, node.invariant])
                for k, out in enumerate(node.outputs):
                    raw.append([_Picker(k), out, (whole,), slot[id(out)], False, node.invariant])
                for k, r in enumerate(node.reductions, len(node.outputs)):  # into hidden slots
                    raw.append([_Picker(k), r.reduce, (whole,), hidden, False, node.invariant])
                    partial[id(r.reduce)], hidden = hidden, hidden + 1
            elif id(node) in fused:  # the region reduced its input: combine with the init value
                ops = (partial[id(node)], slot[id(node.operands[1])])
                raw.append([_FinishReduction(node), node, ops, slot[id(node)], True, id(node) in invariant])
            elif node.opcode != "parameter" and id(node) not in folded:
                ops = tuple(slot[id(op)] for op in node.operands)
                raw.append([handler_for(node), node, ops, slot[id(node)], True, id(node) in invariant])
        self.slots = hidden
        steps = _steps(raw, self.root_slot)
        self.invariant_steps = [s for s, r in zip(steps, raw) if r[5]]
        self.variant_steps = [s for s, r in zip(steps, raw) if not r[5]]
        produced_invariant = {r[3] for r in raw if r[5]}
        read_by_variant = {s for r in raw if not r[5] for s in r[2]} | {self.root_slot}
        self.invariant_slots = sorted(produced_invariant & read_by_variant)
        self.cache: list | None = None
        self.runs = 0
        self._elementwise: list | None = None

    def is_stale(self, comp: HloComputation) -> bool:
        """True when the computation changed since the plan was made (a pass edited it)."""
        return (self.computation is not comp or self.root is not comp.root
                or self.size != len(comp.instructions))

    def elementwise_steps(self, handler_for: Callable[[HloInstruction], Callable]) -> list[tuple]:
        """Steps for `Evaluator.run_elementwise`: every instruction in order, no regions, no
        invariant cache, no checks (values may have any broadcastable shape)."""
        if self._elementwise is None:
            slot = {id(instr): k for k, instr in enumerate(self._order)}
            raw = [[handler_for(i), i, tuple(slot[id(op)] for op in i.operands), slot[id(i)], False, False]
                   for i in self._order if i.opcode != "parameter"]
            self._elementwise = _steps(raw, self.root_slot)
        return self._elementwise


def _steps(raw: list[list], root_slot: int) -> list[tuple]:
    """Step tuples from [handler, instr, operand slots, result slot, check?, invariant?] rows, with
    each slot freed after the step that reads it last (never the root's)."""
    last_use: dict[int, int] = {}
    for k, row in enumerate(raw):
        for s in row[2]:
            last_use[s] = k
    frees: list[list[int]] = [[] for _ in raw]
    for s, k in last_use.items():
        if s != root_slot:
            frees[k].append(s)
    out = []
    for k, ((handler, instr, ops, result, check, _), free) in enumerate(zip(raw, frees)):
        shape = instr.shape
        if not check or instr.opcode in _STRUCTURAL:
            kind, dtype, dims = NO_CHECK, None, None
        elif shape.is_tuple or not shape.is_array:
            kind, dtype, dims = FULL_CHECK, None, None
        else:
            kind, dtype, dims = ARRAY_CHECK, shape.element_type.np_dtype, shape.dims
        donate = -1
        if check and instr.opcode in _DONATES and ops and ops[0] in free and ops.count(ops[0]) == 1:
            donate = ops[0]
            free.remove(donate)
        out.append((handler, instr, _fetcher(ops), result, tuple(sorted(free)), kind, dtype, dims, donate))
    return out


def _fetcher(slots: tuple[int, ...]) -> Callable[[list], Sequence]:
    """values -> the operand values at `slots` (a list or tuple, in operand order)."""
    if len(slots) == 1:
        return itemgetter(slice(slots[0], slots[0] + 1))
    if not slots:
        return itemgetter(slice(0, 0))
    return itemgetter(*slots)


class _Picker:
    """Unpacks output k of a region step (a tuple in a hidden slot) into its member's slot."""

    __slots__ = ("k",)

    def __init__(self, k: int):
        self.k = k

    def __call__(self, instr, operands, ev):
        return operands[0][self.k]


def _reachable_post_order(comp: HloComputation) -> list[HloInstruction]:
    """Post order of the instructions the root depends on, ending with the root."""
    live = {id(i) for i in depth_first([comp.root], lambda i: i.operands)}
    order = [i for i in comp.post_order() if id(i) in live]
    if order and order[-1] is not comp.root:  # control successors may follow the root
        order.remove(comp.root)
        order.append(comp.root)
    return order


def _folded_converts(order: list[HloInstruction]) -> dict[int, HloInstruction]:
    """id(convert) -> its operand, for each convert that widens floats exactly (bf16/f16 to f32 or
    f64, f32 to f64) and is read only by a reduce that takes numpy's fast path: the reduce reads
    the narrow values and widens them as it sums (the same values, without a widened copy)."""
    live = {id(i) for i in order}
    folded: dict[int, HloInstruction] = {}
    for instr in order:
        if instr.opcode != "reduce" or len(instr.operands) != 2 or instr.operands[0].opcode != "convert":
            continue
        convert = instr.operands[0]
        src, dst = convert.operands[0].shape.element_type, convert.shape.element_type
        if not (src.is_float and dst.is_float and src.bits < dst.bits and dst.bits in (32, 64)):
            continue
        if src.name not in _EXACT_IN_F32 or convert is order[-1] or instr.operands[1] is convert:
            continue
        if [u for u in convert.users if id(u) in live] != [instr]:
            continue
        if classify_reducer(instr.attrs["to_apply"]) is not None:
            folded[id(convert)] = convert.operands[0]
    return folded


def _attach_reductions(order: list[HloInstruction], groups: list[regions.Region],
                       folded: dict[int, HloInstruction]) -> set[int]:
    """Give each region the fast-path reduces over trailing dims of its members (through a folded
    convert too) whose slabs hold whole rows, so it computes them as it goes; returns their ids."""
    region_of = {id(m): g for g in groups for m in g.members}
    fused: set[int] = set()
    absorbed: dict[int, set[int]] = {}
    for instr in order:
        if instr.opcode != "reduce" or len(instr.operands) != 2:
            continue
        ptype = instr.operands[0].shape.element_type
        source = folded.get(id(instr.operands[0]), instr.operands[0])
        region = region_of.get(id(source))
        kind = classify_reducer(instr.attrs["to_apply"])
        dims = tuple(sorted(int(d) for d in instr.attrs.get("dimensions") or ()))
        if region is None or kind is None or ptype.is_pred or not region.can_reduce(dims):
            continue
        row = math.prod(source.shape.dims[d] for d in dims)
        ufunc, wide = fast_reduction(kind, ptype, row)  # slabs are contiguous rows
        region.reductions.append(regions.Reduction(instr, source, kind, dims, ufunc, wide))
        absorbed.setdefault(id(region), set()).update({id(instr), id(instr.operands[0])})
        fused.add(id(instr))
    live = {id(i) for i in order}
    for g in groups:
        if id(g) in absorbed:
            g.finish(live, order[-1], absorbed[id(g)])
    return fused


class _FinishReduction:
    """The step of a reduce its region computed: the init value combined with the region's sum."""

    __slots__ = ("kind", "ptype")

    def __init__(self, instr: HloInstruction):
        self.kind = classify_reducer(instr.attrs["to_apply"])
        self.ptype = instr.operands[0].shape.element_type

    def __call__(self, instr, operands, ev):
        return finish_fast_reduction(self.kind, self.ptype, operands[1], operands[0])


def _invariant_instructions(order: list[HloInstruction]) -> set[int]:
    """ids of the pure instructions that depend on no parameter."""
    out: set[int] = set()
    pure_comps: dict[int, bool] = {}
    for instr in order:
        if instr.opcode == "parameter" or not is_pure(instr, pure_comps):
            continue
        if all(id(op) in out for op in instr.operands):
            out.add(id(instr))
    return out


def is_pure(instr: HloInstruction, memo: dict[int, bool]) -> bool:
    """True when the instruction's value depends only on its operands (called computations too)."""
    op = instr.opcode
    info = OPCODES.get(op)
    if op in _IMPURE or info is None or info.category == "collective":
        return False
    return all(_pure_computation(c, memo) for c in instr.called_computations())


def _pure_computation(comp: HloComputation, memo: dict[int, bool]) -> bool:
    verdict = memo.get(id(comp))
    if verdict is None:
        memo[id(comp)] = False  # recursion guard
        verdict = memo[id(comp)] = all(is_pure(i, memo) for i in comp.instructions)
    return verdict


def _schedule(order: list[HloInstruction], groups: list[regions.Region], invariant: set[int]) -> list:
    """Nodes (instructions outside regions, and regions) in a valid order: invariant nodes first,
    then the rest; within each class, by the position of the node's last instruction."""
    node_of: dict[int, object] = {}
    for g in groups:
        for m in g.members:
            node_of[id(m)] = g
    position = {id(instr): k for k, instr in enumerate(order)}
    nodes: list = []
    seen: set[int] = set()
    for instr in order:
        node = node_of.get(id(instr), instr)
        if id(node) not in seen:
            seen.add(id(node))
            nodes.append(node)

    def members(node) -> list[HloInstruction]:
        return node.members if isinstance(node, regions.Region) else [node]

    def is_invariant(node) -> bool:
        return node.invariant if isinstance(node, regions.Region) else id(node) in invariant

    index = {id(n): k for k, n in enumerate(nodes)}
    preds: list[set[int]] = [set() for _ in nodes]
    for k, node in enumerate(nodes):
        for m in members(node):
            for op in m.operands:
                j = index[id(node_of.get(id(op), op))]
                if j != k:
                    preds[k].add(j)
    users: list[list[int]] = [[] for _ in nodes]
    for k, ps in enumerate(preds):
        for j in ps:
            users[j].append(k)
    key = [(0 if is_invariant(n) else 1, max(position[id(m)] for m in members(n))) for n in nodes]
    waiting = [len(p) for p in preds]
    ready = [(key[k], k) for k in range(len(nodes)) if waiting[k] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, k = heapq.heappop(ready)
        out.append(nodes[k])
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (key[u], u))
    if len(out) != len(nodes):
        raise AssertionError("evaluation plan: the region graph has a cycle")
    return out
