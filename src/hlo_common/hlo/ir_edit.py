"""Editing helpers of the HLO IR (mixed into `HloInstruction`, `HloComputation`, `HloModule`).

What passes need to rewrite a module, named after XLA's methods: build a new instruction with
its shape inferred (`HloInstruction.create`, `HloComputation.add_new_instruction`), clone an
instruction or a computation, replace an instruction everywhere, remove one together with the
operands that die with it, and add computations under unique names.

    >>> from hlo_common.hlo.parser import parse_module
    >>> m = parse_module("ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }")
    >>> e = m.entry
    >>> a = e.add_new_instruction("abs", [e.root])   # shape inferred: f32[2]
    >>> e.root = a; print(a.name, a.shape)
    abs f32[2]{0}
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Iterable

from hlo_common.hlo.opcodes import OPCODES, SIDE_EFFECTING

if TYPE_CHECKING:
    from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
    from hlo_common.hlo.shape import Shape


class InstructionEditing:
    """Creation and cloning of instructions (methods of `HloInstruction`)."""

    @classmethod
    def create(cls, opcode: str, operands: Iterable[HloInstruction] = (), shape: Shape | None = None,
               attrs: dict[str, Any] | None = None, name: str | None = None, *, literal: Any = None,
               parameter_number: int | None = None) -> HloInstruction:
        """A new instruction, not yet in a computation; the shape is inferred (shape_inference
        .infer_shape) when not given. Note that it is a user of its operands from now on."""
        if opcode not in OPCODES:
            raise ValueError(f"unknown opcode '{opcode}'")
        instr = cls(name or opcode, opcode, shape, list(operands), attrs)
        instr.literal = literal
        instr.parameter_number = parameter_number
        if shape is None:
            from hlo_common.hlo.shape_inference import infer_shape

            try:
                instr.shape = infer_shape(instr)
            except BaseException:
                instr.set_operands([])
                raise
        return instr

    @property
    def has_side_effect(self) -> bool:
        """Side-effecting instructions are never removed as dead code or duplicated."""
        if self.opcode in SIDE_EFFECTING:
            return True
        return self.opcode == "custom-call" and bool(self.attrs.get("custom_call_has_side_effect"))

    def clone(self, suffix: str = "clone", new_operands: Iterable[HloInstruction] | None = None,
              shape: Shape | None = None, name: str | None = None) -> HloInstruction:
        """A copy (XLA's Clone / CloneWithNewOperands): same opcode, attributes, metadata,
        sharding, backend config and literal; operands `new_operands` (default: the same ones);
        named `name` or `<name>.<suffix>`. Control dependencies are not copied; the clone is
        detached (add it to a computation) but already a user of its operands."""
        operands = self.operands if new_operands is None else new_operands
        attrs = {k: (list(v) if isinstance(v, list) else v) for k, v in self.attrs.items()} if self.attrs else None
        new = type(self)(name or f"{self.name}.{suffix}", self.opcode, shape or self.shape, operands, attrs)
        if self.metadata:
            new.metadata = list(self.metadata)
        new.sharding = self.sharding
        if self.frontend_attributes:
            new.frontend_attributes = list(self.frontend_attributes)
        data = self._backend_config  # a string is immutable: only a dict needs the deep copy
        new._backend_config = data if data is None or type(data) is str else copy.deepcopy(data)
        if self.extra_common:
            new.extra_common = list(self.extra_common)
        new.literal = self.literal
        new.literal_unknown = self.literal_unknown
        new.__dict__["parameter_number"] = self.parameter_number  # the setter's parent notice: none yet
        return new

    def clone_with_new_operands(self, new_operands: Iterable[HloInstruction], shape: Shape | None = None,
                                suffix: str = "clone") -> HloInstruction:
        """`clone` with other operands (and optionally another shape)."""
        return self.clone(suffix, new_operands=new_operands, shape=shape)


class ComputationEditing:
    """Building and rewriting inside a computation (methods of `HloComputation`)."""

    def add_new_instruction(self, opcode: str, operands: Iterable[HloInstruction] = (),
                            shape: Shape | None = None, attrs: dict[str, Any] | None = None,
                            name: str | None = None, before: HloInstruction | None = None,
                            **fields: Any) -> HloInstruction:
        """Create an instruction (shape inferred when omitted; `literal=` / `parameter_number=`
        as keyword fields) under a unique name based on `name` or the opcode, and add it."""
        from hlo_common.hlo.ir import HloInstruction

        instr = HloInstruction.create(opcode, operands, shape, attrs, self.unique_name(name or opcode),
                                      **fields)
        return self.add_instruction(instr, before=before)

    def replace_instruction(self, old: HloInstruction, new: HloInstruction,
                            remove_dead_operands: bool = True) -> None:
        """Make every use of `old` (and the root, if it was) use `new`, hand its control
        dependencies to `new`, add `new` if needed, then remove `old` (and, by default, the
        operands that no longer have any use)."""
        if new.parent is None:
            self.add_instruction(new, before=old)
        old.replace_all_uses_with(new)
        for p in list(old.control_predecessors):
            if p is not new:
                p.add_control_dependency_to(new)
        for s in list(old.control_successors):
            if s is not new:
                new.add_control_dependency_to(s)
        old.drop_all_control_deps()
        if old.users:  # `new` itself reads `old` (e.g. new = negate(old)): keep `old`
            return
        if remove_dead_operands:
            self.remove_instruction_and_unused_operands(old)
        else:
            self.remove_instruction(old)

    def is_removable(self, instr: HloInstruction) -> bool:
        """Dead and safe to delete: no users, not the root, not a parameter, no side effect and
        no control dependencies."""
        return (not instr.users and instr is not self.root and instr.opcode != "parameter"
                and not instr.has_side_effect and not instr.control_predecessors
                and not instr.control_successors)

    def remove_instruction_and_unused_operands(self, instr: HloInstruction) -> list[HloInstruction]:
        """Remove `instr` (which must have no users) and, transitively, every operand left
        without users that `is_removable`. Returns the removed instructions in removal order."""
        removed = []
        work = [instr]
        while work:
            cur = work.pop()
            if cur.parent is not self or (cur is not instr and not self.is_removable(cur)):
                continue
            operands = list(dict.fromkeys(cur.operands))
            self.remove_instruction(cur)
            removed.append(cur)
            work.extend(reversed(operands))
        return removed

    def remove_instructions(self, instrs: Iterable[HloInstruction]) -> None:
        """Remove several instructions, each without users when its turn comes (instructions not
        in this computation are only detached)."""
        for instr in instrs:
            if instr.users:
                raise ValueError(f"removing %{instr.name} which still has users "
                                 f"{[u.name for u in instr.users]}")
            if instr.parent is self and instr not in self._dead:
                self.remove_instruction(instr)
                continue
            instr.set_operands([])
            instr.drop_all_control_deps()
            if self._names.get(instr.name) is instr:
                del self._names[instr.name]
            instr.parent = None
            self._dead.add(instr)

    def clone(self, suffix: str = "clone", name: str | None = None) -> HloComputation:
        """A deep copy of the instruction graph (names kept, control dependencies mapped, called
        computations shared), named `name` or `<name>.<suffix>`; not added to any module."""
        from hlo_common.hlo.ir import HloComputation

        new = HloComputation(name or f"{self.name}.{suffix}")
        new.execution_thread = self.execution_thread
        mapping: dict[int, HloInstruction] = {}
        for instr in self.post_order():
            ops = [mapping[id(o)] for o in instr.operands]
            twin = instr.clone(new_operands=ops, name=instr.name)
            mapping[id(instr)] = twin
            new.add_instruction(twin)
        for instr in self.instructions:
            for p in instr.control_predecessors:
                mapping[id(p)].add_control_dependency_to(mapping[id(instr)])
        # keep the original textual order, not the post order used to build
        new.instructions = [mapping[id(i)] for i in self.instructions]
        new.root = mapping[id(self.root)] if self.root is not None else None
        return new


class ModuleEditing:
    """Computations of a module (methods of `HloModule`)."""

    def unique_computation_name(self, base: str) -> str:
        """`base`, or `base.N` when a computation of the module already has that name."""
        names = self._computation_index()[0]
        if base not in names:
            return base
        k = 1
        while f"{base}.{k}" in names:
            k += 1
        return f"{base}.{k}"

    def add_computation(self, comp: HloComputation, entry: bool = False) -> HloComputation:
        """Add `comp` (renamed `name.N` if the name is taken); `entry=True` makes it the entry."""
        names, members = self._computation_index()
        if any(c is not comp for c in names.get(comp.name, ())):
            comp.name = self.unique_computation_name(comp.name)
        comp.parent = self
        names, members = self._computation_index()  # a rename may have rebuilt it
        if comp not in members:
            list.append(self._computations, comp)
            names.setdefault(comp.name, []).append(comp)
            members.add(comp)
        if entry:
            if self.entry is not None:
                self.entry.is_entry = False
            self.entry = comp
            comp.is_entry = True
        return comp

    def add_embedded_computation(self, comp: HloComputation) -> HloComputation:
        """XLA's name for adding a non-entry computation (one that instructions call)."""
        return self.add_computation(comp)

    def remove_computation(self, comp: HloComputation) -> None:
        """Remove a computation that no instruction calls any more."""
        for c in self.computations:
            for i in c.instructions:
                if comp in i.called_computations():
                    raise ValueError(f"computation {comp.name} is still called by %{i.name}")
        if comp is self.entry:
            raise ValueError("cannot remove the entry computation")
        self.computations.remove(comp)
        comp.parent = None

    def clone(self) -> HloModule:
        """A deep copy of the module (through the canonical text, so exact by construction)."""
        from hlo_common.hlo.ir import clone_module

        return clone_module(self)
