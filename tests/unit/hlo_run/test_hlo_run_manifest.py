"""hlo-run on manifests: the host runtime against the interpreter and numpy, control flow, the
CLI paths (file, stdin, in-process compile, --iterations), and one-line errors."""

from __future__ import annotations

import io
import json
import sys

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_run.backends.host import HostDevice
from hlo_run.cli import cli
from hlo_run.manifest_runtime import ManifestExecutable, _Progress

from codegen_testlib import KERNEL_FREE, WHILE, ElementwiseHostBackend, FakeKernelBackend, compile_text


def run_host(text: str, args, backend=None):
    result, _ = compile_text(text, backend=backend)
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    return ManifestExecutable(manifest, HostDevice()).run(args)


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


DOT = ("HloModule d\nENTRY e {{ a = {a} parameter(0) b = {b} parameter(1)\n"
       " ROOT d = {out} dot(a, b), {dims} }}")
PLAIN = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
BATCH = "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}"


@pytest.mark.parametrize("a, b, out, dims, dtype", [
    ("f32[3,5]", "f32[5,4]", "f32[3,4]", PLAIN, np.float32),
    ("f32[3,5]{0,1}", "f32[5,4]{0,1}", "f32[3,4]{0,1}", PLAIN, np.float32),
    ("bf16[7,33]", "bf16[33,6]", "bf16[7,6]", PLAIN, ml_dtypes.bfloat16),
    ("bf16[7,33]", "bf16[33,6]", "f32[7,6]", PLAIN, ml_dtypes.bfloat16),
    ("f64[2,3,5]", "f64[2,5,4]{1,2,0}", "f64[2,3,4]", BATCH, np.float64),
    ("c64[3,5]", "c64[5,4]", "c64[3,4]", PLAIN, np.complex64),
])
def test_gemm_matches_the_interpreter(a, b, out, dims, dtype):
    """Exactly where the host keeps numpy's product (f64, complex); up to the summation order of
    the host's own f32 GEMM where the product accumulates in f32 (f32, bf16 results)."""
    text = DOT.format(a=a, b=b, out=out, dims=dims)
    module = parse_module(text)
    args = [rand(p.shape.dims, dtype, seed=i) for i, p in enumerate(module.entry.parameters)]
    if np.dtype(dtype).kind == "c":
        args = [x + 1j * rand(x.shape, np.float32, seed=7).astype(dtype) for x in args]
    got = run_host(text, args)
    want = evaluate(module, args)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype in (np.float64, np.complex64):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    else:  # one rounding of an f32 sum in another order: within 2 units of the result type's last place
        ulp = 2.0 ** -7 if want.dtype == ml_dtypes.bfloat16 else 2.0 ** -23
        np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=2 * ulp,
                                   atol=1e-6)


CUSTOM = """HloModule g
ENTRY e {{ a = f32[2,3] parameter(0) b = f32[3,4] parameter(1) c = f32[2,4] parameter(2) {bias_param}
  g = (f32[2,4], s8[32]) custom-call(a, b, c{bias_operand}), custom_call_target="__cublas$lt$matmul",
    backend_config={{"gemm_backend_config":{{"alpha_real":{alpha},"alpha_imag":0,"beta":{beta},
      "dot_dimension_numbers":{{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],
      "lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}},"epilogue":"{epilogue}"}}}}
  ROOT r = f32[2,4] get-tuple-element(g), index=0 }}"""


@pytest.mark.parametrize("alpha, beta, epilogue", [(1, 1, "DEFAULT"), (2.5, -0.5, "RELU"), (1, 2, "BIAS")])
def test_gemm_custom_call_alpha_beta_epilogue_against_numpy(alpha, beta, epilogue):
    """DEFAULT runs as a host GemmThunk; cuBLASLt epilogues as a kernel (hlo-run calls no cuBLASLt)."""
    from hlo_codegen.kernel_backend import EmitterBackend

    bias = epilogue.startswith("BIAS")
    text = CUSTOM.format(alpha=alpha, beta=beta, epilogue=epilogue,
                         bias_param="v = f32[4] parameter(3)" if bias else "",
                         bias_operand=", v" if bias else "")
    args = [rand((2, 3), seed=1), rand((3, 4), seed=2), rand((2, 4), seed=3)]
    args += [rand((4,), seed=4)] if bias else []
    got = run_host(text, args, EmitterBackend("host"))
    want = alpha * (args[0].astype(np.float64) @ args[1]) + beta * args[2]
    if bias:
        want = want + args[3]
    if epilogue == "RELU":
        want = np.maximum(want, 0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("go", [True, False])
def test_control_flow_matches_the_interpreter(go):
    module = parse_module(KERNEL_FREE)
    args = [np.array(go), rand((4, 4), seed=1), rand((4, 4), seed=2)]
    got = run_host(KERNEL_FREE, args)
    want = evaluate(module, args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_kernels_in_a_while_loop_match_the_interpreter():
    args = [rand((4,), seed=3)]
    got = run_host(WHILE, args, ElementwiseHostBackend())
    np.testing.assert_array_equal(got, evaluate(parse_module(WHILE), args))


@pytest.mark.parametrize("index", [-1, 0, 1, 2, 7])
def test_index_conditional_with_kernels_takes_the_last_branch_when_out_of_range(index):
    text = """HloModule c
b0 { p = f32[4] parameter(0) ROOT n = f32[4] negate(p) }
b1 { p = f32[4] parameter(0) ROOT n = f32[4] add(p, p) }
b2 { p = f32[4] parameter(0) ROOT n = f32[4] multiply(p, p) }
ENTRY e { s = s32[] parameter(0) a = f32[4] parameter(1)
  ROOT c = f32[4] conditional(s, a, a, a), branch_computations={b0, b1, b2} }"""
    args = [np.int32(index), rand((4,), seed=5)]
    got = run_host(text, args, ElementwiseHostBackend())
    want = evaluate(parse_module(text), args)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(want, args[1] * args[1]) == (index not in (0, 1))


def test_a_kernel_that_does_not_compile_is_named():
    from hlo_common.errors import HloError

    result, _ = compile_text("HloModule m\nENTRY e { p = f32[4] parameter(0) ROOT n = f32[4] negate(p) }",
                             backend=FakeKernelBackend())
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    message = "m.json: kernel wrapped_negate: its LLVM IR does not define @wrapped_negate"
    with pytest.raises(HloError, match=message):
        ManifestExecutable(manifest, HostDevice(), "m.json")


# -- the command line ------------------------------------------------------------------------------------
def run(args, stdin=None):
    return CliRunner().invoke(cli, args, input=stdin, catch_exceptions=False)


@pytest.fixture(scope="module")
def manifest_file(tmp_path_factory):
    result, _ = compile_text(KERNEL_FREE)
    path = tmp_path_factory.mktemp("m") / "kernel_free.json"
    path.write_bytes(result.manifest.to_bytes())
    return path


def test_cli_runs_a_manifest_file_and_stdin_against_the_interpreter(manifest_file):
    result = run(["--platform", "host", str(manifest_file)])
    assert result.exit_code == 0, result.stderr
    assert "Results on host and interpreter are close enough" in result.stderr
    result = run(["--platform", "host", "--reference-platform", "none"], stdin=manifest_file.read_bytes())
    assert result.exit_code == 0 and "with runner host" in result.stderr


def test_interpreter_platform_interprets_the_manifest_hlo(manifest_file, tmp_path):
    out_host, out_interp = tmp_path / "h.npz", tmp_path / "i.npz"
    assert run(["--platform", "host", "--output", str(out_host), str(manifest_file)]).exit_code == 0
    assert run(["--platform", "interpreter", "--output", str(out_interp), str(manifest_file)]).exit_code == 0
    with np.load(out_host) as h, np.load(out_interp) as i:
        assert sorted(h.files) == ["out0", "out1", "out2"]
        for name in h.files:
            np.testing.assert_array_equal(h[name], i[name])


def test_iterations_report_per_thunk_times(manifest_file):
    result = run(["--platform", "host", "--iterations", "3", "--reference-platform", "none",
                  str(manifest_file)])
    assert result.exit_code == 0
    assert "host: 3 runs:" in result.stderr and "last run, per step:" in result.stderr
    assert any(line.strip().startswith("001 kCopy") and line.endswith(" ms")
               for line in result.stderr.splitlines())


def test_bad_inputs_name_the_array(manifest_file, tmp_path):
    npz = tmp_path / "in.npz"
    np.savez(npz, arg0=np.array(True), arg1=rand((4, 4)), arg2=rand((4, 5)))
    result = run(["--platform", "host", "--inputs", str(npz), str(manifest_file)])
    assert result.exit_code == 1 and "array 'arg2' has shape [4, 5], expected [4, 4]" in result.stderr
    np.savez(npz, arg0=np.array(True), arg1=rand((4, 4)), argX=rand((4, 4)))
    result = run(["--platform", "host", "--inputs", str(npz), str(manifest_file)])
    assert result.exit_code == 1 and "unexpected array 'argX'" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_manifest_and_wrong_target_are_one_line(manifest_file, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(manifest_file.read_bytes()[:-200])
    result = run(["--platform", "host", str(bad)])
    assert result.exit_code == 1 and result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith(f"hlo-run: error: {bad}: truncated")
    body = json.loads(manifest_file.read_bytes())
    body["target"] = "cuda"
    from hlo_common.manifest.manifest import body_digest

    body["integrity"] = {"sha256": body_digest(body)}
    cuda = tmp_path / "cuda.json"
    cuda.write_text(json.dumps(body))
    result = run(["--platform", "host", str(cuda)])
    assert result.exit_code == 1 and "compiled for cuda; run it with --platform cuda" in result.stderr


def test_cuda_without_a_gpu_says_why(manifest_file):
    from hlo_run.backends.cuda import CudaBackend

    reason = CudaBackend.unavailable_reason()
    if reason is None:
        pytest.skip("a GPU is usable here")
    result = run(["--platform", "cuda", str(manifest_file)])
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert line.startswith("hlo-run: error: ") and "\n" not in line
    assert line.endswith(f"platform 'cuda' cannot run here: {reason}")


def test_hlo_text_is_compiled_by_hlo_codegen_first(tmp_path):
    src = tmp_path / "g.hlo"
    src.write_text(DOT.format(a="f32[3,5]", b="f32[5,4]", out="f32[3,4]", dims=PLAIN))
    result = run(["--platform", "host", str(src)])
    assert result.exit_code == 0, result.stderr
    assert "Results on host and interpreter are close enough" in result.stderr
    src.write_text("HloModule m\nENTRY e { a = token[] after-all() ROOT i = (f32[4], token[]) infeed(a) }")
    result = run(["--platform", "host", str(src)])
    assert result.exit_code == 1
    assert "hlo-codegen failed: %i: infeed is not supported by hlo-codegen" in result.stderr


def test_progress_bar_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert _Progress.maybe("m", 3) is None

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Tty())
    progress = _Progress.maybe("m", 3)
    assert progress is not None
    progress.advance()
    assert progress.bar is None  # not within the first second
    progress.start -= 2
    progress.advance()
    assert progress.bar is not None
    progress.close()


def test_tuple_parameters_and_token_results(tmp_path):
    text = """HloModule t
ENTRY e { p = (f32[2,3]{0,1}, (s32[], pred[4])) parameter(0) a = f32[2,3]{0,1} get-tuple-element(p), index=0
  q = (s32[], pred[4]) get-tuple-element(p), index=1 k = pred[4] get-tuple-element(q), index=1
  c = f32[2,3]{0,1} copy(a) tok = token[] after-all()
  ROOT r = (pred[4], f32[2,3]{0,1}, token[], (s32[], pred[4])) tuple(k, c, tok, q) }"""
    arg = (rand((2, 3), seed=1), (np.int32(-5), np.array([True, False, False, True])))
    got = run_host(text, [arg])
    want = evaluate(parse_module(text), [arg])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[3][0] == -5 and got[2] is want[2]
    result, _ = compile_text(text)
    path = tmp_path / "t.json"
    path.write_bytes(result.manifest.to_bytes())
    npz = tmp_path / "in.npz"
    np.savez(npz, **{"arg0.0": arg[0], "arg0.1.0": arg[1][0], "arg0.1.1": arg[1][1]})
    out = run(["--platform", "host", "--inputs", str(npz), "--print-literals", str(path)])
    assert out.exit_code == 0, out.stderr
    assert "(pred[4], f32[2,3], token[], (s32[], pred[4])) ({1, 0, 0, 1}" in out.stdout


def test_buffers_larger_than_memory_are_a_one_line_error(tmp_path):
    hlo = tmp_path / "huge.hlo"
    hlo.write_text("HloModule huge\nENTRY e {\n  one = u8[] constant(1)\n"
                   "  ROOT b = u8[1024,1024,1024,2048] broadcast(one), dimensions={}\n}\n")
    result = run(["--platform", "host", str(hlo)])
    assert result.exit_code == 1
    line = result.stderr.strip().splitlines()[-1]
    assert line == (f"hlo-run: error: {hlo}: allocation 0 (2.00 TiB) does not fit in memory; "
                    "the program's buffers take 2.00 TiB")
