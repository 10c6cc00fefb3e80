"""The best-fit heap, the alias-spec parser and the text helpers, on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.analysis.dataflow import HloValue
from hlo_common.analysis.sharing import parse_alias_spec
from hlo_common.errors import HloError
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.shape import Shape
from hlo_codegen.buffer_assignment import assign_buffers
from hlo_codegen.buffer_assignment.dump import human_readable_num_bytes
from hlo_codegen.buffer_assignment.heap_simulator import SPATIAL, TEMPORAL, GlobalDecreasingSizeBestFitHeap


def values(n):
    return [HloValue(i, None, (), Shape.array("u8", (1,))) for i in range(n)]


def run_heap(kind, alignment, events):
    """events: ("alloc", k, size) / ("free", k, size) on values k; returns (heap size, offsets)."""
    vs = values(3)
    heap = GlobalDecreasingSizeBestFitHeap(alignment, kind)
    for op, k, size in events:
        getattr(heap, op)(vs[k], size)
    r = heap.finish()
    return r.heap_size, [r.chunks[v][0] for v in vs]


# A: 10 bytes over event times [0, 2]; B: 5 bytes over [1, 4]; C: 5 bytes over [3, 5].
EVENTS = [("alloc", 0, 10), ("alloc", 1, 5), ("free", 0, 10), ("alloc", 2, 5), ("free", 1, 5), ("free", 2, 5)]


def test_spatial_order_places_largest_first():
    # A at 0; B overlaps A in time -> after it at 10; C overlaps only B -> the gap [0, 10) at 0.
    assert run_heap(SPATIAL, 1, EVENTS) == (15, [0, 10, 0])


def test_temporal_order_places_longest_first():
    # Durations: B 3, A 2, C 2 (A before C: larger). B at 0, A after B at 5, C overlaps only B:
    # no gap below B, so C goes at B's end, 5.
    assert run_heap(TEMPORAL, 1, EVENTS) == (15, [5, 0, 5])


def test_alignment_rounds_chunk_ends_up():
    # 8-byte alignment. Spatial: A 0, B at round_up(10)=16, C in the gap [0, 16): heap 21.
    # Temporal: B 0, A at round_up(5)=8, C at 8 too (it never meets A): heap 18.
    assert run_heap(SPATIAL, 8, EVENTS) == (21, [0, 16, 0])
    assert run_heap(TEMPORAL, 8, EVENTS) == (18, [8, 0, 8])


def test_best_fit_takes_the_smallest_gap_that_fits():
    heap = GlobalDecreasingSizeBestFitHeap(1, SPATIAL)
    offs, sizes = np.array([0, 12, 22]), np.array([4, 4, 4])  # gaps [4,12) (8 B) and [16,22) (6 B)
    assert heap._best_fit(offs, sizes, 5) == 16
    assert heap._best_fit(offs, sizes, 7) == 4
    assert heap._best_fit(offs, sizes, 9) == 26  # nothing fits: the heap grows
    assert GlobalDecreasingSizeBestFitHeap(4, SPATIAL)._best_fit(np.array([0, 10]), np.array([3, 2]), 6) == 4


def test_zero_sized_values_sit_at_offset_zero():
    vs = values(2)
    heap = GlobalDecreasingSizeBestFitHeap(256, SPATIAL)
    heap.alloc(vs[0], 0)
    heap.alloc(vs[1], 4)
    heap.free(vs[0], 0)
    heap.free(vs[1], 4)
    r = heap.finish()
    assert r.chunks[vs[0]] == (0, 0) and r.chunks[vs[1]] == (0, 4) and r.heap_size == 4


def test_better_of_two_orders_wins_in_a_module():
    # Temporaries a (1 KiB, long) and three short 512 B values in turn: whichever order wins,
    # the temp allocation must be no larger than the ideal 1.5 KiB (a + one short value).
    m = parse_module("""add {
      x = f32[] parameter(0)
      y = f32[] parameter(1)
      ROOT s = f32[] add(x, y)
    }
    ENTRY e {
      p = f32[256] parameter(0)
      q = f32[128] parameter(1)
      a = f32[256] exponential(p)
      b = f32[128] sine(q)
      z = f32[] constant(0)
      rb = f32[] reduce(b, z), dimensions={0}, to_apply=add
      c = f32[128] cosine(q)
      rc = f32[] reduce(c, z), dimensions={0}, to_apply=add
      ra = f32[] reduce(a, z), dimensions={0}, to_apply=add
      ROOT o = (f32[], f32[], f32[]) tuple(ra, rb, rc)
    }""")
    ba = assign_buffers(m)
    assert ba.temp_allocation.size == 1536
    assert ba.stats()["preallocated_temp_fragmentation"] == 0


def test_alias_spec_parsing():
    assert parse_alias_spec("{ {0}: (0, {}, may-alias), {1}: (2, {1,0}) }", "x") == [
        ((0,), 0, (), "may-alias"), ((1,), 2, (1, 0), "")]
    assert parse_alias_spec("{{}: (1, {})}", "x") == [((), 1, (), "")]
    assert parse_alias_spec("{}", "x") == []
    for bad in ("{ {0}: 0 }", "{0}: (0, {})", "{ {0}: (0, {}) junk }"):
        with pytest.raises(HloError, match="malformed"):
            parse_alias_spec(bad, "input_output_alias")


@pytest.mark.parametrize("n, text", [
    (0, "0B"), (100, "100B"), (1023, "1023B"), (1024, "1.0KiB"), (12336, "12.0KiB"),
    (2 * 1024 * 1024, "2.00MiB"), (3 * 1024 ** 3 // 2, "1.50GiB"), (-2048, "-2.0KiB")])
def test_human_readable_num_bytes(n, text):
    # tsl::strings::HumanReadableNumBytes: one decimal for KiB, two above (e.g. XLA's
    # "Total bytes used: 12336 (12.0KiB)" and hlo-opt's "parameter allocation: 2.00MiB").
    assert human_readable_num_bytes(n) == text


def test_stats_string_layout():
    m = parse_module("ENTRY e {\n p = f32[524288] parameter(0)\n ROOT n = f32[524288] negate(p)\n}")
    text = assign_buffers(m).stats_string()
    assert text.splitlines()[:2] == ["BufferAssignment stats:",
                                     "             parameter allocation:    2.00MiB"]
    assert "                 total allocation:    4.00MiB" in text
