"""hlo-run's host reads read-only entry arguments in place (hlo_run.argument_borrowing): the
caller's array is the kernel's buffer when its bytes are the parameter's physical layout, and is
copied otherwise; a parameter the program writes (aliased with its output) is always copied, so
the caller's array never changes."""

from __future__ import annotations


import numpy as np

from hlo_common.interpreter.evaluator import evaluate
from hlo_common.hlo.parser import parse_module
from hlo_common.manifest.manifest import load_manifest
from hlo_run.argument_borrowing import read_only_parameters
from hlo_run.backends.host import HostDevice
from hlo_run.manifest_runtime import ManifestExecutable

from codegen_testlib import ElementwiseHostBackend, compile_text  # tests/helpers (conftest)

TWO = """HloModule m
ENTRY e { a = f32[8,16] parameter(0) b = f32[8,16] parameter(1) ROOT r = f32[8,16] subtract(a, b) }"""
ALIASED = """HloModule m, input_output_alias={ {}: (0, {}, must-alias) }
ENTRY e { a = f32[8,16] parameter(0) b = f32[8,16] parameter(1) ROOT r = f32[8,16] subtract(a, b) }"""


def _load(text: str) -> ManifestExecutable:
    result, _ = compile_text(text, backend=ElementwiseHostBackend())
    return ManifestExecutable(load_manifest(result.manifest.to_bytes(), "m.json"), HostDevice())


def _param_alloc(exe: ManifestExecutable, number: int) -> int:
    return next(a.index for a in exe.manifest.allocations if a.parameter_number == number)


def test_read_only_arguments_are_the_buffers_themselves_and_others_are_copied():
    exe = _load(TWO)
    a = np.arange(128, dtype=np.float32).reshape(8, 16)
    b_t = np.ones((16, 8), np.float32).T  # not C-contiguous: copied
    got = exe.run([a, b_t])
    np.testing.assert_array_equal(got, a - 1)
    assert exe.bases[_param_alloc(exe, 0)] == a.ctypes.data
    assert exe.bases[_param_alloc(exe, 1)] != b_t.ctypes.data
    wrong_dtype = a.astype(np.float64)  # converted: copied
    np.testing.assert_array_equal(exe.run([wrong_dtype, a]), np.zeros((8, 16), np.float32))
    assert exe.bases[_param_alloc(exe, 0)] != wrong_dtype.ctypes.data


def test_a_parameter_the_program_writes_is_copied_and_the_argument_kept():
    exe = _load(ALIASED)
    aliased = _param_alloc(exe, 0)
    assert aliased not in read_only_parameters(exe.manifest)
    assert _param_alloc(exe, 1) in read_only_parameters(exe.manifest)
    a = np.full((8, 16), 5.0, np.float32)
    b = np.arange(128, dtype=np.float32).reshape(8, 16)
    got = exe.run([a, b])
    np.testing.assert_array_equal(got, evaluate(parse_module(ALIASED), [a, b]))
    assert (a == 5.0).all()
    assert exe.bases[aliased] != a.ctypes.data
