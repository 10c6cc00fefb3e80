"""cudnn_vectorize_convolutions (int8 cuDNN calls in NCHW_VECT_C, XLA's
cudnn_vectorize_convolutions_test.cc patterns) and the vectorized calls on the host: the shapes and
dim_labels the pass writes and declines, the vectorized module's numbers equal to the plain one's in
the interpreter, and hlo-codegen's `cudnn-conv-fallback` taking a vectorized call (`?` after the
feature dim, as the pass writes, or last, as older XLA wrote NCHW_VECT_C) apart again so that the
host runs it to the interpreter's values."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.gpu.device import H100
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo_pass.pass_base import PASS_REGISTRY
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_opt.passes import load_all_passes
from hlo_run.backends.host import HostDevice
from hlo_run.manifest_runtime import ManifestExecutable

load_all_passes()

CONFIG = ('backend_config={"cudnn_conv_backend_config":{"activation_mode":"%s","conv_result_scale":1,'
          '"side_input_scale":%s}}')
FORWARD = """HloModule f
ENTRY e {
  x = s8[2,6,6,%(c)d] parameter(0)
  w = s8[%(o)d,3,3,%(c)d] parameter(1)
  c = (s8[2,6,6,%(o)d], u8[0]) custom-call(x, w), window={size=3x3 pad=1_1x1_1},
      dim_labels=b01f_o01i->b01f, custom_call_target="__cudnn$convForward", %(config)s
  ROOT r = s8[2,6,6,%(o)d] get-tuple-element(c), index=0
}"""
BIAS_SIDE = """HloModule b
ENTRY e {
  x = s8[2,5,5,64] parameter(0)
  w = s8[32,3,3,64] parameter(1)
  b = f32[32] parameter(2)
  s = s8[2,5,5,32] parameter(3)
  c = (s8[2,5,5,32], u8[0]) custom-call(x, w, b, s), window={size=3x3 pad=1_1x1_1},
      dim_labels=b01f_o01i->b01f, custom_call_target="__cudnn$convBiasActivationForward", %(config)s
  ROOT r = s8[2,5,5,32] get-tuple-element(c), index=0
}"""
# NCHW_VECT_C as older XLA wrote it: the vector dim last, features split before it
VECT_LAST = """HloModule v
ENTRY e {
  x = s8[2,2,6,6,4] parameter(0)
  w = s8[16,2,3,3,4] parameter(1)
  c = (s8[2,4,4,4,4], u8[0]) custom-call(x, w), window={size=3x3}, dim_labels=bf01?_oi01?->bf01?,
      custom_call_target="__cudnn$convForward", %(config)s
  ROOT r = s8[2,4,4,4,4] get-tuple-element(c), index=0
}"""


def _text(template: str, activation="kNone", side_scale=0, **dims) -> str:
    return template % {"config": CONFIG % (activation, side_scale), **dims}


def _vectorized(text: str, device=H100):
    module = parse_module(text)
    PASS_REGISTRY["cudnn_vectorize_convolutions"](device=device).run(module)
    return module


def _call(module):
    return next(i for i in module.entry.instructions if i.opcode == "custom-call")


def _args(module, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.integers(-9, 10, p.shape.dims).astype(p.shape.element_type.np_dtype)
            if p.shape.element_type.is_integer else rng.uniform(-50, 50, p.shape.dims).astype(np.float32)
            for p in module.entry.parameters]


@pytest.mark.parametrize("c,o,k,sm", [(64, 64, 32, (9, 0)), (32, 96, 32, (7, 5)), (8, 12, 4, (9, 0)),
                                      (64, 64, 4, (6, 1))])
def test_vector_size_by_features_and_device(c, o, k, sm):
    device = replace(H100, compute_capability_major=sm[0], compute_capability_minor=sm[1])
    module = _vectorized(_text(FORWARD, c=c, o=o), device)
    call = _call(module)
    assert str(call.attrs["dim_labels"]) == "b01f?_o01i?->b01f?"
    assert list(call.operands[0].shape.dims) == [2, 6, 6, c // k, k]
    assert list(call.operands[1].shape.dims) == [o, 3, 3, c // k, k]
    assert list(call.shape.tuple_shapes[0].dims) == [2, 6, 6, o // k, k]
    assert module.entry.root.shape.dims == (2, 6, 6, o)


@pytest.mark.parametrize("c,o", [(6, 8), (8, 6)])
def test_features_not_a_multiple_of_four_stay_plain(c, o):
    module = _vectorized(_text(FORWARD, c=c, o=o))
    assert "?" not in str(_call(module).attrs["dim_labels"])


@pytest.mark.parametrize("text", [_text(FORWARD, c=64, o=32), _text(FORWARD, c=8, o=4),
                                  _text(BIAS_SIDE, "kRelu", 0.5)])
def test_vectorized_module_computes_the_plain_ones_values(text):
    plain = parse_module(text)
    module = _vectorized(text)
    assert "?" in str(_call(module).attrs["dim_labels"])
    args = _args(plain)
    np.testing.assert_array_equal(np.asarray(evaluate(module, args)), np.asarray(evaluate(plain, args)))


def _host(module, args):
    manifest = load_manifest(compile_module(module, CompileOptions(target="host")).manifest.to_bytes(), "m")
    return np.asarray(ManifestExecutable(manifest, HostDevice()).run(args))


@pytest.mark.parametrize("name", ["forward", "bias_side", "vect_last"])
def test_host_runs_vectorized_calls_as_the_interpreter(name):
    text = {"forward": lambda: _text(FORWARD, c=64, o=32), "bias_side": lambda: _text(BIAS_SIDE, "kRelu", 0.5),
            "vect_last": lambda: _text(VECT_LAST)}[name]()
    module = parse_module(text) if name == "vect_last" else _vectorized(text)
    assert "?" in str(_call(module).attrs["dim_labels"])
    args = _args(module)
    want = np.asarray(evaluate(module, args))
    got = _host(parse_module(text) if name == "vect_last" else _vectorized(text), args)
    np.testing.assert_array_equal(got, want)


def test_vector_dim_last_is_the_plain_call_on_merged_features():
    """The NCHW_VECT_C reading, checked without the fallback: feature f = outer * 4 + inner."""
    module = parse_module(_text(VECT_LAST))
    x, w = _args(module)
    plain = parse_module(_text(VECT_LAST).replace("s8[2,2,6,6,4]", "s8[2,8,6,6]")
                         .replace("s8[16,2,3,3,4]", "s8[16,8,3,3]").replace("s8[2,4,4,4,4]", "s8[2,16,4,4]")
                         .replace("bf01?_oi01?->bf01?", "bf01_oi01->bf01"))
    merged = [v.transpose(0, 1, 4, 2, 3).reshape(v.shape[0], -1, *v.shape[2:4]) for v in (x, w)]
    want = np.asarray(evaluate(plain, merged))
    got = np.asarray(evaluate(module, [x, w]))
    np.testing.assert_array_equal(got.transpose(0, 1, 4, 2, 3).reshape(want.shape), want)


def test_the_cuda_target_says_it_runs_a_vectorized_call_as_our_kernel():
    from hlo_common.gpu.cudnn_graph import CudnnUnsupported, describe_call

    call = _call(_vectorized(_text(FORWARD, c=64, o=32)))
    with pytest.raises(CudnnUnsupported, match="vectorized int8"):
        describe_call(call)
    describe_call(_call(parse_module(_text(FORWARD, c=64, o=32))))  # the plain call is a graph
