"""hlo-codegen compiles PTX on a pool of threads (`kernel_backend.EmitterBackend(jobs=N)`): the
manifest is the one a single thread makes, and the error is the first failing kernel's."""

from __future__ import annotations

import threading
import time

import pytest

from hlo_codegen import kernel_backend
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_codegen.kernel_backend import KernelEmissionError
from hlo_codegen.ptx import PtxError
from hlo_common.errors import HloError
from hlo_common.hlo.parser import parse_module

# four kernels: exp, tanh (libdevice calls), a row reduction (shared memory), a negate
FOUR = """HloModule four

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[64,256]) -> (f32[64], f32[64,256]) {
  %x = f32[64,256]{1,0} parameter(0)
  %e = f32[64,256]{1,0} exponential(%x)
  %t = f32[64,256]{1,0} tanh(%e)
  %zero = f32[] constant(0)
  %r = f32[64]{0} reduce(%t, %zero), dimensions={1}, to_apply=%add
  %n = f32[64,256]{1,0} negate(%t)
  ROOT %out = (f32[64], f32[64,256]) tuple(%r, %n)
}
"""


def manifest(jobs: int) -> bytes:
    result = compile_module(parse_module(FOUR), CompileOptions(target="cuda", jobs=jobs))
    assert len(result.kernels) == 4
    return result.manifest.to_bytes()


def test_threads_give_the_manifest_one_thread_gives():
    assert manifest(4) == manifest(1)


def error(jobs: int, kind=KernelEmissionError) -> str:
    with pytest.raises(kind) as info:
        compile_module(parse_module(FOUR), CompileOptions(target="cuda", jobs=jobs))
    return str(info.value)


def test_the_first_failing_kernel_is_reported_though_a_later_one_fails_sooner(monkeypatch):
    real = kernel_backend._ptx_text

    def ptx(llvm_ir, arch):
        if "exponential" in llvm_ir:  # the first kernel fails last
            time.sleep(0.3 if threading.current_thread() is not threading.main_thread() else 0)
            raise PtxError("the first kernel's PTX is rejected")
        if "negate" in llvm_ir:
            raise PtxError("the last kernel's PTX is rejected")
        return real(llvm_ir, arch)

    monkeypatch.setattr(kernel_backend, "_ptx_text", ptx)
    message = error(4)
    assert message == error(1)
    assert "the first kernel's PTX is rejected" in message and "exponential" in message


def test_a_kernel_failing_on_a_thread_comes_before_a_later_emission_failure(monkeypatch):
    real_ptx, real_emitter = kernel_backend._ptx_text, kernel_backend.fusion_emitter

    def ptx(llvm_ir, arch):
        if "exponential" in llvm_ir:
            time.sleep(0.2 if threading.current_thread() is not threading.main_thread() else 0)
            raise PtxError("the first kernel's PTX is rejected")
        return real_ptx(llvm_ir, arch)

    def emitter(fusion, device):
        if "negate" in fusion.name:
            raise PtxError("the last fusion cannot be emitted")
        return real_emitter(fusion, device)

    monkeypatch.setattr(kernel_backend, "_ptx_text", ptx)
    monkeypatch.setattr(kernel_backend, "fusion_emitter", emitter)
    message = error(4)
    assert message == error(1) and "the first kernel's PTX is rejected" in message


def test_a_kernel_failing_on_a_thread_comes_before_a_later_error_of_the_thunk_emitter(monkeypatch):
    real_ptx, real_compile = kernel_backend._ptx_text, kernel_backend.EmitterBackend.compile

    def ptx(llvm_ir, arch):
        if "exponential" in llvm_ir:
            time.sleep(0.2 if threading.current_thread() is not threading.main_thread() else 0)
            raise PtxError("the first kernel's PTX is rejected")
        return real_ptx(llvm_ir, arch)

    def compile(self, fusion, args, unique_name):  # an error outside the kernel backend's own
        if "negate" in fusion.name:
            raise HloError("the thunk emitter refuses the last fusion")
        return real_compile(self, fusion, args, unique_name)

    monkeypatch.setattr(kernel_backend, "_ptx_text", ptx)
    monkeypatch.setattr(kernel_backend.EmitterBackend, "compile", compile)
    message = error(4, HloError)
    assert message == error(1, HloError) and "the first kernel's PTX is rejected" in message


def _broken_tanh(real):
    def ptx(llvm_ir, arch):
        text = real(llvm_ir, arch)
        return text.replace("ret;", "not_an_instruction;") if "tanh" in llvm_ir else text
    return ptx


def test_a_kernel_nvjitlink_rejects_in_a_checked_batch_is_named_as_alone(monkeypatch):
    # batches of two: the pool threads check the first two kernels together, finish the rest
    monkeypatch.setattr(kernel_backend, "_BATCH", 2)
    monkeypatch.setattr(kernel_backend, "_ptx_text", _broken_tanh(kernel_backend._ptx_text))
    message = error(4)
    assert message == error(1)
    assert "nvJitLink rejected the PTX" in message and "loop_tanh_fusion" in message


def test_one_link_checks_many_kernels_and_names_the_bad_one():
    from hlo_codegen.ptx import validate_ptx, validate_ptx_batch

    result = compile_module(parse_module(FOUR), CompileOptions(target="cuda", jobs=1))
    ptxs = [ck.kernel.ptx for ck in result.kernels.values()]
    assert validate_ptx_batch(ptxs) == [None] * 4
    bad = ptxs[1].replace("ret;", "not_an_instruction;")
    errors = validate_ptx_batch(ptxs[:1] + [bad] + ptxs[2:])
    assert errors[0] is None and errors[2:] == [None, None]
    with pytest.raises(PtxError) as alone:
        validate_ptx(bad)
    assert str(errors[1]) == str(alone.value)
