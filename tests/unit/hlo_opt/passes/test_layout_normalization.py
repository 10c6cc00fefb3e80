"""LayoutNormalization ("layout_normalization"): ops on non-default layouts become the same ops on
default-layout shapes between bitcasts; layout-changing copies become transposes."""

import numpy as np

from hlo_opt.layout_util import has_default_layout
from layout_testlib import run_layout_pass
from pass_testlib import check_unchanged


def _non_bitcast_ops_on_default_layouts(module, allowed=("parameter",)) -> bool:
    return all(has_default_layout(i.shape) for i in module.entry.instructions
               if i.shape.is_array and i.opcode != "bitcast" and i.opcode not in allowed)


def test_a_layout_changing_copy_becomes_a_transpose():
    module = run_layout_pass("layout_normalization", """
HloModule m
ENTRY e {
  p = f32[8,16]{0,1} parameter(0)
  ROOT c = f32[8,16]{1,0} copy(p)
}
// CHECK: %[[B:.*]] = f32[16,8]{1,0} bitcast(%p)
// CHECK: ROOT %{{.*}} = f32[8,16]{1,0} transpose(%[[B]]), dimensions={1,0}
""")
    assert _non_bitcast_ops_on_default_layouts(module)


def test_elementwise_chains_run_on_the_normalized_shape():
    module = run_layout_pass("layout_normalization", """
HloModule m
ENTRY e {
  p = f32[4,8]{0,1} parameter(0)
  q = f32[4,8]{0,1} parameter(1)
  e = f32[4,8]{0,1} exponential(p)
  c = pred[4,8]{0,1} compare(e, q), direction=GT
  ROOT s = f32[4,8]{0,1} select(c, e, q)
}
// CHECK-DAG: %[[P:.*]] = f32[8,4]{1,0} bitcast(%p)
// CHECK-DAG: %[[Q:.*]] = f32[8,4]{1,0} bitcast(%q)
// CHECK:     %[[E:.*]] = f32[8,4]{1,0} exponential(%[[P]])
// CHECK:     %[[C:.*]] = pred[8,4]{1,0} compare(%[[E]], %[[Q]]), direction=GT
// CHECK:     %[[S:.*]] = f32[8,4]{1,0} select(%[[C]], %[[E]], %[[Q]])
// CHECK:     ROOT %{{.*}} = f32[4,8]{0,1} bitcast(%[[S]])
""")
    assert _non_bitcast_ops_on_default_layouts(module)


def test_a_transpose_that_is_a_bitcast_becomes_one():
    run_layout_pass("layout_normalization", """
HloModule m
ENTRY e {
  p = f32[8,16]{1,0} parameter(0)
  ROOT t = f32[16,8]{0,1} transpose(p), dimensions={1,0}
}
// CHECK-NOT: transpose
// CHECK:     ROOT %{{.*}} = f32[16,8]{0,1} bitcast(%p)
""")


def test_attributes_follow_the_physical_order():
    module = run_layout_pass("layout_normalization", """
HloModule m
ENTRY e {
  p = f32[4,6,8]{0,1,2} parameter(0)
  s = f32[4,6,5]{0,1,2} slice(p), slice={[0:4],[0:6],[1:6]}
  one = f32[] constant(1)
  pd = f32[4,6,8]{0,1,2} pad(s, one), padding=0_0x0_0x1_2
  r = f32[4,6,8]{0,1,2} reverse(pd), dimensions={0,2}
  i = f32[4,6,8]{0,1,2} iota(), iota_dimension=1
  a = f32[4,6,8]{0,1,2} add(r, i)
  c = f32[8,6,8]{0,1,2} concatenate(a, p), dimensions={0}
  q = f32[6]{0} parameter(1)
  b = f32[8,6,8]{0,1,2} broadcast(q), dimensions={1}
  ROOT m = f32[8,6,8]{0,1,2} multiply(c, b)
}
// CHECK: slice({{.*}}), slice={[1:6], [0:6], [0:4]}
// CHECK: pad({{.*}}), padding=1_2x0_0x0_0
// CHECK: reverse({{.*}}), dimensions={0,2}
// CHECK: iota(), iota_dimension=1
// CHECK: concatenate({{.*}}), dimensions={2}
// CHECK: broadcast(%q), dimensions={1}
""")
    assert _non_bitcast_ops_on_default_layouts(module)


def test_windows_and_dynamic_slices_are_permuted():
    module = run_layout_pass("layout_normalization", """
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[6,10]{0,1} parameter(0)
  z = f32[] constant(0)
  w = f32[6,8]{0,1} reduce-window(p, z), window={size=1x3}, to_apply=add
  i = s32[] parameter(1)
  j = s32[] constant(2)
  d = f32[4,8]{0,1} dynamic-slice(w, i, j), dynamic_slice_sizes={4,8}
  u = f32[2,3]{0,1} parameter(2)
  ROOT x = f32[4,8]{0,1} dynamic-update-slice(d, u, j, i)
}
// CHECK: reduce-window({{.*}}), window={size=3x1}
// CHECK: %[[D:.*]] = f32[8,4]{1,0} dynamic-slice({{.*}}, %j, %i), dynamic_slice_sizes={8,4}
// CHECK: dynamic-update-slice(%[[D]], {{.*}}, %i, %j)
""")
    assert _non_bitcast_ops_on_default_layouts(module)


def test_constants_are_relaid_out():
    module = run_layout_pass("layout_normalization", """
HloModule m
ENTRY e {
  c = f32[2,3]{0,1} constant({{1, 2, 3}, {4, 5, 6}})
  p = f32[2,3]{0,1} parameter(0)
  ROOT a = f32[2,3]{0,1} add(c, p)
}
// CHECK: %c = f32[3,2]{1,0} constant({ { 1, 4 }, { 2, 5 }, { 3, 6 } })
""")
    assert np.array_equal(module.entry.instruction("c").literal, [[1, 4], [2, 5], [3, 6]])


def test_ops_without_a_handler_are_wrapped_in_bitcasts():
    run_layout_pass("layout_normalization", """
HloModule m
ENTRY e {
  p = f32[16,8]{0,1} parameter(0)
  q = f32[8,4]{1,0} parameter(1)
  d = f32[16,4]{0,1} dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT n = f32[16,4]{0,1} negate(d)
}
// CHECK: %[[P:.*]] = f32[16,8]{0,1} bitcast(%{{.*}})
// CHECK: %d = f32[16,4]{0,1} dot(%[[P]], %q)
// CHECK: %[[B:.*]] = f32[4,16]{1,0} bitcast(%d)
// CHECK: %[[N:.*]] = f32[4,16]{1,0} negate(%[[B]])
// CHECK: ROOT %{{.*}} = f32[16,4]{0,1} bitcast(%[[N]])
""")


def test_a_scheduled_module_keeps_operands_before_users():
    run_layout_pass("layout_normalization", """
HloModule m, is_scheduled=true
ENTRY e {
  p = f32[4,8]{0,1} parameter(0)
  c = f32[4,8]{0,1} custom-call(p), custom_call_target="foo"
  ROOT n = f32[4,8]{1,0} copy(c)
}
""", numerics=False)


def test_default_layouts_are_unchanged():
    check_unchanged("layout_normalization", """
HloModule m
ENTRY e {
  p = f32[4,8] parameter(0)
  t = f32[8,4] transpose(p), dimensions={1,0}
  ROOT c = f32[8,4] copy(t)
}
""")
