"""Convolutions on the host platform: hlo-codegen --target host makes each lone convolution a
ConvolutionThunk, hlo-run's host runs it (hlo_run.host_conv: the host's own direct convolution,
or the interpreter's im2col for what that does not take), and the result matches the
interpreter's, for every window option, dim_labels order, group count, type and layout."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.hlo.parser import parse_module
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.manifest.thunks import ConvolutionThunk, ManifestError, thunk_from_json, walk
from hlo_run.backends.host import HostDevice
from hlo_run.manifest_runtime import ManifestExecutable

CONV = ("HloModule c\nENTRY e {{ x = {x} parameter(0) w = {w} parameter(1)\n"
        " ROOT c = {out} convolution(x, w), {attrs} }}")
SAME3 = "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"
VALID3 = "window={size=3x3}, dim_labels=b01f_01io->b01f"
CASES = {  # name: (input, kernel, output, attributes)
    "nhwc_same": ("f32[2,9,9,8]", "f32[3,3,8,16]", "f32[2,9,9,16]", SAME3),
    "nchw_oihw": ("f32[2,8,9,7]", "f32[16,8,3,2]", "f32[2,16,7,6]",
                  "window={size=3x2}, dim_labels=bf01_oi01->bf01"),
    "strided_dilated": ("f32[1,17,15,5]", "f32[3,3,5,12]", "f32[1,6,6,12]", "window={size=3x3 stride=2x2 "
                        "pad=0_-1x1_0 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f"),
    "transposed": ("f32[2,5,5,4]", "f32[3,3,4,9]", "f32[2,11,11,9]", "window={size=3x3 pad=2_2x2_2 "
                   "lhs_dilate=2x2 rhs_reversal=1x1}, dim_labels=b01f_01io->b01f"),
    "groups": ("f32[2,6,6,16]", "f32[3,3,8,32]", "f32[2,4,4,32]", VALID3 + ", feature_group_count=2"),
    "depthwise": ("f32[2,6,6,8]", "f32[3,3,1,8]", "f32[2,6,6,8]", SAME3 + ", feature_group_count=8"),
    "batch_groups": ("f32[4,5,5,3]", "f32[3,3,3,8]", "f32[2,3,3,8]", VALID3 + ", batch_group_count=2"),
    "one_d": ("f32[3,20,6]", "f32[5,6,10]", "f32[3,8,10]",
              "window={size=5 stride=2}, dim_labels=b0f_0io->b0f"),
    "three_d": ("f32[1,5,6,7,3]", "f32[2,2,2,3,9]", "f32[1,4,5,6,9]",
                "window={size=2x2x2}, dim_labels=b012f_012io->b012f"),
    "no_spatial": ("f32[4,6]", "f32[6,10]", "f32[4,10]", "window={}, dim_labels=bf_io->bf"),
    "output_layout": ("f32[2,7,7,8]", "f32[3,3,8,16]", "f32[2,7,7,16]{2,1,3,0}", SAME3),
    # NCHW dims in an NHWC buffer: the output is written in place through a channels-last view
    "nchw_dims_nhwc_buffer": ("f32[2,8,9,9]{1,3,2,0}", "f32[16,8,3,3]", "f32[2,16,9,9]{1,3,2,0}",
                              "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01"),
    "depthwise_nchw_dims_nhwc_buffer": ("f32[1,16,7,7]{1,3,2,0}", "f32[16,1,3,3]", "f32[1,16,7,7]{1,3,2,0}",
                                        "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01, "
                                        "feature_group_count=16"),
    "bf16": ("bf16[2,8,8,16]", "bf16[3,3,16,16]", "bf16[2,8,8,16]", SAME3),
    "f16_to_f32": ("f16[2,8,8,16]", "f16[3,3,16,16]", "f32[2,6,6,16]", VALID3),
    "f64": ("f64[2,6,6,4]", "f64[3,3,4,8]", "f64[2,4,4,8]", VALID3),
    "s32": ("s32[2,6,6,4]", "s32[3,3,4,8]", "s32[2,4,4,8]", VALID3),
    # issue 20's shapes: depthwise (with a channel multiplier, strides, dilation, uneven padding,
    # a 16-bit type), strided and padded, dilated along the last dim, and weight gradients as
    # jax.grad writes them (x against dy over batch and space; strided forward: dilated window)
    "depthwise_multiplier": ("f32[2,11,11,6]", "f32[3,3,1,12]", "f32[2,6,8,12]",
                             "window={size=3x3 stride=2x1 pad=1_2x0_1 rhs_dilate=1x2}, "
                             "dim_labels=b01f_01io->b01f, feature_group_count=6"),
    "depthwise_bf16": ("bf16[2,8,8,16]", "bf16[3,3,1,16]", "bf16[2,8,8,16]",
                       SAME3 + ", feature_group_count=16"),
    "depthwise_nchw_reversed": ("f32[2,4,7,7]", "f32[4,1,3,3]", "f32[2,4,7,7]",
                                "window={size=3x3 pad=1_1x1_1 rhs_reversal=1x0}, "
                                "dim_labels=bf01_oi01->bf01, feature_group_count=4"),
    "strided_padded": ("f32[2,13,12,8]", "f32[5,3,8,16]", "f32[2,4,7,16]",
                       "window={size=5x3 stride=3x2 pad=2_1x0_3}, dim_labels=b01f_01io->b01f"),
    "dilated_last_dim": ("f32[2,12,12,8]", "f32[3,3,8,16]", "f32[2,8,6,16]",
                         "window={size=3x3 rhs_dilate=2x3}, dim_labels=b01f_01io->b01f"),
    "backward_filter": ("f32[4,10,10,8]", "f32[4,10,10,16]", "f32[3,3,8,16]",
                        "window={size=10x10 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf"),
    "backward_filter_strided": ("f32[4,9,9,8]", "f32[4,5,5,16]", "f32[3,3,8,16]",
                                "window={size=5x5 pad=1_1x1_1 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf"),
    "backward_filter_depthwise": ("f32[4,9,9,8]", "f32[4,9,9,16]", "f32[3,3,1,16]", "window={size=9x9 "
                                  "pad=1_1x1_1}, dim_labels=f01b_i01o->01bf, batch_group_count=8"),
}
EXACT = {"f64", "s32", "batch_groups", "backward_filter_depthwise"}  # the interpreter's own im2col runs these


def _args(module):
    rng = np.random.default_rng(9)
    out = []
    for p in module.entry.parameters:
        dtype = p.shape.element_type.np_dtype
        if np.dtype(dtype).kind in "iu":
            out.append(rng.integers(-5, 6, p.shape.dims).astype(dtype))
        else:
            out.append(rng.uniform(-1, 1, p.shape.dims).astype(dtype))
    return out


def _compile(text: str, target: str = "host"):
    return compile_module(parse_module(text), CompileOptions(target=target)).manifest


@pytest.mark.parametrize("case", sorted(CASES))
def test_convolution_thunk_matches_the_interpreter(case):
    x, w, out, attrs = CASES[case]
    text = CONV.format(x=x, w=w, out=out, attrs=attrs)
    manifest = load_manifest(_compile(text).to_bytes(), "m.json")
    kinds = [t.kind for t in walk(manifest.thunks) if t.kind in ("kConvolution", "kKernel")]
    assert kinds == ["kConvolution"]
    module = parse_module(text)
    args = _args(module)
    got = np.asarray(ManifestExecutable(manifest, HostDevice()).run(args))
    want = np.asarray(evaluate(module, args))
    assert got.dtype == want.dtype and got.shape == want.shape
    if case in EXACT:
        np.testing.assert_array_equal(got, want)
    elif want.dtype == ml_dtypes.bfloat16:  # one rounding of f32 sums taken in another order
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2 ** -7, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["depthwise_multiplier", "depthwise_bf16", "strided_padded",
                                  "dilated_last_dim", "backward_filter", "backward_filter_strided"])
def test_the_fast_shapes_take_the_hosts_own_kernels(case, monkeypatch):
    import hlo_run.host_conv

    def no_interpreter(*args):
        raise AssertionError("the interpreter's convolution ran")

    monkeypatch.setattr(hlo_run.host_conv, "convolve", no_interpreter)
    x, w, out, attrs = CASES[case]
    text = CONV.format(x=x, w=w, out=out, attrs=attrs)
    module = parse_module(text)
    args = _args(module)
    manifest = load_manifest(_compile(text).to_bytes(), "m.json")
    got = ManifestExecutable(manifest, HostDevice()).run(args)
    assert np.asarray(got).shape == np.asarray(evaluate(module, args)).shape


def test_only_the_host_target_makes_convolution_thunks():
    x, w, out, attrs = CASES["nhwc_same"]
    manifest = _compile(CONV.format(x=x, w=w, out=out, attrs=attrs), target="cuda")
    assert not any(isinstance(t, ConvolutionThunk) for t in walk(manifest.thunks))


@pytest.mark.parametrize("field, value, message", [
    ("kind", "backward_data", "unknown convolution kind"),
    ("window", "size=3x3 stride=2", "window field 'stride' has 1 entries"),
    ("dim_labels", "b01f_01io", "malformed dim_labels"),
    ("feature_group_count", 0, "below 1"),
])
def test_bad_convolution_configs_name_the_field(field, value, message):
    x, w, out, attrs = CASES["nhwc_same"]
    manifest = _compile(CONV.format(x=x, w=w, out=out, attrs=attrs))
    thunk = next(t for t in walk(manifest.thunks) if isinstance(t, ConvolutionThunk))
    data = thunk.to_json()
    assert thunk_from_json(data, "t") == thunk
    data["config"][field] = value
    with pytest.raises(ManifestError, match=f"t.config.{field}: .*{message}"):
        thunk_from_json(data, "t")
