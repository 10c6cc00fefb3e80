"""DotDecomposer ("dot_decomposer"): dots in canonical form."""

from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

MULTI_CONTRACTING = """
HloModule m
ENTRY e {
  a = f32[2,3,4,6] parameter(0)
  b = f32[4,6,5] parameter(1)
  ROOT d = f32[2,3,5] dot(a, b), lhs_contracting_dims={2,3}, rhs_contracting_dims={0,1}
}
"""


def test_two_contracting_dims_become_one():
    module = check_pass("dot_decomposer", MULTI_CONTRACTING + """
// CHECK:      %[[LT:.*]] = f32[2,3,4,6]{3,2,1,0} transpose(%a), dimensions={0,1,2,3}
// CHECK-NEXT: %[[LR:.*]] = f32[6,24]{1,0} reshape(%[[LT]])
// CHECK-NEXT: %[[RT:.*]] = f32[4,6,5]{2,1,0} transpose(%b), dimensions={0,1,2}
// CHECK-NEXT: %[[RR:.*]] = f32[24,5]{1,0} reshape(%[[RT]])
// CHECK-NEXT: %[[D:.*]] = f32[6,5]{1,0} dot(%[[LR]], %[[RR]]), lhs_contracting_dims={1},
// CHECK-SAME: rhs_contracting_dims={0}
// CHECK-NEXT: ROOT %{{.*}} = f32[2,3,5]{2,1,0} reshape(%[[D]])
""")
    check_same_results(MULTI_CONTRACTING, module)


def test_batch_dims_move_first_and_bf16_precision_is_kept():
    text = """
HloModule m
ENTRY e {
  a = bf16[3,7,2] parameter(0)
  b = bf16[2,3,5] parameter(1)
  ROOT d = bf16[7,5] dot(a, b), lhs_batch_dims={}, lhs_contracting_dims={0,2}, rhs_contracting_dims={1,0},
      operand_precision={highest,highest}
}
// CHECK:      transpose(%a), dimensions={1,0,2}
// CHECK:      transpose(%b), dimensions={1,0,2}
// CHECK:      bf16[7,5]{1,0} dot({{.*}}), lhs_contracting_dims={1}, rhs_contracting_dims={0},
// CHECK-SAME: operand_precision={highest,highest}
"""
    module = check_pass("dot_decomposer", text)
    check_same_results(text, module)


def test_batched_outer_product_gets_a_unit_contracting_dim():
    text = """
HloModule m
ENTRY e {
  a = f32[4,3] parameter(0)
  b = f32[4,5] parameter(1)
  ROOT d = f32[4,3,5] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}
}
// CHECK:      f32[4,3,1]{2,1,0} reshape(
// CHECK:      f32[4,1,5]{2,1,0} reshape(
// CHECK:      f32[4,3,5]{2,1,0} dot({{.*}}), lhs_batch_dims={0}, lhs_contracting_dims={2},
// CHECK-SAME: rhs_batch_dims={0}, rhs_contracting_dims={1}
"""
    module = check_pass("dot_decomposer", text)
    check_same_results(text, module)


def test_canonical_dots_are_left_alone():
    check_unchanged("dot_decomposer", """
HloModule m
ENTRY e {
  a = f32[2,3,4] parameter(0)
  b = f32[2,4,5] parameter(1)
  d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},
      rhs_contracting_dims={1}
  v = f32[4] parameter(2)
  w = f32[4,5] parameter(3)
  dv = f32[5] dot(v, w), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = (f32[2,3,5], f32[5]) tuple(d, dv)
}
""")
