"""HloDataflowAnalysis: the logical values (HloValue) of a module and where each one appears.

Shared by hlo-codegen's buffer assignment (its first step) and hlo-opt's copy insertion and
scheduler (XLA: `xla/hlo/analysis/hlo_dataflow_analysis.cc`,
`xla/service/hlo_value.cc`). Every array leaf that an instruction of a *global* computation
defines is one `HloValue`; instructions that only pass values through (bitcast,
get-tuple-element, tuple, while, call, conditional, opt-barrier, parameters of called
computations, ...) hold the values of their operands. Value sets are unions (XLA's non-SSA form):
a while's state at index k holds both the init value and the body's root value, which is what
makes them one buffer later. Computations run inside kernels ("embedded": fusion bodies, reducers)
get no values, but their instructions still consume value ids so that ids match XLA's dumps.

    >>> df = HloDataflowAnalysis.run(module)             # doctest: +SKIP
    >>> [v.short_string() for v in df.values]
    ['<0 p0 @0>', '<1 exp @0>']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape

from hlo_common.analysis import call_graph as cg

Index = tuple[int, ...]


@dataclass(frozen=True)
class HloPosition:
    instruction: HloInstruction
    index: Index

    def __str__(self) -> str:
        return f"{self.instruction.name}{format_index(self.index)}"


@dataclass(frozen=True)
class HloUse:
    instruction: HloInstruction
    operand_number: int
    operand_index: Index

    def __str__(self) -> str:
        return f"{self.instruction.name}, operand {self.operand_number}{format_index(self.operand_index)}"


def format_index(index: Index) -> str:
    return "{" + ",".join(str(i) for i in index) + "}"


@dataclass(eq=False)
class HloValue:
    """One logical array: defined at (instruction, index), visible at `positions`, read by `uses`."""

    id: int
    instruction: HloInstruction
    index: Index
    shape: Shape
    positions: list[HloPosition] = field(default_factory=list)
    uses: list[HloUse] = field(default_factory=list)
    live_out: bool = False
    is_phi: bool = False  # SSA form only: a while/body/condition/conditional merge point

    @property
    def defining_position(self) -> HloPosition:
        return self.positions[0]

    @cached_property
    def color(self) -> int:
        """The memory space (layout `S(n)`): 0 default, 1 collective memory on GPU."""
        return self.shape.layout.memory_space if self.shape.layout is not None else 0

    @cached_property
    def size(self) -> int:
        """Bytes of the value's buffer: the array bytes, plus 4 bytes per dimension of dynamic
        metadata for dynamic shapes."""
        size = self.shape.byte_size()
        if self.shape.is_dynamic:
            size += 4 * self.shape.rank
        return size

    def short_string(self) -> str:
        idx = format_index(self.index) if self.instruction.shape.is_tuple else ""
        phi = " (phi)" if self.is_phi else ""
        return f"<{self.id} {self.instruction.name}{idx}{phi} @{self.color}>"

    def __repr__(self) -> str:
        return self.short_string()


def subshape_indices(shape: Shape, prefix: Index = ()) -> list[tuple[Index, Shape]]:
    """Every subshape (tuple nodes included) in XLA's pre-order: {} first, then {0}, {0,0}, ..."""
    out = [(prefix, shape)]
    if shape.is_tuple:
        for i, sub in enumerate(shape.tuple_shapes):
            out.extend(subshape_indices(sub, prefix + (i,)))
    return out


# -- which subshapes an instruction defines (XLA's InitializeInstructionValueSets) ------------------
def _none(instr, idx, shp):
    return False


def _top(instr, idx, shp):
    return idx == ()


def _tuple_nodes(instr, idx, shp):
    return shp.is_tuple


DEFINES: dict[str, Callable[[HloInstruction, Index, Shape], bool]] = {
    **{op: _none for op in ("bitcast", "get-tuple-element", "while", "call", "conditional", "domain",
                            "opt-barrier", "add-dependency", "copy-done", "all-reduce-done")},
    "copy": _top,
    "tuple": _top,
    "async-start": lambda i, idx, s: not idx or s.is_tuple or idx[0] >= 1,
    "async-update": _tuple_nodes,
    "async-done": _tuple_nodes,
    "copy-start": lambda i, idx, s: idx in ((), (0,), (2,)),
    "all-gather-start": lambda i, idx, s: not idx or s.is_tuple or idx[0] == 1,
    "all-gather-done": _tuple_nodes,
    "collective-permute-start": lambda i, idx, s: idx == () or idx[0] >= 1,
    "collective-permute-done": _tuple_nodes,
    "recv-done": lambda i, idx, s: idx in ((), (1,)),
    "send": lambda i, idx, s: idx in ((), (1,), (2,)),
}


# -- where a non-defined leaf takes its values from ------------------------------------------------
def _multi(instr: HloInstruction, index: Index) -> tuple[HloInstruction, Index]:
    """{0, i, rest} -> operand i at rest (or operand 0 at rest when there is a single operand)."""
    if len(instr.operands) > 1:
        return instr.operands[index[1]], index[2:]
    return instr.operands[0], index[1:]


def _done_index(done: HloInstruction, index: Index) -> Index:
    """A *-done reads its start's output: all-gather-start and collective-permute-start return
    (input, output[, contexts]), the output at {1} (for a combined all-gather both are tuples, so
    the shapes' lengths cannot tell); an all-reduce-start returns the output itself."""
    start, out = done.operands[0].shape, done.shape
    if done.opcode in ("all-gather-done", "collective-permute-done") and start.is_tuple:
        return (1,) + index
    if start.is_tuple and (not out.is_tuple or len(start.tuple_shapes) != len(out.tuple_shapes)):
        return (1,) + index
    return index


FORWARDS: dict[str, Callable[[HloInstruction, Index], list[tuple[HloInstruction, Index]]]] = {
    "bitcast": lambda i, idx: [(i.operands[0], idx)],
    "get-tuple-element": lambda i, idx: [(i.operands[0], (i.attrs["index"],) + idx)],
    "tuple": lambda i, idx: [(i.operands[idx[0]], idx[1:])],
    "copy": lambda i, idx: [(i.operands[0], idx)],
    "domain": lambda i, idx: [(i.operands[0], idx)],
    "opt-barrier": lambda i, idx: [(i.operands[0], idx)],
    "add-dependency": lambda i, idx: [(i.operands[0], idx)],
    "all-reduce-done": lambda i, idx: [(i.operands[0], _done_index(i, idx))],
    "async-update": lambda i, idx: [(i.operands[0], idx)],
    "copy-start": lambda i, idx: [(i.operands[0], idx[1:])],
    "copy-done": lambda i, idx: [(i.operands[0], (0,) + idx)],
    "send": lambda i, idx: [(i.operands[0], idx[1:])],
    "recv-done": lambda i, idx: [(i.operands[0], idx)],
    "all-gather-start": lambda i, idx: [_multi(i, idx)],
    "all-gather-done": lambda i, idx: [(i.operands[0], _done_index(i, idx))],
    "collective-permute-start": lambda i, idx: [_multi(i, idx)],
    "collective-permute-done": lambda i, idx: [(i.operands[0], _done_index(i, idx))],
    "async-start": lambda i, idx: [(i.operands[idx[1]], idx[2:])],
    "async-done": lambda i, idx: [(i.operands[0], (1,) + idx)],
    "call": lambda i, idx: [(i.attrs["to_apply"].root, idx)],
    "while": lambda i, idx: [(i.attrs["body"].root, idx), (i.operands[0], idx)],
    "conditional": lambda i, idx: [(c.root, idx) for c in cg.branch_computations(i)],
}


def may_use_operand_value(user: HloInstruction, index: Index) -> bool:
    """XLA's MayUseOperandValue: pass-through users do not read the value."""
    if user.opcode in ("get-tuple-element", "copy"):
        return index == ()
    return user.opcode not in ("tuple", "domain")


class HloDataflowAnalysis:
    """Values, value sets per (instruction, leaf index), positions and uses of a module."""

    def __init__(self, module: HloModule):
        self.module = module
        self.contexts = cg.computation_contexts(module)
        self.computation_order = cg.xla_computation_post_order(module)
        self.global_computations = [c for c in self.computation_order if self.contexts.get(c) == cg.GLOBAL]
        self.values: list[HloValue] = []
        self.value_sets: dict[HloInstruction, dict[Index, tuple[HloValue, ...]]] = {}
        self._param_sources: dict[HloComputation, tuple[HloInstruction, str]] = {}
        self._phi_at: set[tuple[HloInstruction, Index]] | None = None  # SSA form: phi positions
        self.post_orders: dict[HloComputation, list[HloInstruction]] = {}  # XLA's, per computation

    @staticmethod
    def run(module: HloModule, ssa_form: bool = False) -> HloDataflowAnalysis:
        """`ssa_form=True` (XLA's SSA form, what copy insertion reasons with): every position holds
        exactly one value; where loop state or conditional results merge, the while, its body and
        condition parameters and the conditional define phi values instead of holding unions."""
        df = HloDataflowAnalysis(module)
        if ssa_form:
            has_merges = any(i.opcode in ("while", "conditional")
                             for c in module.computations for i in c.instructions)
            df._phi_at = _phi_positions(HloDataflowAnalysis.run(module)) if has_merges else set()
        df._index_call_sites()
        df._define_values()
        df._propagate()
        df._compute_positions_and_uses()
        return df

    # -- queries ---------------------------------------------------------------------------------
    def value_set(self, instr: HloInstruction, index: Index = ()) -> tuple[HloValue, ...]:
        return self.value_sets.get(instr, {}).get(tuple(index), ())

    def unique_value(self, instr: HloInstruction, index: Index = ()) -> HloValue | None:
        vs = self.value_set(instr, index)
        return vs[0] if len(vs) == 1 else None

    def defines_value(self, instr: HloInstruction, index: Index = ()) -> bool:
        vs = self.value_set(instr, index)
        return len(vs) == 1 and vs[0].instruction is instr and vs[0].index == tuple(index)

    def call_site(self, comp: HloComputation) -> tuple[HloInstruction, str] | None:
        """(calling instruction, its opcode) of a while/call/conditional computation, else None."""
        return self._param_sources.get(comp)

    def is_global(self, comp: HloComputation) -> bool:
        return self.contexts.get(comp) == cg.GLOBAL

    def array_leaves(self, instr: HloInstruction) -> list[Index]:
        return [idx for idx, s in instr.shape.leaf_shapes() if s.is_array]

    # -- construction ----------------------------------------------------------------------------
    def _index_call_sites(self) -> None:
        for comp in self.global_computations:
            for instr in comp.instructions:
                if instr.opcode in cg.CONTROL_FLOW_CALLERS:
                    for callee in cg.xla_called_computations(instr):
                        self._param_sources[callee] = (instr, instr.opcode)

    def _defines(self, comp: HloComputation, instr: HloInstruction, idx: Index, shp: Shape) -> bool:
        if self._phi_at is not None and (instr, idx) in self._phi_at:
            return True
        if instr.opcode == "parameter":
            return comp not in self._param_sources
        rule = DEFINES.get(instr.opcode)
        return True if rule is None else rule(instr, idx, shp)

    def _define_values(self) -> None:
        """Number values as XLA does: all computations in post order (embedded ones included,
        tuple and token subshapes included) so ids line up; create HloValues for array leaves of
        global computations only."""
        next_id = 0
        for comp in self.computation_order:
            is_global = self.contexts.get(comp) == cg.GLOBAL
            post_order = self.post_orders[comp] = cg.xla_instruction_post_order(comp)
            for instr in post_order:
                sets: dict[Index, tuple[HloValue, ...]] = {}
                for idx, shp in subshape_indices(instr.shape):
                    defined = self._defines(comp, instr, idx, shp)
                    if defined:
                        vid, next_id = next_id, next_id + 1
                    if not (is_global and shp.is_array):
                        continue
                    if defined:
                        is_phi = self._phi_at is not None and (instr, idx) in self._phi_at
                        value = HloValue(vid, instr, idx, shp, is_phi=is_phi)
                        value.positions.append(HloPosition(instr, idx))
                        self.values.append(value)
                        sets[idx] = (value,)
                    else:
                        sets[idx] = ()
                if is_global:
                    self.value_sets[instr] = sets

    def _sources(self, instr: HloInstruction, idx: Index) -> list[tuple[HloInstruction, Index]]:
        if instr.opcode == "parameter":
            caller, kind = self._param_sources[instr.parent]
            if kind == "while":
                return [(caller.operands[0], idx), (caller.attrs["body"].root, idx)]
            if kind == "call":
                return [(caller.operands[instr.parameter_number], idx)]
            branch = cg.branch_computations(caller).index(instr.parent)
            return [(caller.operands[branch + 1], idx)]
        return FORWARDS[instr.opcode](instr, idx)

    def _propagate(self) -> None:
        """Fixpoint of the forwarding rules (sets only grow, so this terminates)."""
        order = [i for c in self.global_computations for i in self.post_orders[c]]
        pending = [(i, idx) for i in order for idx, vs in self.value_sets[i].items()
                   if not vs or vs[0].instruction is not i]
        for _ in range(4 * len(order) + 8):
            changed = False
            for instr, idx in pending:
                merged: dict[int, HloValue] = {}
                for src, sidx in self._sources(instr, idx):
                    for v in self.value_sets.get(src, {}).get(sidx, ()):
                        merged[v.id] = v
                new = tuple(merged[k] for k in sorted(merged))
                if new != self.value_sets[instr][idx]:
                    self.value_sets[instr][idx] = new
                    changed = True
            if not changed:
                return
        raise AssertionError("dataflow propagation did not converge")

    def _compute_positions_and_uses(self) -> None:
        entry_root = self.module.entry.root
        for comp in self.global_computations:
            for instr in comp.instructions:
                for idx, vs in self.value_sets[instr].items():
                    for v in vs:
                        if v.instruction is not instr or v.index != idx:
                            v.positions.append(HloPosition(instr, idx))
        for v in self.values:
            roots = {id(p.instruction) for p in v.positions if p.instruction.is_root}
            v.live_out = any(p.instruction is entry_root for p in v.positions)
            for pos in v.positions:
                for user in pos.instruction.users:
                    for k, op in enumerate(user.operands):
                        if op is pos.instruction and (may_use_operand_value(user, pos.index)
                                                      or id(user) in roots):
                            v.uses.append(HloUse(user, k, pos.index))


def _phi_positions(df: HloDataflowAnalysis) -> set[tuple[HloInstruction, Index]]:
    """Where SSA form needs phi values, read off the non-SSA analysis `df`: a loop leaf the body
    does not pass through unchanged (the while's set differs from its init's, or the init is
    ambiguous) gets phis at the while and at its body and condition parameters; a conditional
    leaf whose branches may return different values gets a phi at the conditional."""
    phis: set[tuple[HloInstruction, Index]] = set()
    for comp in df.global_computations:
        for instr in comp.instructions:
            if instr.opcode == "while":
                init = instr.operands[0]
                for idx in df.array_leaves(instr):
                    init_set = df.value_set(init, idx)
                    if len(init_set) > 1 or df.value_set(instr, idx) != init_set:
                        phis.add((instr, idx))
                        phis.add((instr.attrs["body"].parameter(0), idx))
                        phis.add((instr.attrs["condition"].parameter(0), idx))
            elif instr.opcode == "conditional":
                for idx in df.array_leaves(instr):
                    if len(df.value_set(instr, idx)) > 1:
                        phis.add((instr, idx))
    return phis
