"""The mutable HLO IR: `HloModule` > `HloComputation` > `HloInstruction`, named as in XLA.

Every tool works on this IR: the parser builds it, passes edit it, the printer writes it back.
Instructions keep their operands and users in order; opcode-specific attributes live in
`attrs` (a dict keyed by the attribute's text name, e.g. `dimensions`, `window`, `to_apply`),
holding typed values from `hlo_common.hlo.attributes` or, for attributes this project does not
interpret, a `RawAttr` that keeps the text. Called computations are attribute values too, so
`called_computations()` is derived rather than stored twice. The attributes every instruction
may carry are fields: `metadata` and `frontend_attributes` ((key, value text) pairs), `sharding`
(its canonical text), control predecessors/successors, and the backend config as data
(`backend_config_data`: a JSON object as a dict in key order, or a plain string).

    >>> m = parse_module("ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }")
    >>> m.entry.root.opcode, [o.name for o in m.entry.root.operands]
    ('negate', ['p'])
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Iterator

from hlo_common.hlo.ir_edit import ComputationEditing, InstructionEditing, ModuleEditing
from hlo_common.hlo.shape import Shape

_ids = itertools.count(1)
_WIDE = 16  # instructions with more operands index their operand positions (replace_operand_with)
_NUMERIC_SUFFIX = re.compile(r"^(.*)\.(\d+)$")

# Attributes whose values are called computations, in the order XLA prints them.
COMPUTATION_ATTRS = (
    "calls", "to_apply", "condition", "body", "select", "scatter",
    "true_computation", "false_computation", "branch_computations", "called_computations",
)
_COMPUTATION_ATTR_RANK = {key: k for k, key in enumerate(COMPUTATION_ATTRS)}
_COMPUTATION_ATTR_KEYS = frozenset(COMPUTATION_ATTRS)


class HloInstruction(InstructionEditing):
    """One HLO instruction. `literal` holds a constant's value (numpy array or tuple of them);
    a large all-zero constant may be a read-only broadcast view."""

    def __init__(self, name: str, opcode: str, shape: Shape, operands=(), attrs=None):
        self.parent: HloComputation | None = None
        self.__dict__["name"] = name  # under its own key, so copies of __dict__ skip it as "name"
        self.opcode = opcode
        self.shape = shape
        self.operands: list[HloInstruction] = []
        self.users: list[HloInstruction] = []
        self._user_set: set[HloInstruction] = set()  # the users again, for O(1) membership
        self._operand_positions: dict[HloInstruction, list[int]] | None = None  # wide ones only
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.control_predecessors: list[HloInstruction] = []
        self.control_successors: list[HloInstruction] = []
        self.metadata: list[tuple[str, str]] = []  # (key, value text) in canonical order
        self.sharding: str | None = None  # canonical text, e.g. "{devices=[2,1]0,1}"
        self.frontend_attributes: list[tuple[str, str]] = []  # sorted (key, quoted value / JSON)
        self._backend_config: dict | str | None = None
        self.extra_common: list[tuple[str, str]] = []  # other common attrs kept as text
        self.literal: Any = None
        self.literal_unknown = False  # `{...}` constant: values were not in the text
        self.parameter_number: int | None = None
        self.source: tuple | None = None  # (parser_scanner.SourceText, offset) when parsed from text
        self.unique_id = next(_ids)
        for op in operands:
            self.append_operand(op)

    # -- name (kept in the parent computation's name registry) ---------------------------------
    @property
    def name(self) -> str:
        return self.__dict__["name"]

    @name.setter
    def name(self, value: str) -> None:
        if self.parent is not None:
            self.parent._rename(self, self.__dict__["name"], value)
        self.__dict__["name"] = value

    # -- backend config ---------------------------------------------------------------------------
    @property
    def backend_config_data(self) -> dict | str | None:
        """The backend config as data: a dict (JSON object, key order kept), a string, or None."""
        return self._backend_config

    @backend_config_data.setter
    def backend_config_data(self, value: dict | str | None) -> None:
        self._backend_config = None if value == "" else value

    @property
    def backend_config(self) -> str | None:
        """Canonical text after `backend_config=`: compact JSON for a dict, a quoted string else."""
        from hlo_common.hlo.attributes import format_backend_config

        return format_backend_config(self._backend_config)

    @backend_config.setter
    def backend_config(self, text: str | dict | None) -> None:
        """Accepts a dict, None, or text: JSON object text, or a quoted / plain string."""
        from hlo_common.hlo.attributes import c_unescape, parse_json_object

        if isinstance(text, str) and len(text) >= 2 and text[0] == text[-1] == '"':
            text = c_unescape(text[1:-1])
        if isinstance(text, str):
            text = parse_json_object(text) or text
        self.backend_config_data = text

    # -- graph editing ------------------------------------------------------------------------
    # Users are a list in first-use order (what passes iterate) with a set beside it, so that the
    # membership tests of every operand edit cost O(1) even for a constant with thousands of users.
    # Every edit tells the parent computation, whose cached post order it invalidates.
    def _add_user(self, user: HloInstruction) -> None:
        if user not in self._user_set:
            self._user_set.add(user)
            self.users.append(user)

    def _drop_user(self, user: HloInstruction) -> None:
        if user in self._user_set:
            self._user_set.discard(user)
            self.users.remove(user)

    def _edited(self) -> None:
        self._operand_positions = None
        if self.parent is not None:
            self.parent._order_cache = None

    def append_operand(self, op: HloInstruction) -> None:
        self.operands.append(op)
        op._add_user(self)
        self._edited()

    def replace_operand(self, index: int, new: HloInstruction) -> None:
        old = self.operands[index]
        self.operands[index] = new
        if old is new:
            return
        self._edited()
        if old not in self.operands:  # identity: instructions define no __eq__
            old._drop_user(self)
        new._add_user(self)

    def replace_operand_with(self, old: HloInstruction, new: HloInstruction) -> None:
        """Every operand slot holding `old` holds `new`. Wide instructions (tuples of loop state)
        index their operand positions on first use, so replacing each of k operands costs O(k)."""
        if old is new:
            return
        operands = self.operands
        positions = None
        if len(operands) <= _WIDE:
            slots = [i for i, op in enumerate(operands) if op is old]
        else:
            positions = self._operand_positions
            if positions is None:
                positions = {}
                for i, op in enumerate(operands):
                    positions.setdefault(op, []).append(i)
                self._operand_positions = positions
            slots = positions.pop(old, None)
        if not slots:
            return
        for i in slots:
            operands[i] = new
        self._edited()  # forgets the positions: they are brought up to date below
        if positions is not None:
            moved = positions.setdefault(new, [])
            moved.extend(slots)
            moved.sort()
            self._operand_positions = positions
        old._drop_user(self)
        new._add_user(self)

    def set_operands(self, operands) -> None:
        for op in self.operands:
            op._drop_user(self)
        self.operands = []
        for op in operands:
            self.append_operand(op)
        self._edited()

    def replace_all_uses_with(self, new: HloInstruction) -> None:
        """Every user of `self` reads `new` instead; if `self` was the root, `new` becomes it."""
        for user in list(self.users):
            if user is new:
                continue
            user.replace_operand_with(self, new)
        comp = self.parent
        if comp is not None and comp.root is self:
            comp.root = new

    def add_control_dependency_to(self, successor: HloInstruction) -> None:
        if successor not in self.control_successors:
            self.control_successors.append(successor)
            successor.control_predecessors.append(self)
            successor._edited()

    def remove_control_dependency_to(self, successor: HloInstruction) -> None:
        if successor in self.control_successors:
            self.control_successors.remove(successor)
            successor.control_predecessors.remove(self)
            successor._edited()

    def drop_all_control_deps(self) -> None:
        if not self.control_predecessors and not self.control_successors:
            return
        for p in self.control_predecessors:
            p.control_successors.remove(self)
        for s in self.control_successors:
            s.control_predecessors.remove(self)
            s._edited()
        self.control_predecessors = []
        self.control_successors = []
        self._edited()

    # -- queries ------------------------------------------------------------------------------
    def called_computations(self) -> list[HloComputation]:
        """In COMPUTATION_ATTRS order. (Hot: scans the few attributes an instruction has.)"""
        if _COMPUTATION_ATTR_KEYS.isdisjoint(self.attrs):
            return []
        keys = [k for k in self.attrs if k in _COMPUTATION_ATTR_RANK]
        if len(keys) > 1:
            keys.sort(key=_COMPUTATION_ATTR_RANK.__getitem__)
        out = []
        for key in keys:
            v = self.attrs[key]
            if v is None:
                continue
            if isinstance(v, list):
                out.extend(v)
            else:
                out.append(v)
        return out

    def operand(self, i: int) -> HloInstruction:
        return self.operands[i]

    @property
    def is_root(self) -> bool:
        return self.parent is not None and self.parent.root is self

    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)

    def metadata_value(self, key: str) -> str | int | None:
        """One metadata field as a Python value (strings unquoted), or None when absent."""
        from hlo_common.hlo.attributes import c_unescape

        for k, v in self.metadata:
            if k == key:
                if v.startswith('"'):
                    return c_unescape(v[1:-1])
                return int(v) if re.fullmatch(r"-?\d+", v) else v
        return None

    def fused_computation(self) -> HloComputation:
        return self.attrs["calls"]

    def __repr__(self) -> str:
        return f"<{self.opcode} %{self.name} {self.shape}>"


class _OwnedList(list):
    """A list that an IR object keeps derived data about (a computation its post order, a module
    its name index): a plain list whose in-place edits (a test may reverse it) drop that data."""

    __slots__ = ("owner",)
    cache_attr = ""

    def __init__(self, owner, items=()):
        super().__init__(items)
        self.owner = owner


def _invalidating(name: str):
    base = getattr(list, name)

    def method(self, *args, **kwargs):
        setattr(self.owner, self.cache_attr, None)
        return base(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
              "__setitem__", "__delitem__", "__iadd__", "__imul__"):
    setattr(_OwnedList, _name, _invalidating(_name))


class _InstructionList(_OwnedList):
    __slots__ = ()
    cache_attr = "_order_cache"


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
    post order is cached until an instruction, an operand or a control edge changes."""

    def __init__(self, name: str):
        self.parent: HloModule | None = None
        self.name = name
        self._list = _InstructionList(self)
        self._dead: set[HloInstruction] = set()  # removed, still in _list until it is read
        self._before: dict[HloInstruction, list[HloInstruction]] = {}  # pending insertions
        self._order_cache: list[HloInstruction] | None = None
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

    def _materialize(self) -> None:
        """Apply the pending removals and insertions, in place (holders of the list see them)."""
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
        list.__setitem__(self._list, slice(None), out)

    @property
    def parameters(self) -> list[HloInstruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        params.sort(key=lambda p: p.parameter_number)
        return params

    def parameter(self, n: int) -> HloInstruction:
        for i in self.instructions:
            if i.opcode == "parameter" and i.parameter_number == n:
                return i
        raise KeyError(n)

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
        visited: set[int] = set()
        order: list[HloInstruction] = []
        for start in self.instructions:
            if id(start) in visited:
                continue
            stack = [(start, False)]
            while stack:
                node, expanded = stack.pop()
                if expanded:
                    order.append(node)
                    continue
                if id(node) in visited:
                    continue
                visited.add(id(node))
                stack.append((node, True))
                for dep in reversed(node.operands + node.control_predecessors):
                    if id(dep) not in visited:
                        stack.append((dep, False))
        return order

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


class HloModule(ModuleEditing):
    """Computations in definition order (callees before callers); one of them is the entry."""

    def __init__(self, name: str):
        self.name = name
        self._computations = _ComputationList(self)
        # name -> computations of that name (list order), and the set of computations; built on
        # first use, kept up to date by add_computation and renames, dropped by any other edit.
        self._comp_index: tuple[dict[str, list[HloComputation]], set[HloComputation]] | None = None
        self.entry: HloComputation | None = None
        # Header attributes other than entry_computation_layout, as (key, value text).
        self.header_attrs: list[tuple[str, str]] = []
        self.entry_computation_layout: tuple[list[Shape], Shape] | None = None
        self.stack_frames: str | None = None  # the stack-frame table, kept as text
        self.is_scheduled = False
        self.warnings: list[str] = []

    @property
    def computations(self) -> list[HloComputation]:
        return self._computations

    @computations.setter
    def computations(self, value) -> None:
        self._computations = _ComputationList(self, value)
        self._comp_index = None

    def _computation_index(self) -> tuple[dict[str, list[HloComputation]], set[HloComputation]]:
        if self._comp_index is None:
            names: dict[str, list[HloComputation]] = {}
            for c in self._computations:
                names.setdefault(c.name, []).append(c)
            self._comp_index = (names, set(self._computations))
        return self._comp_index

    def _renamed(self, comp: HloComputation, old: str) -> None:
        names, members = self._comp_index
        if comp not in members:
            return
        holders = names.get(old, [])
        if comp in holders:
            holders.remove(comp)
            if not holders:
                del names[old]
        if comp.name in names:  # two computations of one name, for a moment: order them again
            self._comp_index = None
        else:
            names[comp.name] = [comp]

    def computation(self, name: str) -> HloComputation:
        holders = self._computation_index()[0].get(name)
        if not holders:
            raise KeyError(name)
        return holders[0]

    def header_attr(self, key: str) -> str | None:
        for k, v in self.header_attrs:
            if k == key:
                return v
        return None

    def set_header_attr(self, key: str, value: str | None) -> None:
        self.header_attrs = [(k, v) for k, v in self.header_attrs if k != key]
        if value is not None:
            self.header_attrs.append((key, value))

    def computation_post_order(self) -> list[HloComputation]:
        """Callees before callers, entry last; unreachable computations keep their place first."""
        seen: set[int] = set()
        order: list[HloComputation] = []

        def visit(c: HloComputation) -> None:
            stack = [(c, False)]
            while stack:
                node, done = stack.pop()
                if done:
                    order.append(node)
                    continue
                if id(node) in seen:
                    continue
                seen.add(id(node))
                stack.append((node, True))
                callees = [cc for i in node.instructions if not _COMPUTATION_ATTR_KEYS.isdisjoint(i.attrs)
                           for cc in i.called_computations()]
                for cc in reversed(callees):
                    if id(cc) not in seen:
                        stack.append((cc, False))

        for c in self.computations:
            if c is not self.entry:
                visit(c)
        if self.entry is not None:
            visit(self.entry)
        return order

    def remove_unreachable_computations(self) -> bool:
        reachable: set[int] = set()
        stack = [self.entry]
        while stack:
            c = stack.pop()
            if id(c) in reachable:
                continue
            reachable.add(id(c))
            stack.extend(cc for i in c.instructions if not _COMPUTATION_ATTR_KEYS.isdisjoint(i.attrs)
                         for cc in i.called_computations())
        before = len(self.computations)
        self.computations = [c for c in self.computations if id(c) in reachable]
        return len(self.computations) != before

    def instruction_count(self) -> int:
        return sum(len(c.instructions) for c in self.computations)

    def __repr__(self) -> str:
        return f"<HloModule {self.name}: {len(self.computations)} computations>"


def clone_module(module: HloModule) -> HloModule:
    """A deep copy through the canonical text (literals included), so it is exact by construction."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module

    clone = parse_module(print_module(module), filename=f"<clone of {module.name}>")
    clone.warnings = list(module.warnings)
    return clone


def parse_module(text: str, filename: str = "<string>") -> HloModule:  # re-export for doctest
    from hlo_common.hlo.parser import parse_module as _pm

    return _pm(text, filename)
