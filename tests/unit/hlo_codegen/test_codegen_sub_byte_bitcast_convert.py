"""bitcast-convert between a sub-byte type and a wider one, through the codegen pipe on the host:
the narrow side has one extra minor dimension whose element k holds bits [k*bits, (k+1)*bits) of
the wide value (XLA's packing, low bits first), packed `E(n)` layouts or not. Expected numbers
come from numpy bit arithmetic and ml_dtypes, not from the code under test."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from test_codegen_buffer_sharing import run_host


def _module(src: str, dst: str) -> str:
    return f"HloModule bc\nENTRY e {{ a = {src} parameter(0) ROOT b = {dst} bitcast-convert(a) }}"


def _pack(pieces: np.ndarray, bits: int) -> np.ndarray:
    """Unsigned pieces [..., ratio] -> one unsigned integer per row, piece k at bits k*bits."""
    u = pieces.astype(np.uint64) & np.uint64((1 << bits) - 1)
    shifts = np.arange(pieces.shape[-1], dtype=np.uint64) * np.uint64(bits)
    return np.bitwise_or.reduce(u << shifts, axis=-1)


@pytest.mark.parametrize("src_layout", ["", "{1,0:E(4)}"])
def test_s4_pairs_to_s8(src_layout: str) -> None:
    a = np.array([[1, 2], [-1, 7], [-8, 0], [3, -3]], ml_dtypes.int4)
    got = np.asarray(run_host(_module(f"s4[4,2]{src_layout}", "s8[4]"), [a]))
    want = _pack(a.astype(np.int64), 4).astype(np.uint8).view(np.int8)
    assert want[0] == 0x21
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dst", ["s4[5,2]", "s4[5,2]{1,0:E(4)}"])
def test_s8_to_s4_pairs(dst: str) -> None:
    a = np.array([0x21, -1, 0x7f, -128, 0x0e], np.int8)
    got = np.asarray(run_host(_module("s8[5]", dst), [a])).astype(np.int64)
    u = a.view(np.uint8).astype(np.int64)
    nibbles = np.stack([u & 15, u >> 4], axis=-1)
    want = np.where(nibbles >= 8, nibbles - 16, nibbles)  # s4 sign extension
    np.testing.assert_array_equal(got, want)


def test_u2_quads_to_u8_and_back() -> None:
    a = np.random.default_rng(0).integers(0, 4, (6, 4)).astype(ml_dtypes.uint2)
    got = np.asarray(run_host(_module("u2[6,4]", "u8[6]"), [a]))
    np.testing.assert_array_equal(got, _pack(a.astype(np.int64), 2).astype(np.uint8))
    back = np.asarray(run_host(_module("u8[6]", "u2[6,4]"), [got.astype(np.uint8)]))
    np.testing.assert_array_equal(back.astype(np.int64), a.astype(np.int64))


def test_s4_to_s16_and_f4_to_u8() -> None:
    a = np.array([[1, -2, 3, -4], [7, 0, -8, 5]], ml_dtypes.int4)
    got = np.asarray(run_host(_module("s4[2,4]", "s16[2]"), [a]))
    np.testing.assert_array_equal(got, _pack(a.astype(np.int64), 4).astype(np.uint16).view(np.int16))
    f = np.array([[1.0, -2.0], [0.5, 6.0], [0.0, -0.0]], ml_dtypes.float4_e2m1fn)
    got = np.asarray(run_host(_module("f4e2m1fn[3,2]", "u8[3]"), [f]))
    np.testing.assert_array_equal(got, _pack(f.view(np.uint8), 4).astype(np.uint8))


@pytest.mark.parametrize("src,dst", [("s4[4,2]{1,0:E(4)}", "s8[4]"), ("s8[5]", "s4[5,2]"),
                                     ("u8[6]", "u2[6,4]"), ("f4e2m1fn[3,2]", "u8[3]")])
def test_cuda_ptx_links(src: str, dst: str) -> None:
    from emitter_testlib import nvjitlink_available
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.hlo.parser import parse_module

    if not nvjitlink_available():
        pytest.skip("cuda.bindings (nvJitLink) is not importable")
    result = compile_module(parse_module(_module(src, dst)), CompileOptions(target="cuda"))
    assert all(k.kernel.ptx for k in result.kernels.values())
