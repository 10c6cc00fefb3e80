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
    real = kernel_backend._ptx

    def ptx(llvm_ir, arch):
        if "exponential" in llvm_ir:  # the first kernel fails last
            time.sleep(0.3 if threading.current_thread() is not threading.main_thread() else 0)
            raise PtxError("the first kernel's PTX is rejected")
        if "negate" in llvm_ir:
            raise PtxError("the last kernel's PTX is rejected")
        return real(llvm_ir, arch)

    monkeypatch.setattr(kernel_backend, "_ptx", ptx)
    message = error(4)
    assert message == error(1)
    assert "the first kernel's PTX is rejected" in message and "exponential" in message


def test_a_kernel_failing_on_a_thread_comes_before_a_later_emission_failure(monkeypatch):
    real_ptx, real_emitter = kernel_backend._ptx, kernel_backend.fusion_emitter

    def ptx(llvm_ir, arch):
        if "exponential" in llvm_ir:
            time.sleep(0.2 if threading.current_thread() is not threading.main_thread() else 0)
            raise PtxError("the first kernel's PTX is rejected")
        return real_ptx(llvm_ir, arch)

    def emitter(fusion, device):
        if "negate" in fusion.name:
            raise PtxError("the last fusion cannot be emitted")
        return real_emitter(fusion, device)

    monkeypatch.setattr(kernel_backend, "_ptx", ptx)
    monkeypatch.setattr(kernel_backend, "fusion_emitter", emitter)
    message = error(4)
    assert message == error(1) and "the first kernel's PTX is rejected" in message


def test_a_kernel_failing_on_a_thread_comes_before_a_later_error_of_the_thunk_emitter(monkeypatch):
    real_ptx, real_compile = kernel_backend._ptx, kernel_backend.EmitterBackend.compile

    def ptx(llvm_ir, arch):
        if "exponential" in llvm_ir:
            time.sleep(0.2 if threading.current_thread() is not threading.main_thread() else 0)
            raise PtxError("the first kernel's PTX is rejected")
        return real_ptx(llvm_ir, arch)

    def compile(self, fusion, args, unique_name):  # an error outside the kernel backend's own
        if "negate" in fusion.name:
            raise HloError("the thunk emitter refuses the last fusion")
        return real_compile(self, fusion, args, unique_name)

    monkeypatch.setattr(kernel_backend, "_ptx", ptx)
    monkeypatch.setattr(kernel_backend.EmitterBackend, "compile", compile)
    message = error(4, HloError)
    assert message == error(1, HloError) and "the first kernel's PTX is rejected" in message
