"""conv_canonicalization's cuDNN passes one at a time (cudnn-conv-rewriter,
cudnn-fused-convolution-rewriter, gpu-conv-padding-legalization), on the patterns of XLA's
conv_rewriter_test.cc / cudnn_fused_conv_rewriter_test.cc / conv_padding_legalization_test.cc;
numbers of the rewritten modules checked against the original in the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.interpreter.evaluator import evaluate
from hlo_opt.passes import load_all_passes
from hlo_common.hlo_pass.pass_base import PASS_REGISTRY

load_all_passes()
PASSES = ("cudnn-conv-rewriter", "cudnn-fused-convolution-rewriter", "gpu-conv-padding-legalization",
          "tuple-simplifier", "dce")


def _run(text: str, **fused_options):
    module = parse_module(text)
    for name in PASSES:
        opts = fused_options if name == "cudnn-fused-convolution-rewriter" else {}
        PASS_REGISTRY[name](**opts).run(module)
    return module


def _calls(module):
    return [i for c in module.computations for i in c.instructions if i.opcode == "custom-call"]


def _same_numbers(text: str, module) -> None:
    rng = np.random.default_rng(0)
    ref = parse_module(text)
    args = [rng.standard_normal(p.shape.dims).astype(p.shape.element_type.np_dtype)
            for p in ref.entry.parameters]
    want, got = evaluate(ref, args), evaluate(module, args)
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-4, atol=1e-4)


def test_forward_and_backward_kinds():
    fwd = """
HloModule m
ENTRY e {
  x = f32[2,8,8,3] parameter(0)
  w = f32[3,3,3,4] parameter(1)
  ROOT c = f32[2,8,8,4] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"""
    m = _run(fwd)
    (call,) = _calls(m)
    assert call.attrs["custom_call_target"] == "__cudnn$convForward"
    assert str(call.shape) == "(f32[2,8,8,4]{3,2,1,0}, u8[0]{0})"
    assert call.backend_config_data["cudnn_conv_backend_config"]["conv_result_scale"] == 1
    _same_numbers(fwd, m)


def test_backward_input_from_reversed_kernel():
    text = """
HloModule m
ENTRY e {
  dy = f32[2,4,4,4] parameter(0)
  w = f32[3,3,3,4] parameter(1)
  r = f32[3,3,3,4] reverse(w), dimensions={0,1}
  ROOT c = f32[2,8,8,3] convolution(dy, r), window={size=3x3 pad=1_2x1_2 lhs_dilate=2x2}, dim_labels=b01f_01oi->b01f
}
"""
    m = _run(text)
    (call,) = _calls(m)
    assert call.attrs["custom_call_target"] == "__cudnn$convBackwardInput"
    assert call.operands[1].opcode == "parameter"  # the reverse is subsumed by the call
    assert str(call.attrs["window"]) == "{size=3x3 stride=2x2 pad=1_1x1_1}"
    assert str(call.attrs["dim_labels"]) == "b01f_01io->b01f"
    _same_numbers(text, m)


def test_backward_filter():
    text = """
HloModule m
ENTRY e {
  x = f32[2,8,8,3] parameter(0)
  dy = f32[2,8,8,4] parameter(1)
  ROOT c = f32[3,3,3,4] convolution(x, dy), window={size=8x8 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf
}
"""
    m = _run(text)
    (call,) = _calls(m)
    assert call.attrs["custom_call_target"] == "__cudnn$convBackwardFilter"
    assert str(call.attrs["window"]) == "{size=3x3 pad=1_1x1_1}"
    _same_numbers(text, m)


def test_asymmetric_padding_becomes_a_pad():
    text = """
HloModule m
ENTRY e {
  x = f32[2,8,8,3] parameter(0)
  w = f32[3,3,3,4] parameter(1)
  ROOT c = f32[2,7,7,4] convolution(x, w), window={size=3x3 pad=0_1x0_1 rhs_dilate=1x1}, dim_labels=b01f_01io->b01f
}
"""
    m = _run(text)
    (call,) = _calls(m)
    assert call.operands[0].opcode == "pad"
    assert str(call.attrs["window"]) == "{size=3x3}"
    _same_numbers(text, m)


BIAS_ACT = """
HloModule m
ENTRY e {
  x = f16[2,8,8,4] parameter(0)
  w = f16[3,3,4,4] parameter(1)
  b = f16[4] parameter(2)
  c = f16[2,8,8,4] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f%s
  bb = f16[2,8,8,4] broadcast(b), dimensions={3}
  a = f16[2,8,8,4] add(c, bb)
  zero = f16[] constant(0)
  six = f16[] constant(6)
  z = f16[2,8,8,4] broadcast(zero), dimensions={}
  s = f16[2,8,8,4] broadcast(six), dimensions={}
  ROOT r = f16[2,8,8,4] %s
}
"""


@pytest.mark.parametrize("act, mode", [("maximum(a, z)", "kRelu"), ("clamp(z, a, s)", None)])
def test_bias_and_activation(act, mode):
    text = BIAS_ACT % ("", act)
    m = _run(text)
    (call,) = _calls(m)
    assert call.attrs["custom_call_target"] == "__cudnn$convBiasActivationForward"
    assert call.operands[2].opcode == "parameter"
    cfg = call.backend_config_data["cudnn_conv_backend_config"]
    assert cfg["activation_mode"] == (mode or "kNone")  # relu6 needs runtime fusion (off in XLA)


def test_relu6_with_runtime_fusion():
    m = _run(BIAS_ACT % ("", "clamp(z, a, s)"), use_runtime_fusion=True)
    (call,) = _calls(m)
    assert call.backend_config_data["cudnn_conv_backend_config"]["activation_mode"] == "kRelu6"


def test_depthwise_is_not_fused():
    m = _run((BIAS_ACT % (", feature_group_count=4", "maximum(a, z)")).replace("f16[3,3,4,4]", "f16[3,3,1,4]"))
    (call,) = _calls(m)
    assert call.attrs["custom_call_target"] == "__cudnn$convForward"
