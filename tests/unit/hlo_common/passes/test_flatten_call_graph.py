"""FlattenCallGraph ("flatten-call-graph"): one control-flow caller per computation."""

from hlo_common.hlo.ir import HloModule
from pass_testlib import check_numerics, check_pass, check_unchanged

LOOP = """
cond {
  cp = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}
body {
  bp = (s32[], f32[4]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bv = f32[4] get-tuple-element(bp), index=1
  one = s32[] constant(1)
  ni = s32[] add(bi, one)
  nv = f32[4] add(bv, bv)
  ROOT bt = (s32[], f32[4]) tuple(ni, nv)
}
"""

TWO_WHILES = "HloModule m\n" + LOOP + """
ENTRY e {
  p = f32[4] parameter(0)
  z = s32[] constant(0)
  i1 = (s32[], f32[4]) tuple(z, p)
  w1 = (s32[], f32[4]) while(i1), condition=cond, body=body
  g1 = f32[4] get-tuple-element(w1), index=1
  i2 = (s32[], f32[4]) tuple(z, g1)
  w2 = (s32[], f32[4]) while(i2), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w2), index=1
}
// CHECK:      %cond (
// CHECK:      %cond.clone (
// CHECK:        %ci.clone = s32[] get-tuple-element(%cp.clone), index=0
// CHECK:      %body (
// CHECK:      %body.clone (
// CHECK:      ENTRY %e
// CHECK:        %w1 = {{.*}} while(%i1), condition=%cond, body=%body
// CHECK:        %w2 = {{.*}} while(%i2), condition=%cond.clone, body=%body.clone
"""


def callers_of(module: HloModule) -> dict[str, int]:
    counts = {c.name: 0 for c in module.computations}
    for comp in module.computations:
        for instr in comp.instructions:
            for callee in instr.called_computations():
                counts[callee.name] += 1
    return counts


def test_two_whiles_sharing_condition_and_body_get_their_own_copies():
    module = check_pass("flatten-call-graph", TWO_WHILES)
    assert all(n == 1 for name, n in callers_of(module).items() if name != "e")
    check_numerics(TWO_WHILES, module)


def test_callees_of_a_cloned_computation_are_cloned_too():
    module = check_pass("flatten-call-graph", "HloModule m\n" + LOOP + """
outer {
  op = f32[4] parameter(0)
  oz = s32[] constant(0)
  oi = (s32[], f32[4]) tuple(oz, op)
  ow = (s32[], f32[4]) while(oi), condition=cond, body=body
  ROOT og = f32[4] get-tuple-element(ow), index=1
}
ENTRY e {
  p = f32[4] parameter(0)
  c1 = f32[4] call(p), to_apply=outer
  ROOT c2 = f32[4] call(c1), to_apply=outer
}
// CHECK:      %outer.clone (
// CHECK:        %ow.clone = {{.*}} while(%oi.clone), condition=%cond.clone, body=%body.clone
// CHECK:      ENTRY %e
// CHECK:        %c1 = f32[4]{0} call(%p), to_apply=%outer
// CHECK-NEXT:   ROOT %c2 = f32[4]{0} call(%c1), to_apply=%outer.clone
""")
    assert all(n == 1 for name, n in callers_of(module).items() if name != "e")


def test_a_computation_also_called_from_an_embedded_context_keeps_the_original_there():
    check_pass("flatten-call-graph", """
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  r = f32[] reduce(p, z), dimensions={0}, to_apply=add
  ROOT c = f32[] call(r, z), to_apply=add
}
// CHECK:      %add.clone (
// CHECK:      ENTRY %e
// CHECK:        %r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add
// CHECK-NEXT:   ROOT %c = f32[] call(%r, %z), to_apply=%add.clone
""")


def test_shared_reducers_are_not_split():
    check_unchanged("flatten-call-graph", """
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  r1 = f32[] reduce(p, z), dimensions={0}, to_apply=add
  r2 = f32[] reduce(p, r1), dimensions={0}, to_apply=add
  ROOT c = f32[] add(r2, z)
}
""")
