"""TreeReductionRewriter ("tree-reduction-rewriter"): reductions beyond the race-free bounds (row:
16384 minor elements and 8 batch rows; column: 4096 reduced rows) become two reductions."""

import pytest

from hlo_opt.passes.tree_reduction_rewriter import split_params
from hlo_opt.reduction_utils import (
    reduction_dimensions, reduction_is_race_free,
)
from layout_testlib import run_layout_pass
from pass_testlib import check_unchanged
from reduction_cases import ADD, ARGMAX


def _reduces(module):
    return [i for i in module.entry.post_order() if i.opcode == "reduce"]


def test_a_long_row_reduction_is_split_without_padding():
    # n = 20000: k2 starts at floor(sqrt(n)) = 141 (padding 22); going down from 140, the first
    # divisor of 20000 is 125 (no padding), so [k1, k2] = [160, 125]; k2 is odd and n even, so
    # XLA swaps them: [125, 160], the inner reduce takes the 160.
    module = run_layout_pass("tree-reduction-rewriter", ADD + """
ENTRY e {
  p = f32[20000] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add
}
// CHECK-NOT: pad(
// CHECK:     %[[B:.*]] = f32[125,160]{1,0} bitcast(%p)
// CHECK:     %[[I:.*]] = f32[125]{0} reduce(%[[B]], %z), dimensions={1}, to_apply=%add
// CHECK:     ROOT %r{{.*}} = f32[] reduce(%[[I]], %z), dimensions={0}, to_apply=%add
""")
    assert all(reduction_is_race_free(reduction_dimensions(r)) for r in _reduces(module))


@pytest.mark.parametrize("n", [16411, 65537, 300007])
def test_split_sizes_cover_the_dimension_with_little_padding(n):
    from hlo_opt.reduction_utils import ReductionDimensions

    k1, k2 = split_params(n, ReductionDimensions(True, (1, 1, n)))
    assert k1 * k2 >= n and k1 * k2 - n < max(k1, k2)
    assert max(k1, k2) <= 16384


def test_a_prime_row_length_is_padded_with_the_init_value():
    module = run_layout_pass("tree-reduction-rewriter", ADD + """
ENTRY e {
  p = f32[4,16411] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add
}
// CHECK: %[[P:.*]] = f32[4,{{[0-9]+}}]{1,0} pad(%p, %z), padding=0_0x0_{{[0-9]+}}
// CHECK: bitcast(%[[P]])
""")
    pad = next(i for i in module.entry.instructions if i.opcode == "pad")
    assert pad.shape.dims[1] > 16411
    assert all(reduction_is_race_free(reduction_dimensions(r)) for r in _reduces(module))


def test_a_long_column_reduction_is_split():
    # n = 5000 rows: k2 = 70 pads 50; the first divisor below 70 is 50 (no padding), k1 = 100;
    # column reductions always swap: [50, 100], the inner reduce takes the 100.
    run_layout_pass("tree-reduction-rewriter", ADD + """
ENTRY e {
  p = f32[5000,3] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[3] reduce(p, z), dimensions={0}, to_apply=add
}
// CHECK: %[[B:.*]] = f32[50,100,3]{2,1,0} bitcast(%p)
// CHECK: %[[I:.*]] = f32[50,3]{1,0} reduce(%[[B]], %z), dimensions={1}
// CHECK: ROOT %r{{.*}} = f32[3]{0} reduce(%[[I]], %z), dimensions={0}
""")


def test_a_large_batch_of_rows_reduces_the_minor_dim_first():
    run_layout_pass("tree-reduction-rewriter", ADD + """
ENTRY e {
  p = f32[16,4,32] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(p, z), dimensions={0,2}, to_apply=add
}
// CHECK: %[[I:.*]] = f32[16,4]{1,0} reduce(%p, %z), dimensions={2}
// CHECK: ROOT %r{{.*}} = f32[4]{0} reduce(%[[I]], %z), dimensions={0}
""")


def test_variadic_reductions_split_both_outputs():
    run_layout_pass("tree-reduction-rewriter", ARGMAX + """
ENTRY e {
  v = f32[20000] parameter(0)
  i = s32[20000] iota(), iota_dimension=0
  z = f32[] constant(-inf)
  m = s32[] constant(0)
  ROOT r = (f32[], s32[]) reduce(v, i, z, m), dimensions={0}, to_apply=argmax
}
// CHECK: (f32[125]{0}, s32[125]{0}) reduce(
// CHECK: ROOT %r{{.*}} = (f32[], s32[]) reduce(
""")


def test_race_free_and_small_reductions_are_unchanged():
    check_unchanged("tree-reduction-rewriter", ADD + """
ENTRY e {
  p = f32[64,16384] parameter(0)
  z = f32[] constant(0)
  row = f32[64] reduce(p, z), dimensions={1}, to_apply=add
  q = f32[4096,8] parameter(1)
  col = f32[8] reduce(q, z), dimensions={0}, to_apply=add
  ROOT t = (f32[64], f32[8]) tuple(row, col)
}
""")
