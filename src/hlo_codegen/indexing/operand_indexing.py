"""`OperandIndexing` and `HloInstructionIndexing`: indexing maps tagged with their runtime variables.

Where it sits: the value type returned by op_indexing.py (one instruction) and
fusion_indexing.py (a fused computation). An `OperandIndexing` is an `IndexingMap` plus, for
each of its runtime variables `rt_k`, a `RuntimeVarIndexing` saying which instruction holds the
value (e.g. a dynamic-slice start index) and at which index of that instruction it is read,
as a map from the same output index (XLA's `RuntimeVarIndexing`). The emitter reads that
element, clamps it into the variable's bounds (the bounds encode dynamic-slice clamping) and
substitutes it.

    >>> from hlo_codegen.indexing.indexing_map import IndexingMap
    >>> idx = HloInstructionIndexing([[OperandIndexing(IndexingMap.identity([2]))]])
    >>> idx.to_string()
    'operand id = 0 (d0) -> (d0), domain: d0 in [0, 1]'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from hlo_codegen.indexing.indexing_map import IndexingMap, compose_indexing_maps
from hlo_common.hlo.ir import HloInstruction


@dataclass(frozen=True, eq=False)
class RuntimeVarIndexing:
    """Runtime variable source: element `map(output index)` of instruction `hlo`."""

    hlo: HloInstruction
    map: IndexingMap

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RuntimeVarIndexing) and self.hlo is other.hlo
                and self.map == other.map)

    def __hash__(self) -> int:
        return hash((self.hlo.unique_id, self.map))

    def __str__(self) -> str:
        return f"%{self.hlo.name} at {self.map}"


@dataclass(frozen=True)
class OperandIndexing:
    """An indexing map and the sources of its runtime variables (one per `map.rt_vars`)."""

    map: IndexingMap
    rt_vars: tuple[RuntimeVarIndexing, ...] = field(default=())

    @property
    def is_undefined(self) -> bool:
        return self.map.is_undefined

    def simplify(self) -> OperandIndexing:
        """Simplify the map and the maps of the runtime-variable sources."""
        rts = tuple(RuntimeVarIndexing(rt.hlo, rt.map.simplify()) for rt in self.rt_vars)
        return OperandIndexing(self.map.simplify(), rts)

    def remove_unused_symbols(self) -> OperandIndexing:
        """Drop unused symbols (with the sources of removed runtime variables)."""
        new_map, removed = self.map.remove_unused_symbols_with_mask()
        nr = len(self.map.range_vars)
        kept = tuple(RuntimeVarIndexing(rt.hlo, rt.map.remove_unused_symbols())
                     for k, rt in enumerate(self.rt_vars)
                     if not (nr + k < len(removed) and removed[nr + k]))
        return OperandIndexing(new_map, kept)

    def __str__(self) -> str:
        text = str(self.map)
        for k, rt in enumerate(self.rt_vars):
            text += f"\n  rt{k}: {rt}"
        return text


def compose_operand_indexing(first: OperandIndexing, second: OperandIndexing) -> OperandIndexing:
    """`second ∘ first`, keeping runtime-variable sources in the composed map's rt order."""
    composed = compose_indexing_maps(first.map, second.map)
    rts = tuple(RuntimeVarIndexing(rt.hlo, compose_indexing_maps(first.map, rt.map))
                for rt in second.rt_vars) + first.rt_vars
    return OperandIndexing(composed, rts)


class HloInstructionIndexing:
    """Per operand (or per fused parameter) an ordered, duplicate-free list of `OperandIndexing`."""

    def __init__(self, indexing_maps: Iterable[Iterable[OperandIndexing]] = ()):
        self.indexing_maps: list[list[OperandIndexing]] = []
        for group in indexing_maps:
            self.indexing_maps.append(_dedup(group))

    @staticmethod
    def from_maps(maps: Iterable[IndexingMap]) -> HloInstructionIndexing:
        return HloInstructionIndexing([[OperandIndexing(m)] for m in maps])

    def maps(self, operand_id: int) -> list[IndexingMap]:
        return [oi.map for oi in self.indexing_maps[operand_id]]

    def simplify(self) -> HloInstructionIndexing:
        return HloInstructionIndexing(
            [oi.simplify().remove_unused_symbols() for oi in group if not oi.is_undefined]
            for group in self.indexing_maps)

    def to_string(self, separator: str = " ", with_rt_vars: bool = False) -> str:
        """XLA's HloInstructionIndexing::ToString ("unknown indexing" for undefined maps)."""
        parts = []
        for i, group in enumerate(self.indexing_maps):
            texts = ["unknown indexing" if oi.is_undefined else str(oi) if with_rt_vars
                     else str(oi.map) for oi in group]
            parts.append(f"operand id = {i} " + " ".join(texts))
        return separator.join(parts)

    def __str__(self) -> str:
        return self.to_string("\n")


def _dedup(group: Iterable[OperandIndexing]) -> list[OperandIndexing]:
    out: list[OperandIndexing] = []
    seen: set[OperandIndexing] = set()
    for oi in group:
        if oi not in seen:
            seen.add(oi)
            out.append(oi)
    return out
