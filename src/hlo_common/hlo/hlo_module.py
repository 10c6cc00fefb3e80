"""`HloModule`: the computations of a program, one of them the entry (XLA's `hlo_module.h`); the
IR's overview is in `hlo_common.hlo.ir`, which re-exports it.
"""

from __future__ import annotations

from hlo_common.hlo.graph import depth_first, post_order
from hlo_common.hlo.hlo_computation import HloComputation, _ComputationList
from hlo_common.hlo.hlo_instruction import _COMPUTATION_ATTR_KEYS
from hlo_common.hlo.ir_edit import ModuleEditing
from hlo_common.hlo.shape import Shape


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
        starts = [c for c in self.computations if c is not self.entry]
        if self.entry is not None:
            starts.append(self.entry)
        return post_order(starts, _callees)

    def remove_unreachable_computations(self) -> bool:
        reachable = {id(c) for c in depth_first([self.entry], _callees)}
        before = len(self.computations)
        self.computations = [c for c in self.computations if id(c) in reachable]
        return len(self.computations) != before

    def instruction_count(self) -> int:
        return sum(len(c.instructions) for c in self.computations)

    def __repr__(self) -> str:
        return f"<HloModule {self.name}: {len(self.computations)} computations>"


def _callees(comp: HloComputation) -> list[HloComputation]:
    """The computations `comp`'s instructions call, in instruction order (skipping, fast, the
    instructions with no computation attribute)."""
    return [cc for i in comp.instructions if not _COMPUTATION_ATTR_KEYS.isdisjoint(i.attrs)
            for cc in i.called_computations()]


def clone_module(module: HloModule) -> HloModule:
    """A deep copy through the canonical text (literals included), so it is exact by construction."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module

    clone = parse_module(print_module(module), filename=f"<clone of {module.name}>")
    clone.warnings = list(module.warnings)
    return clone
