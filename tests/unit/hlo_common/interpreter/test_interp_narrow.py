"""bf16 chains computed in f32 (the interpreter's elementwise regions) against rounding after every op.

`narrow.round_bf16_in_place` must be ml_dtypes' f32 -> bf16 conversion bit for bit, both through
the compiled loop (`narrow_jit`) and through numpy's passes (every bit pattern in the slow test;
random patterns and the special ones here), and a region of bf16 ops (kernels on wide values,
handlers on narrowed ones, in-place writes into dead temporaries) must give exactly what op-by-op
evaluation gives, whatever the number of threads (slabs made small so a region has several).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_common.interpreter import evaluate, narrow, narrow_jit, parallel, region_kernels, regions
from hlo_common.hlo.parser import parse_module

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(2024)
SPECIAL_BITS = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  # zeros, infinities
    0x7FC00000, 0xFFC00000, 0x7F800001, 0x7F810000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FBFFFFF, 0xFF808000,  # NaNs
    0x00000001, 0x00008000, 0x00018000, 0x0000FFFF, 0x007FFFFF, 0x807F8000, 0x00807FFF,  # subnormals
    0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0xBF808000, 0xBF818000,  # ties and near ties
    0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7F8000, 0x7F7EFFFF,  # the largest values, overflow
]


@pytest.fixture(autouse=True)
def _small_slabs(monkeypatch):
    monkeypatch.setattr(regions, "CHUNK_ELEMENTS", 1 << 16)  # 512 x 512 values: four slabs


@pytest.fixture(params=["compiled", "numpy"])
def rounding(request, monkeypatch):
    """Which implementation `narrow.round_bf16_in_place` uses."""
    if request.param == "numpy":
        monkeypatch.setattr(narrow, "JIT_MIN_ELEMENTS", 1 << 62)
    else:
        assert narrow_jit.available()  # llvmlite is a dependency: the compiled loop must work
        monkeypatch.setattr(narrow, "JIT_MIN_ELEMENTS", 1)
    return request.param


def _reference_bits(f: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # NaN -> bf16 warns
        return f.astype(BF16).view(np.uint16)


def _fast_bits(f: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        rounded = narrow.round_bf16_in_place(f.copy())
    assert not (rounded.view(np.uint32) & 0xFFFF).any()
    return (rounded.view(np.uint32) >> 16).astype(np.uint16)


def test_rounding_matches_ml_dtypes_on_special_and_random_bit_patterns(rounding):
    special = np.array(SPECIAL_BITS, np.uint32)
    finite = RNG.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    finite = finite[(finite & 0x7F800000) != 0x7F800000]  # numpy: an array with a NaN takes the slow path
    ties = (finite & 0xFFFF0000) | 0x8000
    for bits in (special, finite, ties, np.concatenate([finite, special])):
        f = bits.view(np.float32)
        np.testing.assert_array_equal(_fast_bits(f), _reference_bits(f))


def test_rounding_without_nan_takes_the_bit_path_and_overflows_to_infinity(rounding):
    f = np.array([3.4e38, -3.4e38, 1e-45, 1.00390625, 1.01171875], np.float32)
    assert narrow.round_bf16_in_place(f).tolist() == [np.inf, -np.inf, 0.0, 1.0, 1.015625]


def test_compiled_narrowing_writes_rounded_or_exact_upper_halves():
    special = np.array(SPECIAL_BITS, np.uint32)
    bits = np.concatenate([special, RNG.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32)])
    f = bits.view(np.float32)
    out = np.empty(f.shape, np.uint16)
    assert narrow_jit.round_into(out, f)
    np.testing.assert_array_equal(out, _reference_bits(f))
    assert narrow_jit.narrow_into(out, f)  # exact: NaN payloads and the sign kept
    np.testing.assert_array_equal(out, (bits >> 16).astype(np.uint16))
    wide = np.empty(f.shape, np.float32)
    assert narrow_jit.widen_into(wide, out.view(BF16))
    np.testing.assert_array_equal(wide.view(np.uint32), bits & 0xFFFF0000)


def test_compiled_code_declines_strided_arrays_and_numpy_rounds_them():
    bits = np.array(SPECIAL_BITS * 300, np.uint32)
    f = bits.view(np.float32)
    strided = f.copy()[::2]
    assert not narrow_jit.round_in_place(strided)
    assert not narrow_jit.round_into(np.empty(strided.shape, np.uint16), strided)
    with np.errstate(invalid="ignore"):  # NaN -> f64 warns
        assert not narrow_jit.round_in_place(f.astype(np.float64))
    np.testing.assert_array_equal(_fast_bits(strided), _reference_bits(f[::2]))


@pytest.mark.parametrize("lookup", [True, False])
@pytest.mark.parametrize("op", sorted(region_kernels.TABLED))
def test_tabled_unary_op_equals_its_handler_on_every_bf16_value(monkeypatch, op, lookup):
    """A table kernel (or its fallback: the function, then rounding) gives each bf16 value what the
    handler gives it, the values shuffled so that each sits elsewhere than when the table was made."""
    if not lookup:
        monkeypatch.setattr(narrow_jit, "lookup", lambda *_: False)
    x = RNG.permutation(1 << 16).astype(np.uint16).view(BF16)
    module = parse_module(f"HloModule u\nENTRY e {{ p = bf16[65536] parameter(0)\n"
                          f"ROOT r = bf16[65536] {op}(p) }}")
    assert x.size < regions.MIN_ELEMENTS  # evaluate runs the handler
    want = evaluate(module, [x])
    kernel = region_kernels.kernel_for(module.entry.root)
    assert kernel is not None and not kernel.rounds
    with np.errstate(all="ignore"):
        got = kernel.fn([narrow.widen(x)[1:]], None)  # an odd length, one element along
    np.testing.assert_array_equal(narrow.narrow(got).view(np.uint16), want[1:].view(np.uint16))


@pytest.mark.slow
def test_rounding_matches_ml_dtypes_on_every_f32_bit_pattern(rounding):
    step = 1 << 24
    for start in range(0, 1 << 32, step):
        bits = np.arange(start, start + step, dtype=np.uint64).astype(np.uint32)
        f = bits.view(np.float32)
        np.testing.assert_array_equal(_fast_bits(f), _reference_bits(f), err_msg=f"from {start:#x}")


def test_widen_and_narrow_move_the_bits_exactly():
    bits = RNG.integers(0, 1 << 16, 1 << 16, dtype=np.uint32).astype(np.uint16)
    x = bits.view(BF16)
    wide = narrow.widen(x)
    assert wide.dtype == np.float32
    np.testing.assert_array_equal(wide.view(np.uint32) >> 16, bits)  # NaN payloads kept
    np.testing.assert_array_equal(narrow.narrow(wide).view(np.uint16), bits)


CHAIN = """
HloModule chain
ENTRY e {
  x = bf16[512,512] parameter(0)
  y = bf16[512,512] parameter(1)
  c = bf16[] constant(0.044708)
  cb = bf16[512,512] broadcast(c), dimensions={}
  row = bf16[512] parameter(2)
  rb = bf16[512,512] broadcast(row), dimensions={1}
  a = bf16[512,512] multiply(x, y)
  b = bf16[512,512] add(a, cb)
  d = bf16[512,512] divide(b, rb)
  t = bf16[512,512] tanh(d)
  s = bf16[512,512] subtract(t, x)
  e = bf16[512,512] exponential(s)
  r = bf16[512,512] rsqrt(e)
  mx = bf16[512,512] maximum(r, y)
  mn = bf16[512,512] minimum(mx, a)
  n = bf16[512,512] negate(mn)
  ab = bf16[512,512] abs(n)
  cl = bf16[512,512] clamp(x, ab, y)
  f = f32[512,512] convert(cl)
  f2 = f32[512,512] multiply(f, f)
  g = bf16[512,512] convert(f2)
  p = pred[512,512] compare(g, x), direction=GT
  sel = bf16[512,512] select(p, g, s)
  pw = bf16[512,512] power(sel, y)
  bits = s16[512,512] bitcast-convert(pw)
  back = bf16[512,512] bitcast-convert(bits)
  last = bf16[512,512] multiply(back, x)
  ROOT out = (bf16[512,512], bf16[512,512], f32[512,512], pred[512,512]) tuple(last, a, f2, p)
}
"""


def _chain_inputs():
    """Random bf16 values with the special ones mixed in: NaNs with payloads, infinities, signed
    zeros, subnormals and values whose products are ties."""
    special = np.array(SPECIAL_BITS, np.uint32) >> 16
    x_bits = RNG.integers(0, 1 << 16, (512, 512), dtype=np.uint32)
    ordinary = RNG.random((512, 512)) < 0.5
    x_bits[ordinary] = RNG.integers(0x3E00, 0x4100, int(ordinary.sum()))  # |x| in [0.125, 8)
    x_bits.ravel()[: special.size * 40] = np.tile(special, 40)
    y = RNG.uniform(-3, 3, (512, 512)).astype(BF16)
    y.view(np.uint16).ravel()[::97] = 0x8001  # a negative subnormal
    row = RNG.uniform(0.5, 2, 512).astype(BF16)
    return [x_bits.astype(np.uint16).view(BF16), y, row]


def _bits(values) -> list[bytes]:
    return [v.tobytes() for v in values]


def test_bf16_region_equals_rounding_after_every_op(monkeypatch, rounding):
    module = parse_module(CHAIN)
    args = _chain_inputs()
    kept = [a.copy() for a in args]
    assert 512 * 512 >= regions.MIN_ELEMENTS
    fast = evaluate(module, args)
    for a, k in zip(args, kept):  # no input was written into
        np.testing.assert_array_equal(a.view(np.uint16), k.view(np.uint16))
    monkeypatch.setattr(regions, "MIN_ELEMENTS", 1 << 62)  # no regions: each op rounds its array
    assert _bits(fast) == _bits(evaluate(module, args))


@pytest.mark.parametrize("threads", ["1", "3"])
def test_results_do_not_depend_on_the_thread_count(monkeypatch, threads):
    module = parse_module(CHAIN)
    args = _chain_inputs()
    monkeypatch.setenv(parallel.ENV_THREADS, "2")
    want = evaluate(module, args)
    monkeypatch.setenv(parallel.ENV_THREADS, threads)
    assert parallel.thread_count() == int(threads)
    assert _bits(evaluate(module, args)) == _bits(want)


def test_an_error_in_a_worker_thread_names_the_instruction(monkeypatch):
    monkeypatch.setenv(parallel.ENV_THREADS, "2")
    module = parse_module(CHAIN)

    def boom(*_):
        raise ValueError("boom")

    from hlo_common.interpreter.registry import HANDLERS

    monkeypatch.setitem(HANDLERS, "power", boom)
    with pytest.raises(Exception, match=r"%pw \(power\).*boom"):
        evaluate(module, _chain_inputs())


SOFTMAX = """
HloModule sm
mx { a = bf16[] parameter(0) b = bf16[] parameter(1) ROOT m = bf16[] maximum(a, b) }
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  x = bf16[512,512] parameter(0)
  ninf = bf16[] constant(-inf)
  m = bf16[512] reduce(x, ninf), dimensions={1}, to_apply=mx
  mb = bf16[512,512] broadcast(m), dimensions={0}
  d = bf16[512,512] subtract(x, mb)
  e = bf16[512,512] exponential(d)
  f = f32[512,512] convert(e)
  z = f32[] constant(0)
  s = f32[512] reduce(f, z), dimensions={1}, to_apply=add
  sb = bf16[512] convert(s)
  b = bf16[512,512] broadcast(sb), dimensions={0}
  ROOT q = bf16[512,512] divide(e, b)%s
}
"""


@pytest.mark.parametrize("handler_reads", [False, True])
def test_a_bf16_value_between_regions_stays_f32_only_for_kernels(monkeypatch, handler_reads):
    """exp's value leaves its region as f32 when only the divide's region (a kernel) and the fused
    sum read it; a handler reading it too (a transpose) gets it in bf16. Either way every
    value is the one each op rounding its own array gives."""
    tail = "\n  tr = bf16[512,512] transpose(e), dimensions={1,0}\n  ROOT t = (bf16[512,512], bf16[512,512]) tuple(q, tr)"
    module = parse_module((SOFTMAX % tail).replace("ROOT q", "q") if handler_reads else SOFTMAX % "")
    handed: dict[str, bool] = {}
    hand_wide = regions.Region.hand_wide

    def record(self, ids):
        hand_wide(self, ids)
        handed.update({o.name: h for o, h in zip(self.outputs, self.handed_wide)})

    monkeypatch.setattr(regions.Region, "hand_wide", record)
    x = _chain_inputs()[0]
    fast = evaluate(module, [x])
    assert handed["e"] is (not handler_reads)
    monkeypatch.setattr(regions, "MIN_ELEMENTS", 1 << 62)
    slow = evaluate(module, [x])
    assert _bits(fast if handler_reads else [fast]) == _bits(slow if handler_reads else [slow])
