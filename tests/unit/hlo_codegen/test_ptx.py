"""NVPTX back end: kernels lowered to LLVM NVPTX IR, compiled to PTX by llvmlite's NVPTX target and
linked into a cubin by nvJitLink for sm_90 (no GPU needed), with libdevice and with our own math.
Skipped, with the reason, when cuda-bindings (the `ptx` extra) is missing.
"""

from __future__ import annotations

import importlib.util
import re

import pytest

from hlo_codegen.emitters import emit_kernel
from hlo_codegen.llvm import lower_to_nvptx
from hlo_codegen.llvm.libdevice import find_libdevice
from hlo_codegen.ptx import PtxError, compile_to_ptx, ptx_to_cubin, validate_ptx
from elemental_harness import fusion_of, gelu
from shuffle_reduction import reduction_kernel

HAVE_NVJITLINK = importlib.util.find_spec("cuda") is not None and \
    importlib.util.find_spec("cuda.bindings") is not None
needs_nvjitlink = pytest.mark.skipif(not HAVE_NVJITLINK,
                                     reason="cuda-bindings (the 'ptx' extra) is not installed")

MATH_FUSION = """f {
  p0 = f32[1000] parameter(0)
  p1 = f64[1000] parameter(1)
  p2 = bf16[1000] parameter(2)
  a = f32[1000] tanh(p0)
  b = f32[1000] atan2(p0, a)
  c = f64[1000] sine(p1)
  d = f64[1000] power(p1, c)
  e = bf16[1000] exponential(p2)
  f = f8e4m3fn[1000] convert(p0)
  g = c64[1000] complex(a, b)
  h = c64[1000] divide(g, g)
  ROOT t = (f32[1000], f64[1000], bf16[1000], f8e4m3fn[1000], c64[1000]) tuple(b, d, e, f, h)
}"""


def _cubin(ir: str, arch: str = "sm_90") -> tuple[str, bytes]:
    ptx = compile_to_ptx(ir, arch)
    return ptx, ptx_to_cubin(ptx, arch)


@needs_nvjitlink
def test_gelu_ptx_is_vectorized_and_links() -> None:
    ptx, cubin = _cubin(lower_to_nvptx(emit_kernel(fusion_of(gelu("6,512,4096")))))
    assert cubin[:4] == b"\x7fELF"
    assert ".target sm_90" in ptx and ".visible .entry loop_multiply_fusion(" in ptx
    assert re.search(r"ld\.global\.nc\.v(2\.b32|4\.b16)", ptx)
    assert re.search(r"st\.global\.v(2\.b32|4\.b16)", ptx)
    assert ".local" not in ptx  # the vector lanes are unrolled, not spilled to the stack
    assert "%tid.x" in ptx and "%ctaid.x" in ptx


@needs_nvjitlink
def test_barriers_and_shuffles_link() -> None:
    ptx, cubin = _cubin(lower_to_nvptx(reduction_kernel("f32"), use_libdevice=False))
    assert "bar.sync" in ptx and "shfl.sync.down.b32" in ptx and ".shared" in ptx
    assert cubin[:4] == b"\x7fELF"


@needs_nvjitlink
@pytest.mark.parametrize("use_libdevice", [False, True])
def test_math_links_with_and_without_libdevice(use_libdevice: bool) -> None:
    if use_libdevice and find_libdevice() is None:
        pytest.skip("libdevice.10.bc not found on this machine")
    ir = lower_to_nvptx(emit_kernel(fusion_of(MATH_FUSION)), use_libdevice=use_libdevice)
    assert ("@__nv_tanhf" in ir) == use_libdevice and ("@__hlo_tanh_f32" in ir) != use_libdevice
    ptx, cubin = _cubin(ir)
    assert "__nv_" not in ptx and cubin[:4] == b"\x7fELF"


@needs_nvjitlink
def test_other_architectures() -> None:
    ir = lower_to_nvptx(emit_kernel(fusion_of("f { p = f32[64] parameter(0) ROOT n = f32[64] negate(p) }")))
    ptx, cubin = _cubin(ir, "sm_80")
    assert ".target sm_80" in ptx and cubin[:4] == b"\x7fELF"


def test_bad_inputs_raise_ptx_errors() -> None:
    with pytest.raises(PtxError, match="bad GPU architecture 'gfx90a'"):
        compile_to_ptx("", "gfx90a")
    with pytest.raises(PtxError, match="invalid NVPTX LLVM IR"):
        compile_to_ptx("define void @k( {")


@needs_nvjitlink
def test_nvjitlink_rejects_bad_ptx_with_its_log() -> None:
    with pytest.raises(PtxError, match="nvJitLink rejected the PTX for sm_90"):
        ptx_to_cubin(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus; }\n")


@needs_nvjitlink
def test_validation_without_optimization_rejects_what_the_optimizing_link_rejects() -> None:
    # hlo-codegen checks every kernel with `validate_ptx` (ptxas at -O0): bad syntax, an
    # instruction the architecture lacks, and more shared memory than a block may have all fail
    head = ".version 8.0\n.target {arch}\n.address_size 64\n"
    bad = {
        "sm_90": ".visible .entry k() { bogus; }\n",
        "sm_80": ".visible .entry k() { .reg .b32 %r<2>; mov.u32 %r1, %cluster_ctarank; ret; }\n",
        "sm_90 ": ".shared .align 4 .b8 s[300000];\n.visible .entry k() { .reg .b32 %r<2>; "
                  "mov.u32 %r1, s; st.shared.u32 [%r1], %r1; ret; }\n",
    }
    for arch, body in bad.items():
        ptx = head.format(arch=arch.strip()) + body
        with pytest.raises(PtxError, match="nvJitLink rejected"):
            ptx_to_cubin(ptx, arch.strip())
        with pytest.raises(PtxError, match="nvJitLink rejected"):
            validate_ptx(ptx, arch.strip())
    good = lower_to_nvptx(emit_kernel(fusion_of("f { p = f32[64] parameter(0) ROOT n = f32[64] negate(p) }")))
    validate_ptx(compile_to_ptx(good))
