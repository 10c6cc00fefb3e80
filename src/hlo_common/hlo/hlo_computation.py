"""`HloComputation`: an ordered list of instructions with one root (XLA's `hlo_computation.h`);
the IR's overview is in `hlo_common.hlo.ir`, which re-exports it.

It keeps derived data about its instructions (their post order, a name registry) and updates or
drops it on every edit; `_OwnedList` is the list type that drops such data when edited in place
(the module's list of computations is one too).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator

from hlo_common.hlo.graph import post_order
from hlo_common.hlo.hlo_instruction import HloInstruction, _ids
from hlo_common.hlo.ir_edit import ComputationEditing

if TYPE_CHECKING:
    from hlo_common.hlo.hlo_module import HloModule

_NUMERIC_SUFFIX = re.compile(r"^(.*)\.(\d+)$")


class _OwnedList(list):
    """A list that an IR object keeps derived data about (a computation its post order, a module
    its name index): a plain list whose in-place edits (a test may reverse it) drop that data."""

    __slots__ = ("owner",)
    cache_attr = ""
    more_cache_attrs: tuple[str, ...] = ()

    def __init__(self, owner, items=()):
        super().__init__(items)
        self.owner = owner


def _invalidating(name: str):
    base = getattr(list, name)

    def method(self, *args, **kwargs):
        setattr(self.owner, self.cache_attr, None)
        for attr in self.more_cache_attrs:
            setattr(self.owner, attr, None)
        return base(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
              "__setitem__", "__delitem__", "__iadd__", "__imul__"):
    setattr(_OwnedList, _name, _invalidating(_name))


class _InstructionList(_OwnedList):
    __slots__ = ()
    cache_attr = "_order_cache"
    more_cache_attrs = ("_by_opcode", "_params", "_first_np")


class _ComputationList(_OwnedList):
    __slots__ = ()
    cache_attr = "_comp_index"


class HloComputation(ComputationEditing):
    """An ordered list of instructions with one root; parameters are found by number.

    Instruction names are unique within a computation: `add_instruction` renames a newcomer
    whose name is taken (as XLA's name uniquer does) and `unique_name` hands out fresh ones
    from a per-computation registry in O(1).

    Edits cost O(1): `remove_instruction` and `add_instruction(before=...)` record the change and
    the list is brought up to date, in one O(n) sweep, the next time `instructions` is read. The
    post order is cached until an instruction, an operand or a control edge changes. The
    parameters and the instructions of one opcode (`with_opcode`) are indexed, so the fusion
    passes' questions about a large fused computation cost what the answer holds, not its size."""

    def __init__(self, name: str):
        self.parent: HloModule | None = None
        self.name = name
        self._list = _InstructionList(self)
        self._dead: set[HloInstruction] = set()  # removed, still in _list until it is read
        self._before: dict[HloInstruction, list[HloInstruction]] = {}  # pending insertions
        self._order_cache: list[HloInstruction] | None = None
        self._by_opcode: dict[str, dict[HloInstruction, None]] | None = None  # built on first use
        self._params: list[HloInstruction] | None = None  # by number, built on first use
        self._first_np: HloInstruction | None = None  # first_non_parameter's answer, when known
        self.root: HloInstruction | None = None
        self.parent: HloModule | None = None
        self.is_entry = False
        self.execution_thread: str | None = None  # printed as `, execution_thread="..."`
        self.unique_id = next(_ids)
        self._names: dict[str, HloInstruction] = {}
        self._reserved: set[str] = set()
        self._name_counters: dict[str, int] = {}

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        old = self.__dict__.get("_name")
        self._name = value
        module = self.parent
        if module is not None and old is not None and module._comp_index is not None:
            module._renamed(self, old)

    @property
    def instructions(self) -> list[HloInstruction]:
        if self._dead or self._before:
            self._materialize()
        return self._list

    @instructions.setter
    def instructions(self, value) -> None:
        self._list = _InstructionList(self, value)
        self._dead.clear()
        self._before.clear()
        self._order_cache = None
        self._by_opcode = None
        self._params = None
        self._first_np = None

    def _materialize(self, in_place: bool = True) -> None:
        """Apply the pending removals and insertions, in place (holders of the list see them)
        unless `in_place` is false."""
        dead, before = self._dead, self._before
        out: list[HloInstruction] = []
        emit = out.append
        for instr in self._list:
            if before and instr in before:
                stack = [(instr, True)] + [(i, False) for i in reversed(before.pop(instr))]
                while stack:
                    node, expanded = stack.pop()
                    if not expanded and node in before:
                        stack.append((node, True))
                        stack.extend((i, False) for i in reversed(before.pop(node)))
                    elif node not in dead:
                        emit(node)
            elif instr not in dead:
                emit(instr)
        for anchor in list(before):  # anchors missing from the list (edited by hand): at the end
            out.extend(i for i in before.pop(anchor) if i not in dead)
        dead.clear()
        if in_place:
            list.__setitem__(self._list, slice(None), out)
        else:
            self._list = _InstructionList(self, out)

    def first_non_parameter(self) -> HloInstruction | None:
        """The first instruction of the list that is not a parameter; remembered across the
        insertions before it (a fusion pass inserting before it again and again stays O(1))."""
        first = self._first_np
        if first is not None and first.parent is self and first not in self._dead:
            return first
        first = next((i for i in self.instructions if i.opcode != "parameter"), None)
        self._first_np = first
        return first

    @property
    def parameters(self) -> list[HloInstruction]:
        return list(self._parameter_list())

    def parameter(self, n: int) -> HloInstruction:
        params = self._parameter_list()
        if 0 <= n < len(params) and params[n].parameter_number == n:
            return params[n]
        for p in params:  # numbers with gaps (a computation being edited)
            if p.parameter_number == n:
                return p
        raise KeyError(n)

    def _parameter_list(self) -> list[HloInstruction]:
        """The parameters by number, cached (a parameter's number set anew drops the cache)."""
        params = self._params
        if params is not None:
            return params
        params = self.with_opcode("parameter")
        params.sort(key=lambda p: p.parameter_number)
        self._params = params
        return params

    def with_opcode(self, *opcodes: str) -> list[HloInstruction]:
        """The instructions of `opcodes`, opcode by opcode, each in the order they were added (the
        opcode of an instruction in a computation is not changed in place)."""
        index = self._by_opcode
        if index is None:
            index = {}
            for instr in self.instructions:
                index.setdefault(instr.opcode, {})[instr] = None
            self._by_opcode = index
        out: list[HloInstruction] = []
        for opcode in opcodes:
            found = index.get(opcode)
            if found:
                out.extend(found)
        return out

    def _index_add(self, instr: HloInstruction) -> None:
        if self._by_opcode is not None:
            self._by_opcode.setdefault(instr.opcode, {})[instr] = None
        if instr.opcode == "parameter":
            self._params = None

    def _index_remove(self, instr: HloInstruction) -> None:
        if self._by_opcode is not None:
            found = self._by_opcode.get(instr.opcode)
            if found is not None:
                found.pop(instr, None)
        if instr.opcode == "parameter":
            self._params = None

    def instruction_count(self) -> int:
        """How many instructions it holds, in O(1) (the name registry's size)."""
        return len(self._names)

    def instruction(self, name: str) -> HloInstruction:
        """The instruction called `name` (KeyError when there is none)."""
        return self._names[name]

    # -- names ----------------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        """A name not used (nor handed out) in this computation: `base`, else `base.N` with the
        numeric suffix of `base` stripped first (`add.3` -> `add.4`), like XLA's NameUniquer."""
        if base not in self._names and base not in self._reserved:
            self._reserved.add(base)
            return base
        m = _NUMERIC_SUFFIX.match(base)
        stem = m.group(1) if m else base
        k = self._name_counters.get(stem, 0) + 1
        while f"{stem}.{k}" in self._names or f"{stem}.{k}" in self._reserved:
            k += 1
        self._name_counters[stem] = k
        name = f"{stem}.{k}"
        self._reserved.add(name)
        return name

    def _rename(self, instr: HloInstruction, old: str, new: str) -> None:
        if self._names.get(old) is instr:
            del self._names[old]
        self._names[new] = instr

    # -- instructions ---------------------------------------------------------------------------
    def add_instruction(self, instr: HloInstruction, before: HloInstruction | None = None) -> HloInstruction:
        """Append `instr` (or insert it before `before`); a taken name gets a `.N` suffix."""
        if instr in self._dead:  # re-added before its removal was applied
            self._materialize()
        if before is not None and (before.parent is not self or before in self._dead):
            self.instructions.index(before)  # raises ValueError, as inserting next to a stranger did
        holder = self._names.get(instr.name)
        if holder is not None and holder is not instr:
            instr.__dict__["name"] = self.unique_name(instr.name)
        instr.parent = self
        self._names[instr.name] = instr
        self._order_cache = None
        self._index_add(instr)
        if before is not None and instr.opcode != "parameter":
            if before is self._first_np:
                self._first_np = instr
            elif before.opcode == "parameter":
                self._first_np = None
        if before is None:
            list.append(self._list, instr)
        else:
            self._before.setdefault(before, []).append(instr)
        return instr

    def remove_instruction(self, instr: HloInstruction) -> None:
        """Remove an instruction that has no users (its operands lose it as a user)."""
        if instr.users:
            raise ValueError(f"removing %{instr.name} which still has users "
                             f"{[u.name for u in instr.users]}")
        if instr.parent is not self or instr in self._dead:
            self.instructions.remove(instr)  # not ours: removed now, or ValueError when absent
        else:
            self._dead.add(instr)
            self._order_cache = None
            self._index_remove(instr)
            if len(self._dead) > 4096 and 2 * len(self._dead) > len(self._list):
                # amortized O(1), and the removed are freed rather than kept; a fresh list, so
                # that a loop over the old one (removing as it goes) is not disturbed
                self._materialize(in_place=False)
        for op in instr.operands:
            op._drop_user(instr)
        instr.operands = []
        instr._operand_positions = None
        instr.drop_all_control_deps()
        if self._names.get(instr.name) is instr:
            del self._names[instr.name]
        instr.parent = None

    def post_order(self) -> list[HloInstruction]:
        """Operands (and control predecessors) before users; ties keep textual order, so a list
        that is already in a valid order comes back unchanged. Cached until the next edit."""
        order = self._order_cache
        if order is None:
            order = self._order_cache = self._compute_post_order()
        return list(order)

    def _compute_post_order(self) -> list[HloInstruction]:
        if self._in_valid_order():
            return list(self.instructions)
        return post_order(self.instructions, lambda node: node.operands + node.control_predecessors)

    def _in_valid_order(self) -> bool:
        """Does every instruction come after its operands and control predecessors? (One pass:
        post_order's answer for such a list is the list itself.)"""
        seen: set[int] = set()
        add = seen.add
        for instr in self.instructions:
            for dep in instr.operands:
                if id(dep) not in seen:
                    return False
            if instr.control_predecessors:
                for dep in instr.control_predecessors:
                    if id(dep) not in seen:
                        return False
            add(id(instr))
        return True

    def __iter__(self) -> Iterator[HloInstruction]:
        return iter(self.instructions)

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"
