"""The sort emitter: a stable flip-form bitonic network per row (block per row, positions in shared
memory), the insertion-sort fallback, several operands, any comparator - on the host against the
interpreter and numpy's stable argsort, PTX linked for sm_90."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from emitter_testlib import check, fusion_of, run_on_host
from hlo_codegen.emitters import EmitterError, emit_kernel
from hlo_codegen.emitters import sort as sort_emitter
from hlo_codegen.emitters.sort import bitonic_steps
from hlo_codegen.kernel_ir import print_kernel

LT = ("lt {{ a = {t}[] parameter(0) b = {t}[] parameter(1) {extra}"
      " ROOT r = pred[] compare(a, b), direction={d} }}")


def _network_sorts(values: list[int]) -> list[int]:
    """The emitter's network on a Python list, pairs past the end skipped (padding = +inf)."""
    n, m = len(values), 1 << max(len(values) - 1, 0).bit_length()
    x = list(values)
    for h, flip in bitonic_steps(m):
        for p in range(m // 2):
            base = (p >> h) << (h + 1)
            lo = base + (p & ((1 << h) - 1))
            hi = base + (1 << (h + 1)) - 1 - (p & ((1 << h) - 1)) if flip else lo + (1 << h)
            if hi < n and x[hi] < x[lo]:
                x[lo], x[hi] = x[hi], x[lo]
    return x


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 8, 12])
def test_network_sorts_every_zero_one_sequence(n: int) -> None:
    # The 0-1 principle: a comparator network that sorts all 0/1 inputs sorts everything.
    for bits in itertools.product((0, 1), repeat=n):
        assert _network_sorts(list(bits)) == sorted(bits)


def test_single_operand_rows_with_ties_match_numpy() -> None:
    fusion = fusion_of(LT.format(t="f32", extra="", d="LT") + """
        f { x = f32[5,37] parameter(0) ROOT s = f32[5,37] sort(x), dimensions={1}, to_apply=lt }""")
    x = np.random.default_rng(0).integers(-4, 5, (5, 37)).astype(np.float32)
    kernel = emit_kernel(fusion)
    assert kernel.grid == (5, 1, 1) and kernel.block == (32, 1, 1)
    assert print_kernel(kernel).count("sync_threads") == len(bitonic_steps(64)) + 1
    (got,) = run_on_host(fusion, [x], kernel)
    np.testing.assert_array_equal(got, np.sort(x, axis=1))
    check(fusion, "sort", args=[x])


def test_key_value_sort_is_stable() -> None:
    fusion = fusion_of(LT.format(t="s32", extra="c = f32[] parameter(2) d = f32[] parameter(3)", d="GT") + """
        f { k = s32[3,100] parameter(0) v = f32[3,100] parameter(1)
            ROOT s = (s32[3,100], f32[3,100]) sort(k, v), dimensions={1}, to_apply=lt }""")
    rng = np.random.default_rng(1)
    k, v = rng.integers(0, 6, (3, 100)).astype(np.int32), rng.standard_normal((3, 100)).astype(np.float32)
    keys, vals = run_on_host(fusion, [k, v])
    perm = np.argsort(-k, axis=1, kind="stable")
    np.testing.assert_array_equal(keys, np.take_along_axis(k, perm, 1))
    np.testing.assert_array_equal(vals, np.take_along_axis(v, perm, 1))
    check(fusion, "sort", args=[k, v])


def test_sort_along_a_major_dim_with_layouts_and_iota() -> None:
    check(LT.format(t="bf16", extra="c = s32[] parameter(2) d = s32[] parameter(3)", d="LT") + """
        f { x = bf16[40,3,2]{0,2,1} parameter(0) i = s32[40,3,2] iota(), iota_dimension=0
            ROOT s = (bf16[40,3,2]{1,0,2}, s32[40,3,2]) sort(x, i), dimensions={0}, to_apply=lt }""", "sort")


def test_comparator_with_total_order_and_second_key() -> None:
    check("""cmp { a = f32[] parameter(0) b = f32[] parameter(1) c = s32[] parameter(2) d = s32[] parameter(3)
            lt = pred[] compare(a, b), direction=LT, type=TOTALORDER
            eq = pred[] compare(a, b), direction=EQ, type=TOTALORDER
            k2 = pred[] compare(c, d), direction=GT  t = pred[] and(eq, k2) ROOT r = pred[] or(lt, t) }
        f { x = f32[130] parameter(0) y = s32[130] parameter(1)
            ROOT s = (f32[130], s32[130]) sort(x, y), dimensions={0}, to_apply=cmp }""", "sort")


def test_fallback_insertion_sort(monkeypatch) -> None:
    monkeypatch.setattr(sort_emitter, "MAX_SHARED_ELEMENTS", 8)
    kernel = check(LT.format(t="s32", extra="", d="LT") + """
        f { x = s32[4,33] parameter(0) ROOT s = s32[4,33] sort(x), dimensions={1}, to_apply=lt }""", "sort")
    assert "sync_threads" not in print_kernel(kernel)


def test_in_place_sort_skips_the_copy() -> None:
    fusion = fusion_of(LT.format(t="f32", extra="", d="LT") + """
        f { x = f32[2,50] parameter(0) ROOT s = f32[2,50] sort(x), dimensions={1}, to_apply=lt }""")
    kernel = check(fusion, argument_ids=[0, 0])
    assert len(kernel.params) == 1


def test_packed_sort_is_refused() -> None:
    fusion = fusion_of(LT.format(t="s4", extra="", d="LT") + """
        f { x = s4[64]{0:E(4)} parameter(0) ROOT s = s4[64]{0:E(4)} sort(x), dimensions={0}, to_apply=lt }""")
    with pytest.raises(EmitterError, match="packed"):
        emit_kernel(fusion)
