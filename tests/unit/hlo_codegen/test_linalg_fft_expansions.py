"""cholesky, triangular-solve and fft through the whole pipe: hlo-opt's gpu pipeline expands them
(`cholesky_expander`, `triangular_solve_expander`, `fft_expander`) into while loops and dots,
hlo-codegen compiles the result, and hlo-run's host runtime runs it; results are checked against
numpy (np.linalg / np.fft, independent of our code). For the cuda target every kernel's PTX must
link with nvJitLink (no GPU needed)."""

from __future__ import annotations

import numpy as np
import pytest

from emitter_testlib import nvjitlink_available
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_opt.pipelines import build_gpu_pipeline


def _spd(rng, batch, n):
    m = rng.normal(size=batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def _cases():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 5, 5)) + 5 * np.eye(5), rng.normal(size=(2, 3, 5))
    x = rng.normal(size=(3, 9))
    z = rng.normal(size=(2, 4, 6)) + 1j * rng.normal(size=(2, 4, 6))
    h = np.fft.rfft(rng.normal(size=(3, 8)))
    s = _spd(rng, (2,), 6)
    upper_want = np.swapaxes(np.linalg.cholesky(s), -1, -2)
    return {
        "cholesky_upper": ("""ENTRY e { p = f32[2,6,6] parameter(0)
            ROOT c = f32[2,6,6] cholesky(p), lower=false }""", [s.astype(np.float32)], upper_want),
        "triangular_solve_right_upper_transpose": ("""ENTRY e { a = f32[2,5,5] parameter(0)
            b = f32[2,3,5] parameter(1)
            ROOT x = f32[2,3,5] triangular-solve(a, b), left_side=false, lower=false,
              transpose_a=TRANSPOSE }""",
            [a.astype(np.float32), b.astype(np.float32)],
            np.swapaxes(np.linalg.solve(np.triu(a), np.swapaxes(b, -1, -2)), -1, -2)),
        "rfft": ("""ENTRY e { x = f32[3,9] parameter(0)
            ROOT y = c64[3,5] fft(x), fft_type=RFFT, fft_length={9} }""",
            [x.astype(np.float32)], np.fft.rfft(x)),
        "fft_2d": ("""ENTRY e { x = c128[2,4,6] parameter(0)
            ROOT y = c128[2,4,6] fft(x), fft_type=FFT, fft_length={4,6} }""", [z], np.fft.fft2(z)),
        "ifft": ("""ENTRY e { x = c64[2,4,6] parameter(0)
            ROOT y = c64[2,4,6] fft(x), fft_type=IFFT, fft_length={6} }""",
            [z.astype(np.complex64)], np.fft.ifft(z)),
        "irfft": ("""ENTRY e { x = c64[3,5] parameter(0)
            ROOT y = f32[3,8] fft(x), fft_type=IRFFT, fft_length={8} }""", [h.astype(np.complex64)],
            np.fft.irfft(h, 8)),
    }


CASES = _cases()


def _optimized(text: str):
    module = parse_module("HloModule m\n" + text)
    build_gpu_pipeline().run_with(module, RunOptions())
    assert not any(i.opcode in ("cholesky", "triangular-solve", "fft")
                   for c in module.computations for i in c.instructions)
    return module


@pytest.mark.parametrize("name", sorted(CASES))
def test_host_pipe_matches_numpy(name):
    from hlo_run.backends.host import HostDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    text, args, want = CASES[name]
    result = compile_module(_optimized(text), CompileOptions(target="host"))
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    got = np.asarray(ManifestExecutable(manifest, HostDevice()).run(args))
    tol = 1e-9 if got.dtype in (np.float64, np.complex128) else 2e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.skipif(not nvjitlink_available(), reason="nvJitLink not installed")
@pytest.mark.parametrize("name", ["cholesky_upper", "triangular_solve_right_upper_transpose", "rfft",
                                  "fft_2d"])
def test_cuda_ptx_links(name):
    from hlo_codegen.ptx import ptx_to_cubin

    result = compile_module(_optimized(CASES[name][0]), CompileOptions(target="cuda"))
    kernels = load_manifest(result.manifest.to_bytes(), "m.json").kernels
    assert kernels
    for kernel in kernels.values():
        assert ptx_to_cubin(kernel.ptx)
