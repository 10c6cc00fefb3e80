"""WhileLoopSimplifier ("simplify-while-loops")."""

import numpy as np
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged


def loop(init_i: int, bound: int, extra_state: str = "", extra_body: str = "", extra_root: str = "",
         extra_init: str = "", users: str = "ROOT r = f32[4] get-tuple-element(w), index=1") -> str:
    shape = "(s32[], f32[4]" + extra_state + ")"
    return f"""
HloModule m
cond {{
  cp = {shape} parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant({bound})
  ROOT lt = pred[] compare(ci, lim), direction=LT
}}
body {{
  bp = {shape} parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bv = f32[4] get-tuple-element(bp), index=1
  one = s32[] constant(1)
  ni = s32[] add(bi, one)
  nv = f32[4] multiply(bv, bv){extra_body}
  ROOT bt = {shape} tuple(ni, nv{extra_root})
}}
ENTRY e {{
  p = f32[4] parameter(0)
  z = s32[] constant({init_i}){extra_init and chr(10) + extra_init}
  init = {shape} tuple(z, p{extra_state and ", " + ", ".join(f"x{k}" for k in range(extra_state.count(",")))})
  w = {shape} while(init), condition=cond, body=body
  {users}
}}
"""


def test_zero_trip_loop_becomes_its_init():
    text = loop(10, 5)
    module = check_pass("simplify-while-loops", text + """
// CHECK:      ENTRY
// CHECK-NOT:  while
// CHECK:      ROOT %r = f32[4]{0} get-tuple-element(%{{.*}}), index=1
""")
    check_same_results(text, module)
    assert [c.name for c in module.computations] == ["e"]


def test_one_trip_loop_is_inlined():
    text = loop(0, 1)
    module = check_pass("simplify-while-loops", text + """
// CHECK:      ENTRY
// CHECK-NOT:  while
// CHECK:      multiply(
""")
    check_same_results(text, module)


def test_dead_state_element_is_removed():
    text = loop(0, 3, extra_state=", f32[4]", extra_init="  x0 = f32[4] parameter(1)",
                extra_body="\n  bx = f32[4] get-tuple-element(bp), index=2\n  nx = f32[4] add(bx, bv)",
                extra_root=", nx")
    module = check_pass("simplify-while-loops", text + """
// CHECK:      %cond.clone (cp.clone: (s32[], f32[4])) -> pred[]
// CHECK:      %body.clone (bp.clone: (s32[], f32[4])) -> (s32[], f32[4])
// CHECK-NOT:  add(%bx
// CHECK:      ENTRY
// CHECK:      while({{.*}}), condition=%cond.clone, body=%body.clone
""")
    check_same_results(text, module)


def test_constant_state_becomes_a_constant_inside():
    text = """
HloModule m
cond {
  cp = (s32[], f32[4], f32[]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}
body {
  bp = (s32[], f32[4], f32[]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bv = f32[4] get-tuple-element(bp), index=1
  bx = f32[] get-tuple-element(bp), index=2
  one = s32[] constant(1)
  ni = s32[] add(bi, one)
  bb = f32[4] broadcast(bx), dimensions={}
  nv = f32[4] multiply(bv, bb)
  c25 = f32[] constant(2.5)
  ROOT bt = (s32[], f32[4], f32[]) tuple(ni, nv, c25)
}
ENTRY e {
  p = f32[4] parameter(0)
  z = s32[] constant(0)
  x = f32[] constant(2.5)
  init = (s32[], f32[4], f32[]) tuple(z, p, x)
  w = (s32[], f32[4], f32[]) while(init), condition=cond, body=body
  ROOT r = (s32[], f32[4], f32[]) copy(w)
}
// CHECK:      %body.clone (bp.clone: (s32[], f32[4])) -> (s32[], f32[4])
// CHECK:      f32[] constant(2.5)
// CHECK:      ENTRY
// CHECK:      (s32[], f32[4]{0}) while(
"""
    module = check_pass("simplify-while-loops", text)
    check_same_results(text, module)


def test_repeated_pass_through_state_is_merged():
    text = """
HloModule m
cond {
  cp = (s32[], f32[4], f32[4], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}
body {
  bp = (s32[], f32[4], f32[4], f32[4]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bv = f32[4] get-tuple-element(bp), index=1
  b2 = f32[4] get-tuple-element(bp), index=2
  b3 = f32[4] get-tuple-element(bp), index=3
  one = s32[] constant(1)
  ni = s32[] add(bi, one)
  s = f32[4] add(b2, b3)
  nv = f32[4] add(bv, s)
  ROOT bt = (s32[], f32[4], f32[4], f32[4]) tuple(ni, nv, b2, b3)
}
ENTRY e {
  p = f32[4] parameter(0)
  x = f32[4] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[4], f32[4], f32[4]) tuple(z, p, x, x)
  w = (s32[], f32[4], f32[4], f32[4]) while(init), condition=cond, body=body
  ROOT r = (s32[], f32[4], f32[4], f32[4]) copy(w)
}
// CHECK:      ENTRY
// CHECK:      (s32[], f32[4]{0}, f32[4]{0}) while(
"""
    module = check_pass("simplify-while-loops", text)
    check_same_results(text, module)


def test_loops_that_must_stay():
    # Unknown trip count (bound from a parameter), every element used, a side effect in the condition.
    check_unchanged("simplify-while-loops", """
HloModule m
cond {
  cp = (s32[], s32[]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  cn = s32[] get-tuple-element(cp), index=1
  ROOT lt = pred[] compare(ci, cn), direction=LT
}
body {
  bp = (s32[], s32[]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bn = s32[] get-tuple-element(bp), index=1
  one = s32[] constant(1)
  ni = s32[] add(bi, one)
  ROOT bt = (s32[], s32[]) tuple(ni, bn)
}
cond2 {
  c2 = (s32[]) parameter(0)
  i2 = s32[] get-tuple-element(c2), index=0
  tok = token[] after-all()
  o = token[] outfeed(i2, tok)
  lim = s32[] constant(0)
  ROOT lt2 = pred[] compare(i2, lim), direction=LT
}
body2 {
  b2 = (s32[]) parameter(0)
  g2 = s32[] get-tuple-element(b2), index=0
  one2 = s32[] constant(1)
  n2 = s32[] add(g2, one2)
  ROOT t2 = (s32[]) tuple(n2)
}
ENTRY e {
  n = s32[] parameter(0)
  z = s32[] constant(0)
  init = (s32[], s32[]) tuple(z, n)
  w = (s32[], s32[]) while(init), condition=cond, body=body
  init2 = (s32[]) tuple(z)
  w2 = (s32[]) while(init2), condition=cond2, body=body2
  ROOT r = ((s32[], s32[]), (s32[])) tuple(w, w2)
}
""")


def test_pass_through_scalar_constant_is_propagated_into_the_loop():
    text = """
HloModule m
cond {
  cp = (s32[], s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  cn = s32[] get-tuple-element(cp), index=1
  ROOT lt = pred[] compare(ci, cn), direction=LT
}
body {
  bp = (s32[], s32[], f32[4]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bn = s32[] get-tuple-element(bp), index=1
  bv = f32[4] get-tuple-element(bp), index=2
  one = s32[] constant(1)
  ni = s32[] add(bi, one)
  nv = f32[4] sine(bv)
  ROOT bt = (s32[], s32[], f32[4]) tuple(ni, bn, nv)
}
ENTRY e {
  p = f32[4] parameter(0)
  z = s32[] constant(0)
  three = s32[] constant(3)
  init = (s32[], s32[], f32[4]) tuple(z, three, p)
  w = (s32[], s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=2
}
// CHECK:      %cond
// CHECK:      %[[C:.*]] = s32[] constant(3)
// CHECK:      ROOT %lt = pred[] compare(%ci, %[[C]]), direction=LT
"""
    module = check_pass("simplify-while-loops", text)
    check_same_results(text, module)


def test_induction_variables_are_merged_into_one_trip_counter():
    text = """
HloModule m
cond {
  cp = (s32[], s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(20)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}
body {
  bp = (s32[], s32[], f32[4]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bj = s32[] get-tuple-element(bp), index=1
  bv = f32[4] get-tuple-element(bp), index=2
  three = s32[] constant(3)
  ni = s32[] add(bi, three)
  five = s32[] constant(-5)
  nj = s32[] add(five, bj)
  fj = f32[] convert(bj)
  bj4 = f32[4] broadcast(fj), dimensions={}
  nv = f32[4] add(bv, bj4)
  ROOT bt = (s32[], s32[], f32[4]) tuple(ni, nj, nv)
}
ENTRY e {
  p = f32[4] parameter(0)
  a = s32[] constant(1)
  b = s32[] parameter(1)
  init = (s32[], s32[], f32[4]) tuple(a, b, p)
  w = (s32[], s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = (s32[], s32[], f32[4]) copy(w)
}
// CHECK:      %body.clone
// CHECK:      ROOT %{{.*}} = (s32[], s32[], f32[4]{0}, s32[]) tuple(
// CHECK:      ENTRY
// CHECK:      (s32[], s32[], f32[4]{0}, s32[]) while(
"""
    module = check_pass("simplify-while-loops", text)
    for b in (0, 7, -3):
        check_same_results(text, module, args=[np.linspace(-1, 1, 4, dtype=np.float32), np.int32(b)])
