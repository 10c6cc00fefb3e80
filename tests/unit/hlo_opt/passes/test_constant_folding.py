"""HloConstantFolding ("constant_folding"): instructions of constants become constants."""

from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged


def test_add_of_constant_and_broadcast_constant_folds():
    text = """
HloModule m
ENTRY e {
  c = f32[2] constant({1, 2})
  three = f32[] constant(3)
  b = f32[2] broadcast(three), dimensions={}
  a = f32[2] add(c, b)
  p = f32[2] parameter(0)
  ROOT m = f32[2] multiply(a, p)
}
// CHECK:      ENTRY
// CHECK-DAG:  %[[C:.*]] = f32[2]{0} constant({4, 5})
// CHECK-DAG:  %p = f32[2]{0} parameter(0)
// CHECK:      ROOT %m = f32[2]{0} multiply(%[[C]], %p)
// CHECK-NOT:  broadcast
"""
    module = check_pass("constant_folding", text)
    check_same_results(text, module)


def test_chains_fold_in_one_run_and_types_are_kept():
    text = """
HloModule m
ENTRY e {
  c = s32[3] constant({1, -2, 7})
  n = s32[3] negate(c)
  v = f32[3] convert(n)
  r = f32[3] reverse(v), dimensions={0}
  ROOT s = bf16[3] convert(r)
}
// CHECK:      ENTRY
// CHECK-NEXT: ROOT %{{.*}} = bf16[3]{0} constant({-7, 2, -1})
"""
    module = check_pass("constant_folding", text)
    check_same_results(text, module)


def test_reduce_with_a_called_computation_and_a_tuple_result_fold():
    text = """
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=LT
}
ENTRY e {
  c = f32[2,3] constant({{1, 2, 3}, {4, 5, 6}})
  z = f32[] constant(0)
  r = f32[2] reduce(c, z), dimensions={1}, to_apply=add
  keys = f32[3] constant({3, 1, 2})
  idx = s32[3] iota(), iota_dimension=0
  s = (f32[3], s32[3]) sort(keys, idx), dimensions={0}, to_apply=lt
  ROOT t = (f32[2], (f32[3], s32[3])) tuple(r, s)
}
// CHECK:      ENTRY
// CHECK-DAG:  f32[2]{0} constant({6, 15})
// CHECK-DAG:  (f32[3]{0}, s32[3]{0}) constant(( {1, 2, 3}, {1, 2, 0} ))
// CHECK-NOT:  reduce(
// CHECK-NOT:  sort(
"""
    module = check_pass("constant_folding", text)
    check_same_results(text, module)


def test_folds_inside_loop_bodies_but_not_fusions():
    text = """
HloModule m
fused {
  fp = f32[2] parameter(0)
  fc = f32[2] constant({1, 1})
  fn = f32[2] negate(fc)
  ROOT fa = f32[2] add(fp, fn)
}
cond {
  cp = (s32[], f32[2]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  ten = s32[] constant(10)
  nine = s32[] subtract(ten, ten)
  ROOT lt = pred[] compare(ci, ten), direction=LT
}
body {
  bp = (s32[], f32[2]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bv = f32[2] get-tuple-element(bp), index=1
  one = s32[] constant(1)
  two = s32[] multiply(one, one)
  ni = s32[] add(bi, two)
  nv = f32[2] fusion(bv), kind=kLoop, calls=fused
  ROOT t = (s32[], f32[2]) tuple(ni, nv)
}
ENTRY e {
  p = f32[2] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[2]) tuple(z, p)
  w = (s32[], f32[2]) while(init), condition=cond, body=body
  ROOT r = f32[2] get-tuple-element(w), index=1
}
// CHECK:      %fused
// CHECK:      negate
// CHECK:      %body
// CHECK-NOT:  multiply
// CHECK:      add(%bi, %{{.*}})
"""
    module = check_pass("constant_folding", text)
    check_same_results(text, module)


def test_declines_broadcasts_iotas_rng_parameters_and_dead_code():
    check_unchanged("constant_folding", """
HloModule m
ENTRY e {
  c = f32[] constant(2)
  b = f32[4] broadcast(c), dimensions={}
  i = f32[4] iota(), iota_dimension=0
  both = f32[4] add(b, i)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[4] rng(lo, hi), distribution=rng_uniform
  p = f32[4] parameter(0)
  x = f32[4] multiply(b, p)
  dead = f32[] negate(c)
  ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(b, i, both, r, x)
}
""")


def test_declines_large_results_control_dependencies_and_unknown_literals():
    check_unchanged("constant_folding", """
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  c = f32[] constant(1)
  big = f32[8000,8000] broadcast(c), dimensions={}
  z = f32[] constant(0)
  r = f32[] reduce(big, z), dimensions={0,1}, to_apply=add
  k = f32[2] constant({1, 2})
  n = f32[2] negate(k), control-predecessors={r}
  u = f32[3] constant({...})
  a = f32[3] abs(u)
  ROOT t = (f32[], f32[2], f32[3]) tuple(r, n, a)
}
""")
