"""SortIotaFusion ("sort-iota-fusion"): a sort with iota operands becomes a kCustom fusion that
computes the iotas (XLA's sort_iota_fusion.cc and its test), so jnp.argsort is one kernel."""

from pass_testlib import check_numerics, check_pass, check_unchanged

from hlo_common.hlo.printer import print_module

# XLA's SortIotaFusionTest.FuseIota, in our text: the key negated outside, two uses of one iota.
XLA_FUSE_IOTA = """
HloModule module
sorting_computation {
  lhs_key = s32[] parameter(0)
  rhs_key = s32[] parameter(1)
  lhs_index = s32[] parameter(2)
  rhs_index = s32[] parameter(3)
  lhs_index2 = s32[] parameter(4)
  rhs_index2 = s32[] parameter(5)
  lt_key = pred[] compare(lhs_key, rhs_key), direction=LT
  gt_key = pred[] compare(rhs_key, lhs_key), direction=LT
  eq_key = pred[] compare(lt_key, gt_key), direction=EQ
  lt_index = pred[] compare(lhs_index, rhs_index), direction=LT
  ROOT res = pred[] select(eq_key, lt_index, lt_key)
}
ENTRY main {
  p0 = s32[16384]{0} parameter(0)
  neg = s32[16384]{0} negate(p0)
  iota = s32[16384]{0} iota(), iota_dimension=0
  ROOT sort = (s32[16384]{0}, s32[16384]{0}, s32[16384]{0}) sort(neg, iota, iota), dimensions={0}, is_stable=true, to_apply=sorting_computation
}
"""

LESS = """
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
"""


def test_xla_fuse_iota():
    module = check_pass("sort-iota-fusion", XLA_FUSE_IOTA + """
// CHECK:      %fused_computation ({{.*}}: s32[16384]) -> (s32[16384], s32[16384], s32[16384]) {
// CHECK-NEXT:   %[[P:.*]] = s32[16384]{0} parameter(0)
// CHECK-NEXT:   %[[I:.*]] = s32[16384]{0} iota(), iota_dimension=0
// CHECK-NEXT:   ROOT %{{.*}} = {{.*}} sort(%[[P]], %[[I]], %[[I]]), dimensions={0}
// CHECK:      ENTRY %main
// CHECK-NOT:    iota(
// CHECK:        %neg = s32[16384]{0} negate(%p0)
// CHECK-NEXT:   ROOT %fusion = {{.*}} fusion(%neg), kind=kCustom, calls=%fused_computation
""")
    root = module.entry.root
    assert root.opcode == "fusion" and root.attrs["kind"] == "kCustom"
    check_numerics(XLA_FUSE_IOTA, module, rtol=0)


def test_argsort_rows_keep_the_iota_other_users_read():
    text = "HloModule m\n" + LESS + """
ENTRY e {
  x = f32[8,100] parameter(0)
  i = s32[8,100] iota(), iota_dimension=1
  s = (f32[8,100], s32[8,100]) sort(x, i), dimensions={1}, to_apply=less
  g = s32[8,100] get-tuple-element(s), index=1
  ROOT d = s32[8,100] subtract(g, i)
}
// CHECK:     %fused_computation
// CHECK:       iota(), iota_dimension=1
// CHECK:     ENTRY %e
// CHECK:       %i = s32[8,100]{1,0} iota(), iota_dimension=1
// CHECK:       %fusion = {{.*}} fusion(%x), kind=kCustom, calls=%fused_computation
// CHECK:       ROOT %d = s32[8,100]{1,0} subtract(%g, %i)
"""
    check_numerics(text, check_pass("sort-iota-fusion", text), rtol=0)


def test_sort_without_iota_operands_is_left_alone():
    check_unchanged("sort-iota-fusion", "HloModule m\n" + LESS + """
ENTRY e {
  x = f32[8,100] parameter(0)
  y = s32[8,100] parameter(1)
  ROOT s = (f32[8,100], s32[8,100]) sort(x, y), dimensions={1}, to_apply=less
}
""")


def test_broadcast_of_a_small_iota_is_not_an_iota_operand():
    # jax's text before algsimp turns broadcast(iota) into an iota: not fused by this pass
    check_unchanged("sort-iota-fusion", "HloModule m\n" + LESS + """
ENTRY e {
  x = f32[8,100] parameter(0)
  i = s32[100] iota(), iota_dimension=0
  b = s32[8,100] broadcast(i), dimensions={1}
  ROOT s = (f32[8,100], s32[8,100]) sort(x, b), dimensions={1}, to_apply=less
}
""")


def test_sort_already_in_a_fusion_body_is_left_alone_and_a_second_run_changes_nothing():
    module = check_pass("sort-iota-fusion", XLA_FUSE_IOTA)
    check_unchanged("sort-iota-fusion", print_module(module))


def test_gpu_pipeline_makes_argsort_one_sort_kernel():
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo_pass.pipeline import RunOptions
    from hlo_opt.pipelines import build_gpu_pipeline

    text = "HloModule m\n" + LESS + """
ENTRY e {
  x = f32[64,512] parameter(0)
  i = s32[512] iota(), iota_dimension=0
  b = s32[64,512] broadcast(i), dimensions={1}
  s = (f32[64,512], s32[64,512]) sort(x, b), dimensions={1}, is_stable=true, to_apply=less
  ROOT g = s32[64,512] get-tuple-element(s), index=1
}
"""
    module = parse_module(text)
    build_gpu_pipeline().run_with(module, RunOptions())
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert [f.attrs["kind"] for f in fusions] == ["kCustom"]
    body = fusions[0].fused_computation()
    assert body.root.opcode == "sort" and body.root.operands[1].opcode == "iota"
    check_numerics(text, module, rtol=0)
