"""rng-bit-generator: Random123 known answers for the two block functions, and bit-exactness with
XLA:CPU (which expands the op with RngBitGeneratorExpander) for both algorithms and several shapes."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.interpreter import evaluate
from hlo_common.interpreter.rng import philox4x32, threefry2x32
from hlo_common.hlo.parser import parse_module


def _u32(*values):
    return [np.array([v], np.uint32) for v in values]


# Known-answer vectors published with Random123 (Salmon et al., SC'11), kat_vectors file.
@pytest.mark.parametrize("ctr, key, expected", [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
])
def test_threefry2x32_known_answers(ctr, key, expected):
    out = threefry2x32(*_u32(*ctr), *key)
    assert tuple(int(v[0]) for v in out) == expected


@pytest.mark.parametrize("ctr, key, expected", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox4x32_known_answers(ctr, key, expected):
    out = philox4x32(_u32(*ctr), *key)
    assert tuple(int(v[0]) for v in out) == expected


_CASES = [
    ("rng_three_fry", "u32[]", "u64[2]"), ("rng_three_fry", "u32[3,5]", "u64[2]"),
    ("rng_three_fry", "u32[4,6]", "u64[2]"), ("rng_three_fry", "u64[2,3]", "u64[2]"),
    ("rng_three_fry", "u8[9]", "u64[2]"), ("rng_philox", "u32[7]", "u64[2]"),
    ("rng_philox", "u64[5]", "u64[3]"), ("rng_philox", "u16[3,3]", "u64[3]"),
    ("rng_default", "u32[1,3,1]", "u64[2]"),
]


def _module(algorithm: str, data: str, state: str) -> str:
    return (f"HloModule m\nENTRY e {{ s = {state} parameter(0)\n"
            f"  ROOT r = ({state}, {data}) rng-bit-generator(s), algorithm={algorithm} }}")


def test_rng_bit_generator_threefry_is_a_counter_mode_of_the_block_function():
    # A 64-bit output needs no split: element i is the block function of counter state[1] + i.
    state = np.array([0x0123456789ABCDEF, 5], np.uint64)
    new_state, bits = evaluate(parse_module(_module("rng_three_fry", "u64[3]", "u64[2]")), [state])
    key = int(state[0])
    for i in range(3):
        ctr = 5 + i
        lo, hi = threefry2x32(*_u32(ctr & 0xFFFFFFFF, ctr >> 32), key & 0xFFFFFFFF, key >> 32)
        assert int(bits[i]) == int(lo[0]) | (int(hi[0]) << 32)
    assert new_state.tolist() == [key, 8]


@pytest.mark.parametrize("algorithm, data, state", _CASES)
def test_rng_bit_generator_bit_exact_with_xla_cpu(algorithm, data, state):
    pytest.importorskip("jax")
    from hlo_run.xla_cpu import XlaCpuExecutable

    text = _module(algorithm, data, state)
    n = int(state[4])
    seed = np.array([0x123456789ABCDEF0, 0xFFFFFFFFFFFFFFFE, 7][:n], np.uint64)
    want = XlaCpuExecutable.compile(text).run([seed])
    got = evaluate(parse_module(text), [seed])
    for w, g in zip(want, got):
        assert w.dtype == g.dtype
        np.testing.assert_array_equal(w, g)
