"""ReshapeMover ("reshape-mover"): reshapes/transposes sink below elementwise ops."""

from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged


def test_equivalent_reshapes_sink_below_add():
    text = """
HloModule m
ENTRY e {
  x = f32[2,4] parameter(0)
  y = f32[2,4] parameter(1)
  a = f32[8] reshape(x)
  b = f32[8] reshape(y)
  ROOT s = f32[8] add(a, b)
}
// CHECK:      %[[ADD:.*]] = f32[2,4]{1,0} add(%x, %y)
// CHECK-NEXT: ROOT %{{.*}} = f32[8]{0} reshape(%[[ADD]])
"""
    module = check_pass("reshape-mover", text)
    check_same_results(text, module)


def test_transpose_with_constant_and_scalar_broadcast_operands():
    text = """
HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  t = f32[3,2] transpose(x), dimensions={1,0}
  c = f32[3,2] constant({{1, 2}, {3, 4}, {5, 6}})
  k = f32[] constant(0.5)
  b = f32[3,2] broadcast(k), dimensions={}
  m = f32[3,2] multiply(t, c)
  p = pred[3,2] parameter(1)
  ROOT s = f32[3,2] select(p, m, b)
}
// CHECK:      %[[XT:.*]] = f32[2,3]{1,0} transpose(%t), dimensions={1,0}
// CHECK:      %[[CT:.*]] = f32[2,3]{1,0} transpose(%c), dimensions={1,0}
// CHECK:      %[[M:.*]] = f32[2,3]{1,0} multiply(%[[XT]], %[[CT]])
// CHECK:      %[[MT:.*]] = f32[3,2]{1,0} transpose(%[[M]]), dimensions={1,0}
// CHECK:      ROOT %s = f32[3,2]{1,0} select(%p, %[[MT]], %b)
"""
    module = check_pass("reshape-mover", text)
    check_same_results(text, module)


def test_broadcast_keeps_order_under_the_inverse_transpose():
    text = """
HloModule m
ENTRY e {
  x = f32[4,2,3] parameter(0)
  t = f32[2,3,4] transpose(x), dimensions={1,2,0}
  v = f32[2,3] parameter(1)
  b = f32[2,3,4] broadcast(v), dimensions={0,1}
  ROOT s = f32[2,3,4] subtract(t, b)
}
// CHECK:      %[[XT:.*]] = f32[4,2,3]{2,1,0} transpose(%t), dimensions={2,0,1}
// CHECK:      %[[BT:.*]] = f32[4,2,3]{2,1,0} transpose(%b), dimensions={2,0,1}
// CHECK:      %[[S:.*]] = f32[4,2,3]{2,1,0} subtract(%[[XT]], %[[BT]])
// CHECK-NEXT: ROOT %{{.*}} = f32[2,3,4]{2,1,0} transpose(%[[S]]), dimensions={1,2,0}
"""
    module = check_pass("reshape-mover", text)
    check_same_results(text, module)


def test_declines_mismatched_rearranges_shared_reshapes_and_non_elementwise_users():
    check_unchanged("reshape-mover", """
HloModule m
ENTRY e {
  x = f32[2,4] parameter(0)
  y = f32[4,2] parameter(1)
  a = f32[8] reshape(x)
  b = f32[8] reshape(y)
  mismatched = f32[8] add(a, b)
  z = f32[8] parameter(2)
  shared = f32[8] multiply(a, z)
  r = f32[8] reverse(a), dimensions={0}
  v = f32[2] parameter(3)
  bb = f32[8] broadcast(f32[] constant(1)), dimensions={}
  ROOT t = (f32[8], f32[8], f32[8]) tuple(mismatched, shared, r)
}
""")


RESHAPE_OF_VECTOR_BROADCAST = """
HloModule m
ENTRY e {
  x = f32[2,3,4] parameter(0)
  r = f32[6,4] reshape(x)
  v = f32[4] parameter(1)
  b = f32[6,4] broadcast(v), dimensions={1}
  ROOT a = f32[6,4] add(r, b)
}
"""


def test_vector_broadcast_moves_only_when_cheap_1d_reshapes_are_allowed():
    check_unchanged("reshape-mover", RESHAPE_OF_VECTOR_BROADCAST)
    module = check_pass("reshape-mover", RESHAPE_OF_VECTOR_BROADCAST + """
// CHECK:      %[[BR:.*]] = f32[2,3,4]{2,1,0} reshape(%b)
// CHECK-NEXT: %[[A:.*]] = f32[2,3,4]{2,1,0} add(%x, %[[BR]])
// CHECK-NEXT: ROOT %{{.*}} = f32[6,4]{1,0} reshape(%[[A]])
""", reshape_of_1d_broadcast_is_cheap=True)
    check_same_results(RESHAPE_OF_VECTOR_BROADCAST, module)


def test_common_factors_and_unmodified_dimensions():
    from hlo_opt.passes.reshape_mover import common_factors, reshape_leaves_dimensions_unmodified

    assert common_factors((2, 3, 4), (6, 4)) == [(0, 0), (2, 1), (3, 2)]
    assert reshape_leaves_dimensions_unmodified((6, 4), (2, 3, 4), [1]) == [2]
    assert reshape_leaves_dimensions_unmodified((6, 4), (2, 3, 4), [0]) is None
