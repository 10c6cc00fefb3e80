"""Kernel thunks with the real emitters and lowerings (hlo_codegen.kernel_backend): host kernels run
against the interpreter, PTX for sm_90, kernel reuse, in-place arguments, and failures that name the
kernel and the fusion."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.errors import HloError
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_run.backends.host import HostDevice
from hlo_run.inputs import make_fake_arguments
from hlo_run.manifest_runtime import ManifestExecutable

ELEMENTWISE = """HloModule e
ENTRY e { p = f32[1000] parameter(0) q = f32[1000] parameter(1) a = f32[1000] add(p, q)
  x = f32[1000] exponential(a) ROOT m = f32[1000] multiply(x, p) }"""
IN_PLACE = """HloModule d
ENTRY e { p = f32[64,8] parameter(0) u = f32[4,8] parameter(1) i = s32[] parameter(2) z = s32[] constant(0)
  n = f32[64,8] negate(p)
  ROOT d = f32[64,8] dynamic-update-slice(n, u, i, z) }"""
REDUCE_IN_LOOP = """HloModule r
add { x = f32[] parameter(0) y = f32[] parameter(1) ROOT s = f32[] add(x, y) }
cond { s = (s32[], f32[16,64]) parameter(0) i = s32[] get-tuple-element(s), index=0 n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT }
body { s = (s32[], f32[16,64]) parameter(0) i = s32[] get-tuple-element(s), index=0 one = s32[] constant(1)
  j = s32[] add(i, one) v = f32[16,64] get-tuple-element(s), index=1 zero = f32[] constant(0)
  r = f32[16] reduce(v, zero), dimensions={1}, to_apply=add b = f32[16,64] broadcast(r), dimensions={0}
  w = f32[16,64] subtract(v, b) ROOT t = (s32[], f32[16,64]) tuple(j, w) }
ENTRY e { a = f32[16,64] parameter(0) z = s32[] constant(0) t = (s32[], f32[16,64]) tuple(z, a)
  l = (s32[], f32[16,64]) while(t), condition=cond, body=body
  ROOT o = f32[16,64] get-tuple-element(l), index=1 }"""


def compile_for(text: str, target: str):
    return compile_module(parse_module(text), CompileOptions(target=target))


@pytest.mark.parametrize("text", [ELEMENTWISE, IN_PLACE, REDUCE_IN_LOOP])
def test_host_kernels_match_the_interpreter(text):
    result = compile_for(text, "host")
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    assert manifest.kernels and all(k.llvm_ir and k.ptx is None for k in manifest.kernels.values())
    module = parse_module(text)
    args = make_fake_arguments(module, seed=3)
    got = ManifestExecutable(manifest, HostDevice()).run(args)
    np.testing.assert_allclose(got, evaluate(module, args), rtol=1e-5, atol=1e-6)


def test_in_place_update_passes_one_written_argument():
    result = compile_for(IN_PLACE, "host")
    (dus,) = [t for t in result.manifest.thunks.thunks if "dynamic_update_slice" in t.kernel]
    assert [a.written for a in dus.args] == [True, False, False, False]  # n and d, u, i, z
    assert result.manifest.kernels[dus.kernel].num_params == 4
    assert dus.block[0] * dus.grid[0] < 64 * 8  # only the update window is written


def test_cuda_target_gives_ptx_for_the_arch():
    pytest.importorskip("cuda.bindings.nvjitlink", reason="PTX is validated with nvJitLink (the ptx extra)")
    result = compile_for(ELEMENTWISE, "cuda")
    kernels = result.manifest.kernels
    assert sorted(kernels) == ["loop_add_fusion", "loop_exponential_fusion", "loop_multiply_fusion"]
    for k in kernels.values():
        assert ".target sm_90" in k.ptx and f".entry {k.name}(" in k.ptx and k.llvm_ir is None
        assert k.block == (128, 1, 1) and k.grid == (8, 1, 1)
    assert set(result.kernels["loop_add_fusion"].artifacts) == {"kernel_ir.txt", "ll", "ptx"}


def test_lowering_failure_names_kernel_and_fusion(monkeypatch):
    import hlo_codegen.llvm as llvm

    def broken(kernel):
        raise HloError("cannot lower op 'frobnicate'")

    monkeypatch.setattr(llvm, "lower_to_host", broken)
    with pytest.raises(HloError) as info:
        compile_for(ELEMENTWISE, "host")
    assert str(info.value) == ("kernel loop_add_fusion (fusion %wrapped_add): cannot lower op 'frobnicate'")


def test_emitter_failure_names_the_fusion():
    text = """HloModule f
ENTRY e { p = f32[8] parameter(0) ROOT f = f32[8] fft(p), fft_type=FFT, fft_length={8} }"""
    with pytest.raises(HloError, match=r"^kernel loop_fft_fusion \(fusion %wrapped_fft\): "):
        compile_for(text.replace("f32[8] fft", "c64[8] fft").replace("f32[8] parameter", "c64[8] parameter"),
                    "host")
