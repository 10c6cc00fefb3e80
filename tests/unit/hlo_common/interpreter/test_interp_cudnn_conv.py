"""The interpreter's cuDNN convolution custom calls (`hlo_common/interpreter/cudnn_conv.py`).

XLA:GPU's own optimized HLO of JAX convolutions (testdata/cudnn/*.xla_gpu.hlo, with its
`__cudnn$conv*` calls: forward, fused bias/side input/activation, backward input and filter) runs
on the interpreter and is compared with XLA:CPU running the module as jax wrote it, on the same
inputs. The backward calls are also checked as adjoints of the interpreter's own convolution on
shapes the testdata lack (negative padding, window reversal, groups), and bad configs fail cleanly.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hlo_common.errors import InterpreterError
from hlo_common.hlo.parser import parse_module
from hlo_common.interpreter.evaluator import evaluate

DATA = Path(__file__).resolve().parents[4] / "testdata" / "cudnn"
CASES = sorted(p.name[:-len(".xla_gpu.hlo")] for p in DATA.glob("*.xla_gpu.hlo"))
TARGETS = ("__cudnn$convForward", "__cudnn$convBackwardInput", "__cudnn$convBackwardFilter",
           "__cudnn$convBiasActivationForward")


@functools.lru_cache(maxsize=None)
def _arguments(name: str) -> list[np.ndarray]:
    from hlo_run.inputs import make_fake_arguments

    return make_fake_arguments(parse_module((DATA / f"{name}.hlo").read_text(), name), 0)


@pytest.mark.parametrize("name", CASES)
def test_xla_gpu_cudnn_module_matches_xla_cpu(name):
    pytest.importorskip("jax")
    from hlo_run.compare import compare_values
    from hlo_run.xla_cpu import XlaCpuExecutable

    gpu_text = (DATA / f"{name}.xla_gpu.hlo").read_text()
    assert "__cudnn$conv" in gpu_text, "XLA:GPU made no cuDNN call of this module"
    ours = evaluate(parse_module(gpu_text, f"{name}.xla_gpu.hlo"), list(_arguments(name)))
    want = XlaCpuExecutable.compile((DATA / f"{name}.hlo").read_text()).run(list(_arguments(name)))
    # s8 results of a fractional f32 epilogue: cuDNN rounds to nearest, the jax module's convert
    # truncates toward zero, so they differ by at most 1 there
    if name in ROUNDED_S8_RESULTS:
        diff = np.abs(np.asarray(ours, np.int32) - np.asarray(want, np.int32))
        assert diff.max() <= 1 and np.mean(diff == 0) > 0.5
        return
    result = compare_values(ours, want, None, None)
    assert result.ok, result.one_line()


ROUNDED_S8_RESULTS = ("int8_bias_relu_s8", "int8_c24_side_s8")


def _host_run(module_text: str, name: str, args: list):
    """What `hlo-run --platform host` computes for a module hlo-codegen compiles as given."""
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.manifest.manifest import load_manifest
    from hlo_run.backends.host import HostDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    manifest = compile_module(parse_module(module_text, name), CompileOptions(target="host")).manifest
    executable = ManifestExecutable(load_manifest(manifest.to_bytes(), f"{name}.json"), HostDevice(), name)
    return executable.run(args)


@pytest.mark.parametrize("name", CASES)
def test_xla_gpu_cudnn_module_runs_on_the_host_as_on_the_interpreter(name):
    """hlo-codegen's cudnn-conv-fallback turns the calls into convolutions the host runs."""
    from hlo_run.compare import compare_values

    text = (DATA / f"{name}.xla_gpu.hlo").read_text()
    want = evaluate(parse_module(text, name), list(_arguments(name)))
    result = compare_values(_host_run(text, name, list(_arguments(name))), want, None, None)
    assert result.ok, result.one_line()


@pytest.mark.parametrize("name", ["grad_grouped", "resnet_block_grad", "forward_f16_bias_relu"])
def test_xla_gpu_cudnn_module_compiles_for_cuda(name):
    pytest.importorskip("cuda.bindings.nvjitlink", reason="PTX linking needs nvJitLink")
    from hlo_codegen.compiler import CompileOptions, compile_module

    text = (DATA / f"{name}.xla_gpu.hlo").read_text()
    manifest = compile_module(parse_module(text, name), CompileOptions(target="cuda")).manifest
    assert manifest.kernels and all(k.ptx for k in manifest.kernels.values())


def test_the_testdata_cover_every_call_and_fused_operand():
    texts = "".join((DATA / f"{n}.xla_gpu.hlo").read_text() for n in CASES)
    for target in TARGETS:
        assert f'custom_call_target="{target}"' in texts
    assert '"activation_mode":"kRelu"' in texts
    assert len(CASES) >= 20


def test_generator_reproduces_the_modules():
    pytest.importorskip("jax")
    run = subprocess.run([sys.executable, str(DATA / "make_modules.py"), "--check"], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]


# -- the backward calls as adjoints of the forward convolution ------------------------------------------
# window, feature groups, input dims, kernel dims, output dims (worked out by hand)
ADJOINT_CASES = {
    "negative_pad": ("window={size=3x2 stride=2x1 pad=-1_2x1_-1}", 1, (2, 9, 7, 4), (3, 2, 4, 6),
                     (2, 4, 6, 6)),
    "reversal_dilation": ("window={size=2x3 pad=1_1x2_0 rhs_dilate=2x1 rhs_reversal=1x0}", 1,
                          (1, 6, 8, 4), (2, 3, 4, 4), (1, 6, 8, 4)),
    "grouped": ("window={size=3x3 stride=2x2 pad=1_1x1_1}", 2, (2, 7, 7, 6), (3, 3, 3, 4), (2, 4, 4, 4)),
}


def _call(target: str, window: str, groups: int, result: str, operands: str, body_params: str) -> str:
    return (f"HloModule m\n\nENTRY e {{\n{body_params}"
            f"  c = ({result}, u8[0]) custom-call({operands}), {window}, dim_labels=b01f_01io->b01f, "
            f"feature_group_count={groups}, custom_call_target=\"{target}\"\n"
            f"  ROOT g = {result} get-tuple-element(c), index=0\n}}\n")


def _shape(dims) -> str:
    return "f64[" + ",".join(map(str, dims)) + "]"


@pytest.mark.parametrize("case", sorted(ADJOINT_CASES))
def test_backward_calls_are_adjoints_of_the_forward_call(case):
    window, groups, x_dims, w_dims, y_dims = ADJOINT_CASES[case]
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(x_dims), rng.standard_normal(w_dims)
    params = f"  x = {_shape(x_dims)} parameter(0)\n  w = {_shape(w_dims)} parameter(1)\n"
    y = evaluate(parse_module(_call("__cudnn$convForward", window, groups, _shape(y_dims), "x, w", params),
                              case), [x, w])
    dy = rng.standard_normal(y_dims)
    dparams = f"  dy = {_shape(y_dims)} parameter(0)\n  w = {_shape(w_dims)} parameter(1)\n"
    dx = evaluate(parse_module(_call("__cudnn$convBackwardInput", window, groups, _shape(x_dims), "dy, w",
                                     dparams), case), [dy, w])
    fparams = f"  x = {_shape(x_dims)} parameter(0)\n  dy = {_shape(y_dims)} parameter(1)\n"
    dw = evaluate(parse_module(_call("__cudnn$convBackwardFilter", window, groups, _shape(w_dims), "x, dy",
                                     fparams), case), [x, dy])
    inner = float(np.sum(y * dy))  # <conv(x, w), dy> = <x, dx> = <w, dw>
    assert np.isclose(float(np.sum(x * dx)), inner, rtol=1e-10)
    assert np.isclose(float(np.sum(w * dw)), inner, rtol=1e-10)
    # hlo-codegen's fallback (plain convolutions) computes the same on the host
    for target, text, args, want in (
            ("__cudnn$convBackwardInput", _call("__cudnn$convBackwardInput", window, groups, _shape(x_dims),
                                                "dy, w", dparams), [dy, w], dx),
            ("__cudnn$convBackwardFilter", _call("__cudnn$convBackwardFilter", window, groups, _shape(w_dims),
                                                 "x, dy", fparams), [x, dy], dw)):
        got = _host_run(text, f"{case}_{target}", args)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=target)


def test_a_bad_backend_config_names_the_call():
    text = _call("__cudnn$convForward", "window={size=1x1}", 1, "f32[1,2,2,1]", "x, w",
                 "  x = f32[1,2,2,1] parameter(0)\n  w = f32[1,1,1,1] parameter(1)\n")
    text = text.replace('custom_call_target="__cudnn$convForward"',
                        'custom_call_target="__cudnn$convForward", '
                        'backend_config={"cudnn_conv_backend_config":{"activation_mode":"kSwish"}}')
    with pytest.raises(InterpreterError, match=r"%c .*activation_mode 'kSwish'"):
        evaluate(parse_module(text, "bad"),
                 [np.ones((1, 2, 2, 1), np.float32), np.ones((1, 1, 1, 1), np.float32)])
