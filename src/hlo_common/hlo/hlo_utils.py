"""Small graph utilities that many passes share (XLA's `hlo_query` and the editing helpers of
`HloComputation`): side-effect queries, safe removal, replacement, call sites, name uniquing and
cloning of instructions and computations.

    >>> uniquer = NameUniquer.for_module(module)
    >>> clone = clone_computation(body, module, uniquer)   # "body.clone", instructions "x.clone"

Everything here is deterministic: collections are walked in instruction / computation order,
never in set or id order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from hlo_common.hlo.graph import depth_first
from hlo_common.hlo.ir import COMPUTATION_ATTRS, HloComputation, HloInstruction, HloModule

# Opcodes whose called computations run as control flow (XLA's CallContext::kControlFlow); all
# other callers (fusion, reduce, map, sort, scatter, custom-call, ...) embed their computation.
CONTROL_FLOW_CALLERS = frozenset({"call", "conditional", "while", "async-start", "async-update",
                                  "async-done"})
# The callers whose computations run on the host side, as thunk sequences (not inside a kernel).
GLOBAL_CONTROL_FLOW = frozenset({"while", "conditional", "call"})
ASYNC_OPCODES = frozenset({"async-start", "async-update", "async-done"})


# -- queries ------------------------------------------------------------------------------------
def has_side_effect(instr: HloInstruction) -> bool:
    """XLA's HasSideEffect: the op itself (`HloInstruction.has_side_effect`: send/recv, infeed,
    rng, collectives, side-effecting custom calls) or any computation it calls, recursively."""
    if instr.has_side_effect:
        return True
    return any(computation_has_side_effect(c) for c in instr.called_computations())


def computation_has_side_effect(comp: HloComputation) -> bool:
    return any(has_side_effect(i) for i in comp.instructions)


def has_control_dependencies(instr: HloInstruction) -> bool:
    return bool(instr.control_predecessors or instr.control_successors)


def is_dead(instr: HloInstruction) -> bool:
    return not instr.users and not instr.is_root


def is_safely_removable(instr: HloInstruction) -> bool:
    """XLA's IsSafelyRemovable: not a parameter (that would renumber the others), no control edges."""
    return instr.opcode != "parameter" and not has_control_dependencies(instr)


@dataclass(frozen=True)
class CallSite:
    """One computation slot of a calling instruction: `instr.attrs[key]` (or `[key][index]`)."""

    instr: HloInstruction
    key: str
    index: int | None
    computation: HloComputation

    @property
    def is_control_flow(self) -> bool:
        return self.instr.opcode in CONTROL_FLOW_CALLERS

    def replace(self, new: HloComputation) -> None:
        if self.index is None:
            self.instr.attrs[self.key] = new
        else:
            comps = list(self.instr.attrs[self.key])
            comps[self.index] = new
            self.instr.attrs[self.key] = comps


_COMPUTATION_ATTR_SET = frozenset(COMPUTATION_ATTRS)


def call_sites_of(instr: HloInstruction) -> list[CallSite]:
    out = []
    if _COMPUTATION_ATTR_SET.isdisjoint(instr.attrs):
        return out  # the common case, kept cheap: computation_callers asks for every instruction
    for key in COMPUTATION_ATTRS:
        v = instr.attrs.get(key)
        if v is None:
            continue
        if isinstance(v, list):
            out.extend(CallSite(instr, key, i, c) for i, c in enumerate(v))
        else:
            out.append(CallSite(instr, key, None, v))
    return out


def computation_callers(module: HloModule) -> dict[int, list[CallSite]]:
    """id(computation) -> its call sites, in computation order then instruction order."""
    out: dict[int, list[CallSite]] = {id(c): [] for c in module.computations}
    disjoint = _COMPUTATION_ATTR_SET.isdisjoint
    for comp in module.computations:
        for instr in comp.instructions:
            if disjoint(instr.attrs):
                continue
            for site in call_sites_of(instr):
                out.setdefault(id(site.computation), []).append(site)
    return out


def fusion_instruction_of(comp: HloComputation, callers: dict[int, list[CallSite]]) -> HloInstruction | None:
    """The fusion instruction calling `comp`, if `comp` is a fusion computation with one caller."""
    sites = callers.get(id(comp), [])
    if len(sites) == 1 and sites[0].instr.opcode == "fusion":
        return sites[0].instr
    return None


def async_computations(module: HloModule) -> set[int]:
    """ids of computations wrapped by async-start/update/done (XLA's IsAsyncComputation)."""
    return {id(c) for comp in module.computations for i in comp.instructions
            if i.opcode in ASYNC_OPCODES for c in i.called_computations()}


# -- editing ------------------------------------------------------------------------------------
def remove_instruction_and_unused_operands(comp: HloComputation, instr: HloInstruction) -> None:
    """Remove dead `instr`, then every operand that became dead and can go (no side effects)."""
    worklist = [instr]
    while worklist:
        item = worklist.pop()
        if item.parent is not comp or not is_dead(item) or not is_safely_removable(item):
            continue
        if item is not instr and has_side_effect(item):
            continue
        operands = list(dict.fromkeys(item.operands))
        comp.remove_instruction(item)
        worklist.extend(reversed(operands))


def shardings_compatible(old: HloInstruction, new: HloInstruction) -> bool:
    return old.sharding is None or new.sharding is None or old.sharding == new.sharding


def inherit_attributes(old: HloInstruction, new: HloInstruction) -> None:
    """What a replacement takes over from the instruction it replaces (XLA's ReplaceInstruction):
    metadata when it has no op_name, frontend attributes and sharding when it has none."""
    if not any(k == "op_name" for k, _ in new.metadata):
        new.metadata = list(old.metadata) or new.metadata
    if not new.frontend_attributes:
        new.frontend_attributes = list(old.frontend_attributes)
    if new.sharding is None:
        new.sharding = old.sharding


def replace_instruction(old: HloInstruction, new: HloInstruction, preserve_sharding: bool = True) -> bool:
    """XLA's HloComputation::ReplaceInstruction: every use of `old` (and the root slot) reads `new`,
    then `old` and its newly dead operands are removed. Declines (returns False) when both carry
    different shardings. Metadata, frontend attributes and sharding move to `new` where it has none.
    """
    if preserve_sharding and not shardings_compatible(old, new):
        return False
    inherit_attributes(old, new)
    comp = old.parent
    old.replace_all_uses_with(new)
    if is_safely_removable(old):
        remove_instruction_and_unused_operands(comp, old)
    return True


def relay_control_dependencies(instr: HloInstruction, replacement: HloInstruction) -> None:
    """Before `instr` is replaced by an earlier `replacement`, keep the orders its control edges
    promised: predecessors go before instr's users (or successors), successors after replacement."""
    for pred in instr.control_predecessors:
        for other in (instr.users or instr.control_successors):
            if other is not pred:
                pred.add_control_dependency_to(other)
    for succ in instr.control_successors:
        if succ is not replacement:
            replacement.add_control_dependency_to(succ)
    instr.drop_all_control_deps()


# -- names --------------------------------------------------------------------------------------
_NUMERIC_SUFFIX = re.compile(r"^(.*)\.(\d+)$")


class NameUniquer:
    """Hands out names unused in a module: `add` stays `add`; a taken `add.3` becomes `add.1`, ..."""

    def __init__(self, taken: Iterable[str] = ()):
        self.taken: set[str] = set(taken)
        self._next: dict[str, int] = {}  # root -> where the search for a free `root.k` starts

    @staticmethod
    def for_module(module: HloModule) -> NameUniquer:
        names = [i.name for c in module.computations for i in c.instructions]
        names += [c.name for c in module.computations]
        return NameUniquer(names)

    def unique(self, name: str) -> str:
        if name not in self.taken:
            self.taken.add(name)
            return name
        m = _NUMERIC_SUFFIX.match(name)
        root = m.group(1) if m else name
        # `taken` only grows, so every k below the last one handed out is still taken: starting
        # there gives the same smallest free k in O(1) amortized (a pass making thousands of
        # `fusion.N` would otherwise scan from 1 each time)
        k = self._next.get(root, 1)
        while f"{root}.{k}" in self.taken:
            k += 1
        out = f"{root}.{k}"
        self._next[root] = k
        self.taken.add(out)
        return out


def suffixed_name(name: str, suffix: str) -> str:
    """XLA's clone naming: `foo` -> `foo.clone`, `foo.clone` -> `foo.clone2`, `foo.clone2` -> `foo.clone3`."""
    dot_suffix = "." + suffix
    idx = name.rfind(dot_suffix)
    if idx < 0:
        return name + dot_suffix
    after = name[idx + len(dot_suffix):]
    if after == "":
        return name + "2"
    if after.isdigit():
        return name[:idx + len(dot_suffix)] + str(int(after) + 1)
    return name + dot_suffix


# -- cloning ------------------------------------------------------------------------------------
def clone_instruction(instr: HloInstruction, name: str, operands: list[HloInstruction]) -> HloInstruction:
    """A detached copy of `instr` named `name` reading `operands` (control edges not copied)."""
    return instr.clone(new_operands=operands, name=name)


def clone_computation(comp: HloComputation, module: HloModule, uniquer: NameUniquer,
                      suffix: str = "clone") -> HloComputation:
    """A copy of `comp` (same callees) added to `module` right after the original (so callees
    still come before callers), names made unique module-wide with XLA's `.clone` suffix rule."""
    clone = comp.clone(name=uniquer.unique(suffixed_name(comp.name, suffix)))
    for original, twin in zip(comp.instructions, clone.instructions):
        twin.name = uniquer.unique(suffixed_name(original.name, suffix))
    clone.parent = module
    module.computations.insert(module.computations.index(comp) + 1, clone)
    return clone


def topological_order(comp: HloComputation) -> list[HloInstruction]:
    """The textual order when it already defines operands first (the usual case), else post order."""
    seen: set[int] = set()
    for instr in comp.instructions:
        if any(id(o) not in seen for o in instr.operands):
            return comp.post_order()
        seen.add(id(instr))
    return comp.instructions


def global_computations(module: HloModule) -> list[HloComputation]:
    """The entry and every computation it runs as control flow (while, conditional, call), depth
    first from the last control-flow instruction's callees (the order the passes have always had)."""
    def callees(comp: HloComputation) -> list[HloComputation]:
        return [c for i in reversed(comp.instructions) if i.opcode in GLOBAL_CONTROL_FLOW
                for c in i.called_computations()]

    return list(depth_first([module.entry], callees))


def instruction_place(instr: HloInstruction) -> str:
    """Where a message should point for `instr`: FILE:LINE:COL when it was parsed from text (its
    name), else the computation it is in."""
    source = getattr(instr, "source", None)
    if source is not None:
        return source[0].place(source[1])
    return f"computation {instr.parent.name}" if instr.parent is not None else "(no place)"
