"""BatchNormExpander ("batchnorm_expander"): batch norms become arithmetic and reductions."""

import numpy as np
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged, random_arguments

from hlo_common.hlo.parser import parse_module

TRAINING = """
HloModule m
ENTRY e {
  x = f32[2,3,4,5] parameter(0)
  scale = f32[3] parameter(1)
  offset = f32[3] parameter(2)
  ROOT bn = (f32[2,3,4,5], f32[3], f32[3]) batch-norm-training(x, scale, offset), epsilon=0.001,
      feature_index=1
}
"""


def test_training_expands_to_reductions_over_non_feature_dims():
    module = check_pass("batchnorm_expander", TRAINING + """
// CHECK:      %scalar_add_computation
// CHECK:      ENTRY
// CHECK-NOT:  batch-norm
// CHECK-DAG:  f32[3]{0} reduce(%x, %{{.*}}), dimensions={0,2,3}, to_apply=%scalar_add_computation
// CHECK-DAG:  get-dimension-size(%x), dimensions={0}
// CHECK-DAG:  rsqrt(
// CHECK:      ROOT %{{.*}} = (f32[2,3,4,5]{3,2,1,0}, f32[3]{0}, f32[3]{0}) tuple(
""")
    check_same_results(TRAINING, module)


def test_training_result_matches_numpy():
    module = check_pass("batchnorm_expander", TRAINING)
    from hlo_common.interpreter import evaluate

    x, scale, offset = random_arguments(parse_module(TRAINING), seed=4)
    out, mean, var = evaluate(module, [x, scale, offset])
    want_mean = x.mean(axis=(0, 2, 3))
    want_var = x.var(axis=(0, 2, 3))
    np.testing.assert_allclose(mean, want_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, want_var, rtol=1e-4, atol=1e-5)
    norm = (x - want_mean[None, :, None, None]) / np.sqrt(want_var[None, :, None, None] + 0.001)
    np.testing.assert_allclose(out, norm * scale[None, :, None, None] + offset[None, :, None, None],
                               rtol=1e-4, atol=1e-4)


def test_inference_and_grad_in_bf16_and_f32():
    text = """
HloModule m
ENTRY e {
  x = bf16[4,6] parameter(0)
  scale = bf16[6] parameter(1)
  offset = bf16[6] parameter(2)
  mean = bf16[6] parameter(3)
  v = bf16[6] parameter(4)
  vp = bf16[6] multiply(v, v)
  inf = bf16[4,6] batch-norm-inference(x, scale, offset, mean, vp), epsilon=0.01, feature_index=1
  xf = f32[3,2,6] parameter(5)
  sf = f32[2] parameter(6)
  mf = f32[2] parameter(7)
  vf = f32[2] parameter(8)
  vfp = f32[2] multiply(vf, vf)
  dy = f32[3,2,6] parameter(9)
  grad = (f32[3,2,6], f32[2], f32[2]) batch-norm-grad(xf, sf, mf, vfp, dy), epsilon=0.1, feature_index=1
  ROOT t = (bf16[4,6], (f32[3,2,6], f32[2], f32[2])) tuple(inf, grad)
}
// CHECK-NOT: batch-norm
"""
    module = check_pass("batchnorm_expander", text)
    check_same_results(text, module, seed=1)


def test_disabled_kinds_and_other_ops_stay():
    check_unchanged("batchnorm_expander", TRAINING, rewrite_training_op=False)
    check_unchanged("batchnorm_expander", """
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x)
}
""")
