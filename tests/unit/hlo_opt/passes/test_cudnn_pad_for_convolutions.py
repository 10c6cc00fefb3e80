"""cudnn_pad_for_convolutions and the int8 forms of cudnn-fused-convolution-rewriter, on the
patterns of XLA's cudnn_pad_for_convolutions_test.cc and cudnn_fused_conv_rewriter_test.cc: the
shapes each rule picks (and declines), with the rewritten module's numbers checked against the
original in the interpreter. Integer convolutions cuDNN cannot run become convolutions of ours
again, named once in the notes (the `hlo_notes` logger, hlo-opt --verbose)."""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import pytest

from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo_pass.pass_base import PASS_REGISTRY
from hlo_common.interpreter.evaluator import evaluate
from hlo_opt.passes import load_all_passes

load_all_passes()
PASSES = ("cudnn-conv-rewriter", "cudnn-fused-convolution-rewriter", "gpu-conv-padding-legalization",
          "cudnn_pad_for_convolutions", "tuple-simplifier", "algsimp", "dce")


def _run(text: str, device: DeviceDescription | None = None):
    module = parse_module(text)
    for name in PASSES:
        kwargs = {"device": device} if name == "cudnn_pad_for_convolutions" and device else {}
        PASS_REGISTRY[name](**kwargs).run(module)
    return module


def _device(major: int, minor: int) -> DeviceDescription:
    return replace(H100, compute_capability_major=major, compute_capability_minor=minor)


def _calls(module):
    return [i for c in module.computations for i in c.instructions if i.opcode == "custom-call"]


def _dims(instr) -> list[list[int]]:
    return [list(op.shape.dims) for op in instr.operands] + [list(instr.shape.tuple_shapes[0].dims)]


def _args(module, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for p in module.entry.parameters:
        t = p.shape.element_type
        dims = p.shape.dims
        values = rng.integers(-20, 21, dims) if t.is_integer else rng.standard_normal(dims)
        out.append(values.astype(t.np_dtype))
    return out


def _same_numbers(text: str, module, atol=1e-2) -> None:
    ref = parse_module(text)
    args = _args(ref)
    want, got = evaluate(ref, args), evaluate(module, args)
    np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), rtol=1e-2, atol=atol)


def _conv(t: str, c_in: int, c_out: int, result: str | None = None, groups: int = 1) -> str:
    result = result or t
    group = f", feature_group_count={groups}" if groups > 1 else ""
    return f"""
HloModule m
ENTRY e {{
  x = {t}[2,6,6,{c_in}] parameter(0)
  w = {t}[3,3,{c_in // groups},{c_out}] parameter(1)
  ROOT c = {result}[2,6,6,{c_out}] convolution(x, w), window={{size=3x3 pad=1_1x1_1}},
    dim_labels=b01f_01io->b01f{group}
}}
"""


def test_f16_features_padded_to_8_and_sliced_back():
    text = _conv("f16", 7, 14)
    m = _run(text)
    (call,) = _calls(m)
    assert _dims(call) == [[2, 6, 6, 8], [3, 3, 8, 16], [2, 6, 6, 16]]
    assert m.entry.root.opcode == "slice" and list(m.entry.root.shape.dims) == [2, 6, 6, 14]
    _same_numbers(text, m)


def test_f16_three_input_features_become_four():
    for c_out, want in ((32, 4), (64, 4), (16, 3)):  # 16 outputs: 3 -> 8 would be 2.7x: declined
        (call,) = _calls(_run(_conv("f16", 3, c_out)))
        assert _dims(call)[0][-1] == want, c_out


@pytest.mark.parametrize("t, c_in, c_out, groups, why", [
    ("f16", 6, 12, 1, "the filter would grow 1.78x > 1.35x"),
    ("f16", 1, 8, 1, "the input would grow 8x"),
    ("bf16", 7, 14, 1, "XLA pads only f16"),
    ("f32", 7, 14, 1, "XLA pads only f16"),
    ("f16", 6, 12, 2, "grouped convolutions are never padded"),
])
def test_declined(t, c_in, c_out, groups, why):
    (call,) = _calls(_run(_conv(t, c_in, c_out, groups=groups)))
    assert _dims(call)[0][-1] == c_in and _dims(call)[-1][-1] == c_out, why


def test_nothing_before_volta():
    v100, p100 = _device(7, 0), _device(6, 0)
    assert _dims(_calls(_run(_conv("f16", 7, 14), v100))[0])[0][-1] == 8
    assert _dims(_calls(_run(_conv("f16", 7, 14), p100))[0])[0][-1] == 7


def _s8_conv(c_in: int, c_out: int, epilogue: str = "", bias: bool = False) -> str:
    b = f"  b = f32[{c_out}] parameter(2)\n" if bias else ""
    return f"""
HloModule m
ENTRY e {{
  x = s8[2,6,6,{c_in}] parameter(0)
  w = s8[3,3,{c_in},{c_out}] parameter(1)
{b}  c = f32[2,6,6,{c_out}] convolution(x, w), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
{epilogue}}}
"""


S8_CLAMP = """  lo = f32[] constant(-128)
  hi = f32[] constant(127)
  blo = f32[2,6,6,{n}] broadcast(lo), dimensions={{}}
  bhi = f32[2,6,6,{n}] broadcast(hi), dimensions={{}}
  cl = f32[2,6,6,{n}] clamp(blo, {v}, bhi)
  ROOT r = s8[2,6,6,{n}] convert(cl)
"""


def test_int8_s8_result_padded_to_32_or_4():
    for c_in, c_out, want in ((24, 24, 32), (6, 12, 8), (32, 64, 32)):
        text = _s8_conv(c_in, c_out, S8_CLAMP.format(n=c_out, v="c"))
        m = _run(text)
        (call,) = _calls(m)
        assert call.shape.tuple_shapes[0].element_type.name == "s8"
        assert _dims(call)[0][-1] == want, (c_in, want)
        _same_numbers(text, m, atol=0)


def test_int8_bias_relu_s8_is_one_call_with_a_padded_bias():
    epi = """  bb = f32[2,6,6,20] broadcast(b), dimensions={3}
  a = f32[2,6,6,20] add(c, bb)
  z = f32[] constant(0)
  bz = f32[2,6,6,20] broadcast(z), dimensions={}
  relu = f32[2,6,6,20] maximum(a, bz)
""" + S8_CLAMP.format(n=20, v="relu")
    text = _s8_conv(24, 20, epi, bias=True)
    m = _run(text)
    (call,) = _calls(m)
    assert call.attrs["custom_call_target"] == "__cudnn$convBiasActivationForward"
    assert _dims(call) == [[2, 6, 6, 32], [3, 3, 32, 32], [32], [2, 6, 6, 32]]
    assert call.backend_config_data["cudnn_conv_backend_config"]["activation_mode"] == "kRelu"
    ref = parse_module(text)
    args = _args(ref)
    args[2] = np.round(args[2]).astype(np.float32)  # whole biases: cuDNN's rounding = the convert's
    np.testing.assert_array_equal(evaluate(m, args), evaluate(ref, args))


def test_int8x32_needs_turing_and_an_integer_result():
    sm61 = _device(6, 1)
    text = _s8_conv(24, 24, S8_CLAMP.format(n=24, v="c"))
    assert _dims(_calls(_run(text, sm61))[0])[0][-1] == 24  # x4 only: 24 is a multiple already
    f32_result = _s8_conv(24, 24, "  ROOT r = f32[2,6,6,24] copy(c)\n")
    assert _dims(_calls(_run(f32_result))[0])[0][-1] == 24  # s8 -> f32: int8x32 not supported


def test_s32_convolution_stays_ours_and_is_named_once(caplog):
    text = """
HloModule m
ENTRY e {
  x = s8[2,6,6,8] parameter(0)
  w = s8[3,3,8,8] parameter(1)
  s = s32[2,6,6,8] parameter(2)
  c = s32[2,6,6,8] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  a = s32[2,6,6,8] add(c, s)
  z = s32[] constant(0)
  bz = s32[2,6,6,8] broadcast(z), dimensions={}
  ROOT r = s32[2,6,6,8] maximum(a, bz)
}
"""
    with caplog.at_level(logging.INFO, logger="hlo_notes"):
        m = _run(text)
    assert _calls(m) == []
    assert [i.opcode for i in m.entry.instructions].count("convolution") == 1
    lines = [r.getMessage() for r in caplog.records if "stays a convolution of ours" in r.getMessage()]
    assert len(lines) == 1 and "s8, s8 -> s32" in lines[0]
    _same_numbers(text, m, atol=0)
