"""TransposeFolding ("transpose-folding"): transposes folded into dot/convolution dimension numbers."""

from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged


def test_lhs_transpose_folds_into_contracting_dims():
    text = """
HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  y = f32[2,4] parameter(1)
  t = f32[3,2] transpose(x), dimensions={1,0}
  ROOT d = f32[3,4] dot(t, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
// CHECK:      ROOT %{{.*}} = f32[3,4]{1,0} dot(%x, %y), lhs_contracting_dims={0}, rhs_contracting_dims={0}
// CHECK-NOT:  transpose
"""
    module = check_pass("transpose-folding", text)
    check_same_results(text, module)


def test_batched_rhs_transpose_folds_and_precision_is_kept():
    text = """
HloModule m
ENTRY e {
  x = f32[5,2,3] parameter(0)
  y = f32[5,4,3] parameter(1)
  t = f32[5,3,4] transpose(y), dimensions={0,2,1}
  ROOT d = f32[5,2,4] dot(x, t), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},
      rhs_contracting_dims={1}, operand_precision={highest,highest}
}
// CHECK:      ROOT %{{.*}} = f32[5,2,4]{2,1,0} dot(%x, %y), lhs_batch_dims={0}, lhs_contracting_dims={2},
// CHECK-SAME: rhs_batch_dims={0}, rhs_contracting_dims={2}, operand_precision={highest,highest}
"""
    module = check_pass("transpose-folding", text)
    check_same_results(text, module)


def test_convolution_input_and_kernel_transposes_fold():
    text = """
HloModule m
ENTRY e {
  x = f32[1,5,5,2] parameter(0)
  k = f32[3,3,2,4] parameter(1)
  xt = f32[1,2,5,5] transpose(x), dimensions={0,3,1,2}
  kt = f32[4,2,3,3] transpose(k), dimensions={3,2,0,1}
  ROOT c = f32[1,4,3,3] convolution(xt, kt), window={size=3x3}, dim_labels=bf01_oi01->bf01
}
// CHECK:      ROOT %{{.*}} = f32[1,4,3,3]{3,2,1,0} convolution(%x, %k), window={size=3x3},
// CHECK-SAME: dim_labels=b01f_01io->bf01
"""
    module = check_pass("transpose-folding", text)
    check_same_results(text, module)


def test_declines_reordered_non_contracting_dims_vectors_and_identity():
    check_unchanged("transpose-folding", """
HloModule m
ENTRY e {
  x = f32[2,3,4] parameter(0)
  y = f32[4,5] parameter(1)
  t = f32[3,2,4] transpose(x), dimensions={1,0,2}
  d = f32[3,2,5] dot(t, y), lhs_contracting_dims={2}, rhs_contracting_dims={0}
  v = f32[4] parameter(2)
  yt = f32[5,4] transpose(y), dimensions={1,0}
  dv = f32[5] dot(yt, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  i = f32[4,5] transpose(y), dimensions={0,1}
  di = f32[2,3,5] dot(x, i), lhs_contracting_dims={2}, rhs_contracting_dims={0}
  ROOT r = (f32[3,2,5], f32[5], f32[2,3,5]) tuple(d, dv, di)
}
""")
