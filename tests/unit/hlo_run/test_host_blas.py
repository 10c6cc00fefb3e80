"""The host's own f32 GEMM and direct convolution (hlo_run.host_blas), against float64 references:
partial tiles, strided operands, K blocks, every window option the convolution takes, and the
same bits with one thread as with several (the split never changes a sum's order)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hlo_run.host_blas import conv_channels_last, sgemm, sgemm_batched
from hlo_run.host_blas_ir import KC

RNG = np.random.default_rng(3)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _close(got: np.ndarray, want: np.ndarray, k: int) -> None:
    """An f32 sum of k products of standard normals: off by rounding only (a wrong index is off by ~1)."""
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * (k + 1))


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (5, 3, 7), (13, 33, 31), (12, 32, 32), (25, 2 * KC + 5, 65),
                                     (200, 17, 3), (97, 300, 130), (50, 2 * KC + 7, 128)])
def test_sgemm_matches_float64(m, k, n):
    a, b = _rand(m, k), _rand(k, n)
    out = np.full((m, n), np.nan, np.float32)
    sgemm(a, b, out)
    _close(out, a.astype(np.float64) @ b, k)


@pytest.mark.parametrize("k, n", [(9, 16), (KC + 3, 37), (2 * KC + 1, 100)])
def test_scaled_and_biased_sums_in_whole_and_partial_vectors(k, n):
    """alpha and bias on every column: whole vectors load the bias and the K blocks' partial sums
    and store C plainly, a partial vector masked; a lane off by one would take a neighbour's bias.
    The output's next row starts right after n: a store past it would show as a wrong value."""
    m = 13
    a, b, bias = _rand(m, k), _rand(k, n), _rand(n)
    out = np.full((m, n), np.nan, np.float32)
    sgemm_batched(a[None], b[None], out[None], alpha=0.25, bias=bias)
    _close(out, (a.astype(np.float64) @ b) * 0.25 + bias, k)


def test_sgemm_reads_strided_operands_and_writes_a_strided_view():
    a, b = _rand(40, 70)[:, ::2], _rand(50, 35).T  # a: column stride 2; b: transposed
    big = np.full((60, 80), -1.0, np.float32)
    out = big[5:45, 10:60]  # rows 80 floats apart
    sgemm(a, b, out)
    _close(out, a.astype(np.float64) @ b, 35)
    assert (big[:5] == -1).all() and (big[:, :10] == -1).all() and (big[:, 60:] == -1).all()
    with pytest.raises(ValueError, match="shapes"):
        sgemm(a, b, big[:40, :49])


def test_sgemm_of_empty_dims():
    out = np.full((3, 4), 7.0, np.float32)
    sgemm(np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32), out)
    assert (out == 0).all()
    sgemm(np.zeros((0, 5), np.float32), np.zeros((5, 4), np.float32), np.zeros((0, 4), np.float32))


@pytest.mark.parametrize("k, n", [(300, 90), (2 * KC + 7, 128)])  # B packed on one thread; on several
def test_sgemm_same_bits_on_one_and_many_threads(k, n):
    a, b = _rand(1000, k), _rand(k, n)
    one, many = np.empty((1000, n), np.float32), np.empty((1000, n), np.float32)
    sgemm(a, b, one, threads=1)
    sgemm(a, b, many, threads=4)
    assert np.array_equal(one, many)


def test_sgemm_batched_splits_every_matrix_the_same_on_any_thread_count():
    """A batch of products split into row tiles of all matrices at once: each matrix equals its own
    product (a tile range that crosses from one matrix into the next must not mix them), whatever
    the thread count; a strided batch (every other matrix of a stack) reads and writes in place."""
    a, b = _rand(6, 37, 20), _rand(6, 20, 45)
    big = np.full((6, 37, 50), -1.0, np.float32)
    one = np.empty((3, 37, 45), np.float32)
    sgemm_batched(a[::2], b[::2], one, threads=1)
    sgemm_batched(a[::2], b[::2], big[::2, :, :45], threads=4)
    for i in range(3):
        _close(one[i], a[2 * i].astype(np.float64) @ b[2 * i], 20)
    assert np.array_equal(big[::2, :, :45], one)
    assert (big[1::2] == -1).all() and (big[:, :, 45:] == -1).all()


def _conv_reference(x, w, strides, dilations):
    """Direct sum over the window, float64: x [N, S..., C] already padded, w [K..., C, O]."""
    nsp = x.ndim - 2
    spans = [(k - 1) * d + 1 for k, d in zip(w.shape[:nsp], dilations)]
    out_sp = [(s - span) // st + 1 for s, span, st in zip(x.shape[1:-1], spans, strides)]
    out = np.zeros((x.shape[0], *out_sp, w.shape[-1]))
    for tap in itertools.product(*(range(k) for k in w.shape[:nsp])):
        sl = tuple(slice(t * d, t * d + (o - 1) * st + 1, st)
                   for t, d, o, st in zip(tap, dilations, out_sp, strides))
        out += np.einsum("n...c,co->n...o", x[(slice(None),) + sl].astype(np.float64), w[tap])
    return out


@pytest.mark.parametrize("x_shape, w_shape, strides, dilations", [
    ((2, 10, 10, 8), (3, 3, 8, 16), (1, 1), (1, 1)),
    ((2, 11, 9, 5), (3, 2, 5, 40), (2, 1), (1, 2)),  # odd sizes, partial tiles both ways
    ((3, 30, 7), (5, 7, 33), (3,), (2,)),  # 1-d
    ((1, 6, 5, 4, 3), (2, 2, 2, 3, 17), (1, 2, 1), (2, 1, 1)),  # 3-d
    ((4, 3), (3, 20), (), ()),  # no spatial dims
])
def test_direct_convolution_matches_float64(x_shape, w_shape, strides, dilations):
    x, w = _rand(*x_shape), _rand(*w_shape)
    want = _conv_reference(x, w, strides, dilations)
    out = np.full(want.shape, np.nan, np.float32)
    conv_channels_last(x, w, strides, dilations, out)
    _close(out, want, int(np.prod(w_shape[:-1])))
    one = np.empty_like(out)
    conv_channels_last(x, w, strides, dilations, one, threads=1)
    assert np.array_equal(one, out)


@pytest.mark.parametrize("panels", [3, 9])
@pytest.mark.parametrize("bf16", [False, True])
def test_the_jit_packs_b_as_numpy_packs_it(panels, bf16):
    """The JIT's `pack` (rows contiguous, n a multiple of NR), K block by K block on two threads,
    lays B out as pack_panels does, from a strided stack (rows wider than n, a batch of
    transposed order), f32 or bf16 (widened); panels a group at a time, then one by one."""
    import ml_dtypes

    from hlo_run.host_blas import _kernels, _pack_all, pack_panels

    nr = _kernels()[1]
    k, n = KC + 37, panels * nr
    wide = np.random.default_rng(3).standard_normal((2, 3, k, n + 5)).astype(np.float32)
    if bf16:
        wide = wide.astype(ml_dtypes.bfloat16)
    b = wide[..., :n].transpose(1, 0, 2, 3)  # [3, 2, k, n]: batch strides out of order, rows n + 5 apart
    per = k * n
    got = _pack_all(b, nr, per, threads=2)
    want = np.concatenate([pack_panels(np.ascontiguousarray(b[i, j], np.float32), nr)
                           for i in range(3) for j in range(2)])
    assert np.array_equal(got, want)


@pytest.mark.parametrize("n", [64, 75])
def test_the_jit_packs_b_given_by_its_columns_as_numpy_packs_it(n):
    """B = K^T (each column's k floats contiguous, an attention product's transposed operand):
    the JIT's `pack_t` lays it out as pack_panels does, zeros past n (75: a partial panel), and
    the product through it matches float64."""
    from hlo_run.host_blas import _kernels, _pack_all, pack_panels

    nr = _kernels()[1]
    k = 40
    keys = np.random.default_rng(5).standard_normal((3, 2, n, k + 3)).astype(np.float32)
    b = keys[..., :k].swapaxes(-1, -2)  # [3, 2, k, n], columns k + 3 floats apart
    per = k * -(-n // nr) * nr
    got = _pack_all(b, nr, per, threads=2)
    want = np.concatenate([pack_panels(np.ascontiguousarray(b[i, j]), nr)
                           for i in range(3) for j in range(2)])
    assert np.array_equal(got, want)
    a = np.random.default_rng(6).standard_normal((3, 2, 50, k)).astype(np.float32)
    out = np.empty((3, 2, 50, n), np.float32)
    sgemm_batched(a, b, out)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("n", [96, 100])
def test_streaming_stores_give_the_same_bits(n, monkeypatch):
    """A product the GEMM writes with streaming stores (made to count as larger than the cache;
    rows 112 floats apart): the same bits as plain stores, whole vectors streamed and, for n = 100,
    a partial last one masked; an output whose rows are not on 64-byte lines (a view one float in)
    is never streamed, and still right."""
    from hlo_run import host_blas

    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 200, 300)).astype(np.float32)
    b = rng.standard_normal((2, 300, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    plain = np.empty((2, 200, n), np.float32)
    sgemm_batched(a, b, plain, alpha=0.5, bias=bias)
    monkeypatch.setattr(host_blas, "_last_level_cache", lambda: 1024)
    raw = np.full(2 * 200 * 112 + 16, np.nan, np.float32)
    start = (-raw.ctypes.data % 64) // 4  # the first float on a 64-byte line
    streamed = raw[start:start + 2 * 200 * 112].reshape(2, 200, 112)[..., :n]
    assert host_blas._streams(streamed, 112, host_blas._bases(streamed))
    sgemm_batched(a, b, streamed, alpha=0.5, bias=bias, threads=2)
    assert np.array_equal(streamed, plain)
    shifted = raw[start + 1:start + 1 + 2 * 200 * 112].reshape(2, 200, 112)[..., :n]
    assert not host_blas._streams(shifted, 112, host_blas._bases(shifted))
    sgemm_batched(a, b, shifted, alpha=0.5, bias=bias)
    assert np.array_equal(shifted, plain)


@pytest.mark.parametrize("bf16", [False, True])
def test_b_packed_as_the_units_reach_it_gives_the_bits_of_b_packed_first(bf16, monkeypatch):
    """The units pack B's panel groups on first use (`_lazy_pack`, `@gemm_packing`: a thread
    finding its group claimed packs the next free one): the same bits as B packed before the
    units, on one thread and two, for a stack of three matrices with a last group of one panel
    (n = 9 panels of NR), K over several blocks, a broadcast B (stride 0 between matrices),
    alpha and a bias, through the native units and through the Python ones (a bf16 A, an
    epilogue taking whole rows). A B the JIT does not pack by rows (K^T, n not whole panels) is
    packed first."""
    import ml_dtypes

    from hlo_run import host_blas
    from hlo_run.host_blas import _kernels, _lazy_pack

    nr = _kernels()[1]
    rng = np.random.default_rng(17)
    n, k = 9 * nr, 2 * KC + 40
    a = rng.standard_normal((3, 150, k)).astype(np.float32)
    b = rng.standard_normal((3, k, n)).astype(ml_dtypes.bfloat16 if bf16 else np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    assert _lazy_pack(b, nr, k * n) is not None
    assert _lazy_pack(b.transpose(0, 2, 1).copy().transpose(0, 2, 1), nr, k * n) is None
    assert _lazy_pack(b[..., :n - 1], nr, k * n) is None
    cases = {"native": (a, b, False), "broadcast": (a, np.broadcast_to(b[:1], b.shape), False),
             "bf16 A": (a.astype(ml_dtypes.bfloat16), b, False), "epilogue": (a, b, True)}
    outs = {}
    for mode, pack in (("first", lambda *x: None), ("lazy", _lazy_pack)):
        monkeypatch.setattr(host_blas, "_lazy_pack", pack)
        for threads, (name, (aa, bb, rows)) in itertools.product((1, 2), cases.items()):
            out = np.full((3, 150, n), np.nan, np.float32)

            def keep(i, r0, r1, sums, out=out):
                out[i, r0:r1] = sums

            sgemm_batched(aa, bb, np.empty_like(out) if rows else out, alpha=0.5, bias=bias, threads=threads,
                          epilogue=keep if rows else None)
            outs[mode, threads, name] = out
    for key, out in outs.items():
        assert np.array_equal(out, outs["first", 1, key[2]]), key
    want = (a.astype(np.float64) @ b.astype(np.float64)) * 0.5 + bias
    np.testing.assert_allclose(outs["lazy", 2, "native"], want, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("n", [64, 70])
def test_bf16_operands_give_the_bits_of_their_f32_values(n):
    """bf16 A and B (A's rows widened per unit, B widened as it is packed; n = 70: B is not whole
    panels and is converted first): the same bits as the product of the exactly widened f32
    operands, with a strided A (every other row) and an epilogue's blocks too."""
    import ml_dtypes

    rng = np.random.default_rng(11)
    a = rng.standard_normal((2, 300, 200)).astype(ml_dtypes.bfloat16)[:, ::2]
    b = rng.standard_normal((2, 200, n)).astype(ml_dtypes.bfloat16)
    want = np.empty((2, 150, n), np.float32)
    sgemm_batched(a.astype(np.float32), b.astype(np.float32), want)
    got = np.full((2, 150, n), np.nan, np.float32)
    sgemm_batched(a, b, got, threads=2)
    assert np.array_equal(got, want)
    blocks = np.full((2, 150, n), np.nan, np.float32)

    def keep(i, r0, r1, rows):
        blocks[i, r0:r1] = rows

    sgemm_batched(a, b, np.empty_like(got), epilogue=keep)
    assert np.array_equal(blocks, want)


def test_round_bf16_has_ml_dtypes_bits_on_every_kind_of_float():
    """The JIT's rounding against ml_dtypes' (the interpreter's): ties to even, carries into the
    exponent and to inf, subnormals, signed zeros, NaNs of any payload (the quiet NaN of their
    sign), and random bit patterns; lengths that are not a multiple of 16 (the tail)."""
    import ml_dtypes

    from hlo_run.host_blas import round_bf16

    edges = np.array([0x00008000, 0x00018000, 0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F7F8000, 0x7F7F7FFF,
                      0x7F800000, 0xFF800000, 0x7F800001, 0xFFBFFFFF, 0x7FC00000, 0x80000000, 0x00000001,
                      0x807FFFFF], np.uint32)
    rand = np.random.default_rng(5).integers(0, 2**32, 100_003, dtype=np.uint64).astype(np.uint32)
    for bits in (edges, rand, np.tile(edges, 3)):
        x = bits.view(np.float32)
        with np.errstate(invalid="ignore"):
            want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
        assert np.array_equal(round_bf16(x).view(np.uint16), want)


def test_the_python_ranges_give_the_bits_of_the_native_team(monkeypatch):
    """Where the native team cannot run (busy with another thread's launch, an unknown CPU), the
    packing, the GEMM's units and the convolution's rows run through `run_ranges` in Python: the
    same bits, for packed rows of f32 and bf16, packed columns (K^T) and a convolution."""
    import ml_dtypes

    from hlo_run import host_team

    rng = np.random.default_rng(21)
    a = rng.standard_normal((3, 300, 280)).astype(np.float32)
    cases = [rng.standard_normal((3, 280, 96)).astype(np.float32),
             rng.standard_normal((3, 280, 96)).astype(ml_dtypes.bfloat16),
             rng.standard_normal((3, 96, 280)).astype(np.float32).transpose(0, 2, 1)]
    x, w = _rand(2, 9, 9, 40), _rand(3, 3, 40, 64)

    def run_all():
        outs = []
        for b in cases:
            out = np.empty((3, 300, 96), np.float32)
            sgemm_batched(a, b, out, alpha=0.5, threads=2)
            outs.append(out)
        conv = np.empty((2, 7, 7, 64), np.float32)
        conv_channels_last(x, w, (1, 1), (1, 1), conv, threads=2)
        return outs + [conv]

    native = run_all()
    monkeypatch.setattr(host_team, "run_native", lambda *args: False)
    python = run_all()
    assert all(np.array_equal(n, p) for n, p in zip(native, python))
