"""WhileLoopConstantSinking ("while-loop-constant-sinking")."""

import numpy as np
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

LOOP = """
HloModule m
cond {
  cp = (s32[], f32[4], s32[]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  cn = s32[] get-tuple-element(cp), index=2
  ROOT lt = pred[] compare(ci, cn), direction=LT
}
body {
  bp = (s32[], f32[4], s32[]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bc = f32[4] get-tuple-element(bp), index=1
  bn = s32[] get-tuple-element(bp), index=2
  one = s32[] constant(1)
  ni = s32[] add(bi, one)
  twice = f32[4] add(bc, bc)
  ROOT bt = (s32[], f32[4], s32[]) tuple(ni, bc, bn)
}
ENTRY e {
  z = s32[] constant(0)
  c = f32[4] constant({1, 2, 3, 4})
  n = s32[] constant(3)
  init = (s32[], f32[4], s32[]) tuple(z, c, n)
  w = (s32[], f32[4], s32[]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""


def test_invariant_constants_are_sunk_into_body_and_condition():
    module = check_pass("while-loop-constant-sinking", LOOP + """
// CHECK:      %cond
// CHECK:      %[[N:.*]] = s32[] constant(3)
// CHECK:      ROOT %lt = pred[] compare(%ci, %[[N]]), direction=LT
// CHECK:      %body
// CHECK-DAG:  %[[C:.*]] = f32[4]{0} constant({1, 2, 3, 4})
// CHECK-DAG:  add(%[[C]], %[[C]])
// CHECK:      ROOT %bt = (s32[], f32[4]{0}, s32[]) tuple(%ni, %bc, %bn)
""")
    check_same_results(LOOP, module)


def test_broadcast_of_constant_only_when_asked():
    text = LOOP.replace("c = f32[4] constant({1, 2, 3, 4})",
                        "k = f32[] constant(2)\n  c = f32[4] broadcast(k), dimensions={}")
    text = text.replace("n = s32[] constant(3)\n", "n = s32[] parameter(0)\n")
    check_unchanged("while-loop-constant-sinking", text)
    module = check_pass("while-loop-constant-sinking", text + """
// CHECK: %body
// CHECK: f32[4]{0} broadcast(%{{.*}}), dimensions={}
""", sink_broadcast_of_constants=True)
    check_same_results(text, module, args=[np.int32(3)])
