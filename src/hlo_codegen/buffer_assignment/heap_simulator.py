"""Heap simulation: pack the temporaries of the whole module into one heap.

XLA: `xla/service/heap_simulator/heap_simulator.cc`. `HeapSimulator.run` replays the flattened
schedule as a sequence of Alloc / ShareWith / Free events: at each time step the values that
start are allocated (a value whose buffer already has a live member *shares* that member's
chunk; a single-value buffer whose operand dies right here and whose user may overwrite it
in place — elementwise ops, in-place fusions — shares the operand's chunk), then the values that
end are freed.

The events feed `GlobalDecreasingSizeBestFitHeap`, which sees the whole timeline before placing
anything: it sorts the buffer intervals (spatial order: size descending, then duration
descending; temporal order: duration descending including colocated intervals, then size) and
gives each the smallest free gap among the chunks that overlap it in time (offsets aligned),
growing the heap when nothing fits. Both orders run and the smaller heap wins
(`ChooseBestHeapAlgorithm`), spatial first on ties.

    >>> result = HeapSimulator(alias, live_range, alignment=256).run(values)   # doctest: +SKIP
    >>> result.heap_size, result.chunks[value]
    (2048, (1024, 1024))
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hlo_common.analysis.alias import HloAliasAnalysis
from hlo_common.analysis.dataflow import HloValue
from hlo_common.analysis.live_range import HloLiveRange
from hlo_common.analysis.sharing import can_share_operand_buffer_with_user
from hlo_common.hlo.ir import HloInstruction

SPATIAL = "spatial"
TEMPORAL = "temporal"



def kernel_can_share(operand_value: HloValue, user: HloInstruction, user_index: tuple[int, ...]) -> bool:
    """May `user`'s output at `user_index` reuse the buffer of `operand_value`, which dies there?

    XLA's CanShareOperandBufferWithUser, plus equal element types: unlike XLA's untyped pointers,
    a kernel parameter here is one typed buffer, so an elementwise `convert` f32 -> s32 (same
    bytes) writes a buffer of its own."""
    out_type = user.shape.subshape(user_index).element_type
    if operand_value.shape.element_type != out_type or operand_value.instruction not in user.operands:
        return False
    return can_share_operand_buffer_with_user(operand_value.instruction, operand_value.index, user,
                                              user_index)

@dataclass
class HeapResult:
    heap_size: int = 0
    chunks: dict[HloValue, tuple[int, int]] = field(default_factory=dict)  # value -> (offset, size)
    fragmentation: int = 0
    algorithm: str = SPATIAL


@dataclass
class _Interval:
    value: HloValue
    size: int
    start: int
    end: int = -1
    colocations: list[HloValue] = field(default_factory=list)
    need_allocation: bool = True


def _round_up(x, a):
    return (x + a - 1) // a * a


class GlobalDecreasingSizeBestFitHeap:
    """Places buffer intervals (times are event counts) after seeing all of them."""

    def __init__(self, alignment: int, kind: str):
        self.alignment = alignment
        self.kind = kind
        self.intervals: dict[HloValue, _Interval] = {}
        self.time = 0
        self.zero_sized: list[HloValue] = []

    def alloc(self, value: HloValue, size: int) -> None:
        if size == 0:
            self.zero_sized.append(value)
            return
        self.intervals[value] = _Interval(value, size, self.time)
        self.time += 1

    def share_with(self, value: HloValue, other: HloValue, size: int) -> None:
        if size == 0:
            self.zero_sized.append(value)
            return
        self.intervals[other].colocations.append(value)
        self.intervals[value] = _Interval(value, size, self.time, need_allocation=False)
        self.time += 1

    def free(self, value: HloValue, size: int) -> None:
        if size == 0:
            return
        self.intervals[value].end = self.time
        self.time += 1

    def _colocations(self, iv: _Interval) -> list[_Interval]:
        out, seen, work = [], set(), [iv]
        while work:
            for c in work.pop().colocations:
                if c not in seen:
                    seen.add(c)
                    out.append(self.intervals[c])
                    work.append(self.intervals[c])
        return out

    def _sort_key(self, iv: _Interval):
        if self.kind == SPATIAL:
            return (-iv.size, iv.start - iv.end, iv.value.id)
        end = max([iv.end] + [c.end for c in self._colocations(iv)])
        return (iv.start - end, -iv.size, iv.value.id)

    def finish(self) -> HeapResult:
        result = HeapResult(algorithm=self.kind)
        for v in self.zero_sized:
            result.chunks[v] = (0, 0)
        n_max = len(self.intervals) + 1
        starts, ends = np.zeros(n_max, np.int64), np.zeros(n_max, np.int64)
        offs, sizes = np.zeros(n_max, np.int64), np.zeros(n_max, np.int64)
        n = 0
        for iv in sorted(self.intervals.values(), key=self._sort_key):
            if not iv.need_allocation:
                continue
            group = [iv] + self._colocations(iv)
            mask = np.zeros(n, bool)
            for g in group:
                mask |= (starts[:n] <= g.end) & (ends[:n] >= g.start)
            need = max(g.size for g in group)
            offset = self._best_fit(offs[:n][mask], sizes[:n][mask], need)
            result.heap_size = max(result.heap_size, offset + iv.size)
            for g in group:
                starts[n], ends[n], offs[n], sizes[n] = g.start, g.end, offset, iv.size
                n += 1
                result.chunks[g.value] = (offset, iv.size)
        return result

    def _best_fit(self, offsets: np.ndarray, sizes: np.ndarray, need: int) -> int:
        """Smallest free gap (ties: lowest offset) that holds `need` bytes; else the heap's end."""
        if offsets.size == 0:
            return 0
        order = np.argsort(offsets, kind="stable")
        o = offsets[order]
        e = np.maximum.accumulate(_round_up(o + sizes[order], self.alignment))
        prev = np.concatenate(([0], e[:-1]))
        gap_start = prev
        gap_size = o - prev
        ok = gap_size >= need
        if ok.any():
            cand = np.flatnonzero(ok)
            best = cand[np.lexsort((gap_start[cand], gap_size[cand]))[0]]
            return int(gap_start[best])
        return int(e[-1])


class HeapSimulator:
    """Replays the schedule for `values` and returns the better of the two best-fit packings."""

    def __init__(self, alias: HloAliasAnalysis, live_range: HloLiveRange, alignment: int):
        self.alias = alias
        self.dataflow = alias.dataflow
        self.live_range = live_range
        self.alignment = alignment

    def buffer_size(self, value: HloValue) -> int:
        return self.alias.buffer_of(value).size

    def events(self, values: set[HloValue]) -> tuple[list[tuple], int]:
        ranges = {v: self.live_range.ranges[v] for v in values}
        steps = self.live_range.schedule_end_time + 1
        defined: list[list[HloValue]] = [[] for _ in range(steps)]
        freed: list[list[HloValue]] = [[] for _ in range(steps)]
        for v in sorted(values, key=lambda v: (ranges[v][0], ranges[v][1], v.id)):
            defined[ranges[v][0]].append(v)
            freed[ranges[v][1]].append(v)
        first: dict[int, HloValue] = {}
        events: list[tuple] = []
        live = peak = 0
        for i in range(steps):
            for v in defined[i]:
                buf = self.alias.buffer_of(v)
                size = self.buffer_size(v)
                if buf.id in first:
                    events.append(("share", v, first[buf.id], size))
                elif (shared := self._operand_to_share(v, buf, i, ranges, freed, values)) is not None:
                    events.append(("free", shared, self.buffer_size(shared)))
                    live -= self.buffer_size(shared)
                    freed[i].remove(shared)
                    ranges[shared] = (ranges[shared][0], ranges[v][1])
                    events.append(("share", v, shared, self.buffer_size(shared)))
                else:
                    events.append(("alloc", v, size))
                    first[buf.id] = v
                live += size
                peak = max(peak, live)
            for v in freed[i]:
                events.append(("free", v, self.buffer_size(v)))
                live -= self.buffer_size(v)
        return events, peak

    def _operand_to_share(self, value, buf, i, ranges, freed, values) -> HloValue | None:
        if len(buf.values) != 1:
            return None
        user = value.instruction
        if user.opcode == "copy":
            return None
        for operand in user.operands:
            for ov in self.dataflow.value_set(operand, ()):
                if len(self.alias.buffer_of(ov).values) > 1 or ov not in values:
                    continue
                if ranges[ov][1] != i or ov not in freed[i]:
                    continue
                if kernel_can_share(ov, user, value.index):
                    return ov
        return None

    def run(self, values: set[HloValue]) -> HeapResult:
        events, no_fragmentation_peak = self.events(values)
        results = []
        for kind in (SPATIAL, TEMPORAL):
            heap = GlobalDecreasingSizeBestFitHeap(self.alignment, kind)
            for ev in events:
                if ev[0] == "alloc":
                    heap.alloc(ev[1], ev[2])
                elif ev[0] == "share":
                    heap.share_with(ev[1], ev[2], ev[3])
                else:
                    heap.free(ev[1], ev[2])
            results.append(heap.finish())
        best = min(results, key=lambda r: r.heap_size)  # min() keeps the first (spatial) on ties
        best.fragmentation = best.heap_size - no_fragmentation_peak
        return best


def value_size(value: HloValue) -> int:
    """Bytes of a value's buffer (see `HloValue.size`)."""
    return value.size
