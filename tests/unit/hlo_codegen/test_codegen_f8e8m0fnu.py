"""f8e8m0fnu (8 exponent bits, no sign, no mantissa: 2**(e - 127), 0xFF NaN, no zero) through
the codegen pipe on the host, bit for bit against ml_dtypes.float8_e8m0fnu: decoding every
byte, rounding f32 / f64 into it (ties up, zero / negative / inf / NaN / overflow to NaN,
doubles through float), and arithmetic computed in f32."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from test_codegen_buffer_sharing import run_host

E8M0 = ml_dtypes.float8_e8m0fnu


def _convert(src: str, dst: str, n: int) -> str:
    return f"HloModule cvt\nENTRY e {{ a = {src}[{n}] parameter(0) ROOT b = {dst}[{n}] convert(a) }}"


@pytest.mark.parametrize("dst,dtype", [("f32", np.float32), ("f64", np.float64)])
def test_decode_every_byte(dst: str, dtype) -> None:
    codes = np.arange(256, dtype=np.uint8).view(E8M0)
    got = np.asarray(run_host(_convert("f8e8m0fnu", dst, 256), [codes]))
    np.testing.assert_array_equal(got, codes.astype(dtype))
    assert got[127] == 1.0 and got[0] == 2.0 ** -127 and np.isnan(got[255])


def _f32_samples() -> np.ndarray:
    rng = np.random.default_rng(0)
    edges = np.array([1.0, 1.5, 2.5, 3.0, 0.75, 0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 2.0 ** 127,
                      1.5 * 2.0 ** 127, 2.0 ** -127, 2.0 ** -128, 1.4 * 2.0 ** -127, 1e-45], np.float32)
    random_bits = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    halves = ((np.arange(1, 255, dtype=np.uint32) << 23) | (1 << 22)).view(np.float32)  # exact ties
    subnormals = (np.arange(0, 1 << 23, 997, dtype=np.uint32) | np.uint32(1 << 22)).view(np.float32)
    return np.concatenate([edges, random_bits, halves, subnormals])


def test_round_f32_like_ml_dtypes() -> None:
    x = _f32_samples()
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(E8M0)
    got = np.asarray(run_host(_convert("f32", "f8e8m0fnu", x.size), [x]))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_round_f64_like_ml_dtypes() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(5000) * np.exp2(rng.integers(-140, 140, 5000))
    x = np.concatenate([x, np.abs(x), [2.0 ** -127 * (1 + 2.0 ** -23), 2.0 ** -1022, 1.5 - 2.0 ** -40]])
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(E8M0)
    got = np.asarray(run_host(_convert("f64", "f8e8m0fnu", x.size), [x]))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_multiply_computes_in_f32() -> None:
    text = """HloModule mul
ENTRY e { a = f8e8m0fnu[64] parameter(0) b = f8e8m0fnu[64] parameter(1)
  ROOT m = f8e8m0fnu[64] multiply(a, b) }"""
    rng = np.random.default_rng(2)
    a, b = (rng.integers(60, 200, 64).astype(np.uint8).view(E8M0) for _ in range(2))
    with np.errstate(over="ignore", invalid="ignore"):
        want = (a.astype(np.float32) * b.astype(np.float32)).astype(E8M0)
    got = np.asarray(run_host(text, [a, b]))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_cuda_ptx_links() -> None:
    from emitter_testlib import nvjitlink_available
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.hlo.parser import parse_module

    if not nvjitlink_available():
        pytest.skip("cuda.bindings (nvJitLink) is not importable")
    for text in (_convert("f32", "f8e8m0fnu", 100), _convert("f8e8m0fnu", "f64", 100)):
        result = compile_module(parse_module(text), CompileOptions(target="cuda"))
        assert all(k.kernel.ptx for k in result.kernels.values())
