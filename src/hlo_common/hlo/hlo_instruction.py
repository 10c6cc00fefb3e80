"""`HloInstruction`: one instruction of the mutable HLO IR (XLA's `hlo_instruction.h`); the IR's
overview is in `hlo_common.hlo.ir`, which re-exports it.

Instructions keep their operands and users in order; opcode-specific attributes live in `attrs`
(keyed by the attribute's text name), called computations among them (`COMPUTATION_ATTRS`), so
`called_computations()` is derived rather than stored twice. The edits every instruction offers
beyond keeping its graph consistent are in `ir_edit.InstructionEditing`.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Any

from hlo_common.hlo.ir_edit import InstructionEditing
from hlo_common.hlo.shape import Shape

if TYPE_CHECKING:
    from hlo_common.hlo.sharding import HloSharding
    from hlo_common.hlo.hlo_computation import HloComputation

_ids = itertools.count(1)  # unique ids of instructions and computations alike
_WIDE = 16  # instructions with more operands index their operand positions (replace_operand_with)

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
        self.sharding: HloSharding | None = None  # hlo.sharding; str() is XLA's text
        self.frontend_attributes: list[tuple[str, str]] = []  # sorted (key, quoted value / JSON)
        self._backend_config: dict | str | None = None
        self.extra_common: list[tuple[str, str]] = []  # other common attrs kept as text
        self.literal: Any = None
        self.literal_unknown = False  # `{...}` constant: values were not in the text
        self.parameter_number: int | None = None
        self.source: tuple | None = None  # (parser_scanner.SourceText, offset) when parsed from text
        self.unique_id = next(_ids)
        if operands:  # append_operand's work without its per-operand edit notices (no parent yet)
            self.operands = ops = list(operands)
            for op in ops:
                op._add_user(self)

    # -- parameter number (the parent computation indexes its parameters by it) -----------------
    @property
    def parameter_number(self) -> int | None:
        return self.__dict__["parameter_number"]

    @parameter_number.setter
    def parameter_number(self, value: int | None) -> None:
        self.__dict__["parameter_number"] = value
        parent = self.__dict__.get("parent")
        if parent is not None:
            parent._params = None

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
            users = self.users
            # the newest users go first in the usual edits (a fusion pass working back from the
            # end of a chain): look at the tail before scanning a long list from its head
            n = len(users)
            for i in range(n - 1, max(n - 9, -1), -1):
                if users[i] is user:
                    del users[i]
                    return
            users.remove(user)

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
