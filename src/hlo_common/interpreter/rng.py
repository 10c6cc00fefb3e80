"""Interpreter handlers for random numbers: rng, rng-get-and-update-state, rng-bit-generator.

`rng` draws from the evaluator's seeded generator (deterministic per evaluator, not XLA's stream).
"""

from __future__ import annotations

import numpy as np

from hlo_common.interpreter.arith import down, up
from hlo_common.interpreter.registry import register


@register("rng")
def _rng(instr, operands, ev):
    et = instr.shape.element_type
    dist = str(instr.attrs.get("distribution", "rng_uniform"))
    a, b = operands[0], operands[1]
    gen = ev.rng()
    dims = instr.shape.dims
    if dist == "rng_normal":
        if not et.is_float:
            raise ValueError("rng_normal needs a floating-point type")
        mean, std = float(up(a)), float(up(b))
        return down(gen.standard_normal(size=dims) * std + mean, et)
    if et.is_float:
        lo, hi = float(up(a)), float(up(b))
        vals = down(gen.uniform(lo, hi, size=dims), et)
        # Rounding can reach `hi`; keep the interval half-open as XLA does.
        return np.where(up(vals) >= hi, np.asarray(a), vals).astype(et.np_dtype)
    if et.is_pred:
        return gen.integers(0, 2, size=dims).astype(bool)
    lo, hi = int(a), int(b)
    return gen.integers(lo, max(hi, lo + 1), size=dims).astype(et.np_dtype)


@register("rng-get-and-update-state")
def _rng_get_and_update_state(instr, operands, ev):
    """The current 128-bit state as u64[2] (XLA's shape), then advance it by `delta`."""
    state = ev.rng_state
    ev.rng_state = (state + int(instr.attrs.get("delta", 0))) & ((1 << 128) - 1)
    lo, hi = state & ((1 << 64) - 1), state >> 64
    return np.array([lo, hi], dtype=instr.shape.element_type.np_dtype)


# -- rng-bit-generator: XLA's ThreeFry and Philox bit generators (xla/hlo/builder/lib/prng.cc) ------------

_U32 = np.uint32
_U64 = np.uint64
_MASK32 = np.uint64(0xFFFFFFFF)


def _split64(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = v.astype(_U64)
    return (v & _MASK32).astype(_U32), (v >> _U64(32)).astype(_U32)


def _join64(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(_U64) | (hi.astype(_U64) << _U64(32))


def _rotl32(v: np.ndarray, d: int) -> np.ndarray:
    return (v << _U32(d)) | (v >> _U32(32 - d))


def threefry2x32(x0: np.ndarray, x1: np.ndarray, k0: int, k1: int) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds on uint32 arrays (Salmon et al. 2011), as XLA builds it."""
    rotations = (13, 15, 26, 6, 17, 29, 16, 24)
    ks = (_U32(k0), _U32(k1), _U32(0x1BD11BDA ^ k0 ^ k1))  # x + ks wraps: arrays, no warnings
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for block in range(5):
        for r in rotations[(block % 2) * 4:(block % 2) * 4 + 4]:
            x0 = x0 + x1
            x1 = _rotl32(x1, r) ^ x0
        x0 = x0 + ks[(block + 1) % 3]
        x1 = x1 + _U32((int(ks[(block + 2) % 3]) + block + 1) & 0xFFFFFFFF)
    return x0, x1


def philox4x32(x: list[np.ndarray], k0: int, k1: int) -> list[np.ndarray]:
    """Philox-4x32 with 10 rounds on four uint32 arrays, as XLA builds it."""
    key0, key1 = k0, k1
    for _ in range(10):
        p0 = x[0].astype(_U64) * _U64(0xD2511F53)
        p1 = x[2].astype(_U64) * _U64(0xCD9E8D57)
        x = [
            (p1 >> _U64(32)).astype(_U32) ^ x[1] ^ _U32(key0), (p1 & _MASK32).astype(_U32),
            (p0 >> _U64(32)).astype(_U32) ^ x[3] ^ _U32(key1), (p0 & _MASK32).astype(_U32),
        ]
        key0, key1 = (key0 + 0x9E3779B9) & 0xFFFFFFFF, (key1 + 0xBB67AE85) & 0xFFFFFFFF
    return x


def _split_dim(dims: tuple[int, ...]) -> int:
    """XLA's SplitShapeIntoHalves: the first even dimension, else the (first) largest one."""
    for i, d in enumerate(dims):
        if d % 2 == 0:
            return i
    return max(range(len(dims)), key=lambda i: (dims[i], -i))


def threefry_bits(key: int, counter: int, dims: tuple[int, ...], bits: int) -> tuple[np.ndarray, int]:
    """(random bits as uint32/uint64 shaped `dims`, new counter) for ThreeFry."""
    k0, k1 = key & 0xFFFFFFFF, key >> 32
    if bits == 64:
        n = int(np.prod(dims, dtype=np.int64))
        inputs = np.arange(n, dtype=_U64) + _U64(counter)
        o0, o1 = threefry2x32(*_split64(inputs), k0, k1)
        return _join64(o0, o1).reshape(dims), (counter + n) & (2**64 - 1)
    if not dims:
        o0, _ = threefry2x32(*_split64(np.array([counter], _U64)), k0, k1)
        return o0.reshape(()), (counter + 1) & (2**64 - 1)
    s = _split_dim(dims)
    half = list(dims)
    half[s] = (dims[s] + 1) // 2
    n = int(np.prod(half, dtype=np.int64))
    inputs = np.arange(n, dtype=_U64) + _U64(counter)
    o0, o1 = threefry2x32(*_split64(inputs), k0, k1)
    pair = np.stack([o0.reshape(half), o1.reshape(half)], axis=s + 1)  # interleave along dim s
    full = list(dims)
    full[s] = half[s] * 2
    out = pair.reshape(full)[tuple(slice(0, d) for d in dims)]
    return out, (counter + n) & (2**64 - 1)


def philox_bits(key: int, counter: int, dims: tuple[int, ...], bits: int) -> tuple[np.ndarray, int]:
    """(random bits as uint32/uint64 shaped `dims`, new 128-bit counter) for Philox."""
    n = int(np.prod(dims, dtype=np.int64))
    words = n * 2 if bits == 64 else n
    groups = (words + 3) // 4
    lo, hi = counter & (2**64 - 1), counter >> 64
    idx = np.arange(groups, dtype=_U64)
    c_lo = idx + _U64(lo)
    c_hi = np.where(c_lo < _U64(lo), _U64((hi + 1) & (2**64 - 1)), _U64(hi))
    x = [*_split64(c_lo), *_split64(c_hi)]
    out = philox4x32(x, key & 0xFFFFFFFF, key >> 32)
    if bits == 64:
        b0, b1 = _join64(out[0], out[1]), _join64(out[2], out[3])
        flat = np.stack([b0, b1], axis=1).reshape(-1)[:n]
    else:
        flat = np.stack(out, axis=1).reshape(-1)[:n]
    return flat.reshape(dims), (counter + groups) & (2**128 - 1)


@register("rng-bit-generator")
def _rng_bit_generator(instr, operands, ev):
    """(new state, random bits): XLA's RngBitGeneratorExpander; rng_default is Philox (CPU/GPU)."""
    state = np.asarray(operands[0]).astype(_U64)
    algorithm = str(instr.attrs.get("algorithm", "rng_default"))
    out_shape = instr.shape.tuple_shapes[1]
    et = out_shape.element_type
    bits = 64 if et.bits == 64 else 32
    key = int(state[0])
    new_state = state.copy()
    if algorithm == "rng_three_fry":
        values, counter = threefry_bits(key, int(state[1]), out_shape.dims, bits)
        new_state[1] = counter
    elif algorithm in ("rng_philox", "rng_default"):
        if state.shape[0] >= 3:
            counter = int(state[1]) | (int(state[2]) << 64)
        else:  # the key doubles as the counter's high half
            counter = int(state[1]) | (int(state[0]) << 64)
        values, counter = philox_bits(key, counter, out_shape.dims, bits)
        new_state[1] = counter & (2**64 - 1)
        if state.shape[0] >= 3:
            new_state[2] = counter >> 64
    else:
        raise ValueError(f"unknown rng-bit-generator algorithm '{algorithm}'")
    if et.bits < 32:
        values = values & _U32((1 << et.bits) - 1)
    unsigned = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[max(et.bits, 8)]
    data = values.astype(unsigned).view(et.np_dtype) if et.bits >= 8 else values.astype(et.np_dtype)
    return (new_state.astype(instr.shape.tuple_shapes[0].element_type.np_dtype), data)
