"""ReductionLayoutNormalizer ("reduction-layout-normalizer"): reduce inputs in physical order."""

from hlo_opt.layout_util import has_default_layout
from layout_testlib import run_layout_pass
from pass_testlib import check_unchanged
from reduction_cases import ADD, ARGMAX


def test_a_column_major_input_is_read_in_physical_order():
    module = run_layout_pass("reduction-layout-normalizer", ADD + """
ENTRY e {
  p = f32[16,32]{0,1} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[16]{0} reduce(p, z), dimensions={1}, to_apply=add
}
// CHECK: %[[B:.*]] = f32[32,16]{1,0} bitcast(%p)
// CHECK: ROOT %{{.*}} = f32[16]{0} reduce(%[[B]], %z), dimensions={0}, to_apply=%add
""")
    reduce = module.entry.root
    assert has_default_layout(reduce.operands[0].shape)


def test_the_result_layout_follows_the_old_result():
    run_layout_pass("reduction-layout-normalizer", ADD + """
ENTRY e {
  p = f32[4,6,8]{1,2,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4,6]{1,0} reduce(p, z), dimensions={2}, to_apply=add
}
// CHECK: %[[B:.*]] = f32[4,8,6]{2,1,0} bitcast(%p)
// CHECK: %[[R:.*]] = f32[4,6]{1,0} reduce(%[[B]], %z), dimensions={1}
""")


def test_variadic_inputs_are_copied_to_the_first_inputs_layout():
    module = run_layout_pass("reduction-layout-normalizer", ARGMAX + """
ENTRY e {
  v = f32[4,32]{0,1} parameter(0)
  i = s32[4,32]{1,0} iota(), iota_dimension=1
  z = f32[] constant(-inf)
  m = s32[] constant(0)
  ROOT r = (f32[4], s32[4]) reduce(v, i, z, m), dimensions={1}, to_apply=argmax
}
// CHECK: %[[C:.*]] = s32[4,32]{0,1} copy(%i)
// CHECK: %[[I:.*]] = s32[32,4]{1,0} bitcast(%[[C]])
// CHECK: (f32[4]{0}, s32[4]{0}) reduce(%{{.*}}, %[[I]], %z, %m), dimensions={0}
""")
    (reduce,) = [i for i in module.entry.instructions if i.opcode == "reduce"]
    assert all(has_default_layout(x.shape) for x in reduce.operands)


def test_default_layout_inputs_are_unchanged():
    check_unchanged("reduction-layout-normalizer", ADD + """
ENTRY e {
  p = f32[16,32] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[32] reduce(p, z), dimensions={0}, to_apply=add
}
""")
