"""GpuLayoutAssignment ("layout-assignment"): entry layouts fixed, cuBLAS operand constraints,
propagation through layout-preserving ops, transposes turned into bitcasts, copies on conflicts."""

from hlo_common.hlo.parser import parse_module
from hlo_opt.layout_checks import check_layouts
from layout_testlib import run_layout_pass
from pass_testlib import check_unchanged

CONFLICT = """
HloModule m
ENTRY e {
  p = f32[8,16]{0,1} parameter(0)
  q = f32[8,16]{1,0} parameter(1)
  a = f32[8,16] add(p, q)
  ROOT n = f32[8,16] negate(a)
}
// CHECK:      %p = f32[8,16]{0,1} parameter(0)
// CHECK:      %[[C:.*]] = f32[8,16]{1,0} copy(%p)
// CHECK:      %a = f32[8,16]{1,0} add(%[[C]], %q)
// CHECK:      ROOT %n = f32[8,16]{1,0} negate(%a)
"""


def test_a_conflicting_operand_layout_gets_a_copy():
    run_layout_pass("layout-assignment", CONFLICT)


def test_the_result_layout_flows_up_and_makes_the_transpose_a_bitcast():
    module = run_layout_pass("layout-assignment", """
HloModule m, entry_computation_layout={(f32[8,16]{1,0})->f32[16,8]{0,1}}
ENTRY e {
  p = f32[8,16] parameter(0)
  e = f32[8,16] exponential(p)
  t = f32[16,8] transpose(e), dimensions={1,0}
  ROOT n = f32[16,8] negate(t)
}
// CHECK-NOT: copy
// CHECK:     %t = f32[16,8]{0,1} transpose(%e), dimensions={1,0}
// CHECK:     ROOT %n = f32[16,8]{0,1} negate(%t)
""")
    assert module.entry_computation_layout[1].minor_to_major == (0, 1)


def test_a_batched_dot_operand_with_batch_minor_is_copied_to_a_cublas_layout():
    run_layout_pass("layout-assignment", """
HloModule m
ENTRY e {
  p = f32[4,8,16]{0,1,2} parameter(0)
  q = f32[4,16,32] parameter(1)
  ROOT d = f32[4,8,32] dot(p, q), lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={1}
}
// CHECK: %[[C:.*]] = f32[4,8,16]{2,1,0} copy(%p)
// CHECK: ROOT %d = f32[4,8,32]{2,1,0} dot(%[[C]], %q)
""")


def test_a_transposed_dot_result_takes_the_layout_that_makes_the_transpose_free():
    run_layout_pass("layout-assignment", """
HloModule m
ENTRY e {
  p = f32[4,8,16] parameter(0)
  q = f32[4,16,32] parameter(1)
  d = f32[4,8,32] dot(p, q), lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={1}
  ROOT t = f32[4,32,8] transpose(d), dimensions={0,2,1}
}
// CHECK-NOT: copy
// CHECK: %d = f32[4,8,32]{1,2,0} dot(%p, %q)
// CHECK: ROOT %t = f32[4,32,8]{2,1,0} transpose(%d)
""")


def test_int8_dots_get_contracting_dims_most_minor():
    run_layout_pass("layout-assignment", """
HloModule m
ENTRY e {
  a = s8[16,32] parameter(0)
  b = s8[32,8] parameter(1)
  ROOT d = s32[16,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
// CHECK-NOT: copy(%a)
// CHECK:     %[[C:.*]] = s8[32,8]{0,1} copy(%b)
// CHECK:     ROOT %d = s32[16,8]{1,0} dot(%a, %[[C]])
""")


def test_sort_and_fft_operands_use_the_default_layout():
    run_layout_pass("layout-assignment", """
HloModule m
less {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT c = pred[] compare(x, y), direction=LT
}
ENTRY e {
  p = f32[4,16]{0,1} parameter(0)
  s = f32[4,16] sort(p), dimensions={1}, to_apply=less
  ROOT n = f32[4,16]{0,1} negate(s)
}
// CHECK: %[[C:.*]] = f32[4,16]{1,0} copy(%p)
// CHECK: %s = f32[4,16]{1,0} sort(%[[C]])
// CHECK: %[[D:.*]] = f32[4,16]{0,1} copy(%s)
// CHECK: ROOT %n = f32[4,16]{0,1} negate(%[[D]])
""")


def test_a_large_reduction_asks_for_a_row_reduction_layout():
    run_layout_pass("layout-assignment", """
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  q = f32[8,32] parameter(0)
  b = f32[8,64,32] broadcast(q), dimensions={0,2}
  z = f32[] constant(0)
  ROOT r = f32[8,32] reduce(b, z), dimensions={1}, to_apply=add
}
// CHECK: %b = f32[8,64,32]{1,2,0} broadcast(%q), dimensions={0,2}
// CHECK: ROOT %r = f32[8,32]{1,0} reduce(%b, %z)
""")


WHILE_LOOP = """
HloModule m
cond {
  s = (s32[], f32[4,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4,8] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  t = f32[8,4] transpose(x), dimensions={1,0}
  u = f32[4,8] transpose(t), dimensions={1,0}
  y = f32[4,8] add(u, x)
  ROOT r = (s32[], f32[4,8]) tuple(j, y)
}
ENTRY e {
  p = f32[4,8]{0,1} parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[4,8]) tuple(z, p)
  w = (s32[], f32[4,8]) while(init), condition=cond, body=body
  ROOT o = f32[4,8]{1,0} get-tuple-element(w), index=1
}
"""


def test_while_loops_keep_one_layout_for_init_body_condition_and_result():
    module = run_layout_pass("layout-assignment", WHILE_LOOP + """
// CHECK:      %body
// CHECK:        %t = f32[8,4]{0,1} transpose(%x)
// CHECK:      ENTRY %e
// CHECK:        %[[X:.*]] = f32[4,8]{0,1} get-tuple-element(%init), index=1
// CHECK-NEXT:   %[[C:.*]] = f32[4,8]{1,0} copy(%[[X]])
// CHECK:        %w = (s32[], f32[4,8]{1,0}) while(
""")
    body, cond = module.computation("body"), module.computation("cond")
    loop = module.entry.root.operands[0]
    assert body.parameters[0].shape == body.root.shape == cond.parameters[0].shape == loop.shape
    assert not check_layouts(module)


def test_bitcasts_and_fusions_keep_their_layouts():
    check_unchanged("layout-assignment", """
HloModule m
fused {
  fp = f32[8,4]{0,1} parameter(0)
  ROOT fe = f32[8,4]{0,1} exponential(fp)
}
ENTRY e {
  p = f32[4,8]{1,0} parameter(0)
  b = f32[8,4]{0,1} bitcast(p)
  f = f32[8,4]{0,1} fusion(b), kind=kLoop, calls=fused
  ROOT c = f32[8,4]{0,1} bitcast(f)
}
""")


def test_a_module_already_on_default_layouts_is_unchanged():
    check_unchanged("layout-assignment", """
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[16,8] parameter(0)
  q = f32[8,4] parameter(1)
  d = f32[16,4] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  ROOT r = f32[16] reduce(d, z), dimensions={1}, to_apply=add
}
""")


def test_every_array_gets_a_layout_and_the_module_stays_consistent():
    module = run_layout_pass("layout-assignment", CONFLICT.split("// CHECK")[0])
    for instr in module.entry.instructions:
        assert instr.shape.layout is not None
    assert parse_module(CONFLICT).entry.root.shape.layout is not None


def test_a_reshape_dropping_a_size_one_dim_keeps_the_default_layout_on_its_operand():
    # testdata/fusion/gather: XLA:GPU lays the gather out {2,1,0}; AlignLayouts alone would put
    # the size-1 dim most major ({2,0,1}) and make the multiply run on a transposed view.
    run_layout_pass("layout-assignment", """
HloModule m, entry_computation_layout={(f32[64,16]{1,0}, s32[8]{0})->f32[8,16]{1,0}}
ENTRY e {
  t = f32[64,16] parameter(0)
  i = s32[8] parameter(1)
  ii = s32[8,1] reshape(i)
  g = f32[8,1,16] gather(t, ii), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0},
    index_vector_dim=1, slice_sizes={1,16}
  n = f32[8,1,16] negate(g)
  ROOT r = f32[8,16] reshape(n)
}
// CHECK: %g = f32[8,1,16]{2,1,0} gather(
// CHECK: %n = f32[8,1,16]{2,1,0} negate(%g)
""", changed=False)


def test_a_reshape_to_a_non_default_layout_still_aligns_the_size_one_dim_most_major():
    run_layout_pass("layout-assignment", """
HloModule m, entry_computation_layout={(f32[8,16]{1,0})->f32[8,16]{0,1}}
ENTRY e {
  p = f32[8,16] parameter(0)
  b = f32[8,1,16] broadcast(p), dimensions={0,2}
  n = f32[8,1,16] negate(b)
  ROOT r = f32[8,16] reshape(n)
}
// CHECK: %n = f32[8,1,16]{0,2,1} negate(%b)
""")
