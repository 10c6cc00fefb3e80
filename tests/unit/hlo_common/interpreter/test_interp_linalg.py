"""Reference interpreter: dot, ragged-dot, scaled-dot, convolution, fft, cholesky, triangular-solve,
batch-norm. Expectations come from numpy written here (einsum, explicit loops over tiny shapes)
and, where jax is installed, from XLA:CPU itself.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from hlo_common.errors import InterpreterError
from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module

RNG = np.random.default_rng(1234)


def run(text: str, *args):
    return evaluate(parse_module(text), list(args))


def entry(body: str, comps: str = "") -> str:
    return f"HloModule m\n{comps}\nENTRY e {{\n{body}\n}}\n"


def normal(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def xla_cpu(text: str, *args):
    pytest.importorskip("jax", reason="XLA:CPU reference needs jax")
    from hlo_run.xla_cpu import run_hlo_text

    return run_hlo_text(text, list(args))


# -- dot -------------------------------------------------------------------------------------------

def test_dot_batch_and_contracting_dims_in_any_position():
    a, b = normal(4, 2, 3, 5), normal(5, 6, 4, 2)
    text = entry("a = f32[4,2,3,5] parameter(0)\nb = f32[5,6,4,2] parameter(1)\n"
                 "ROOT d = f32[2,3,6] dot(a, b), lhs_batch_dims={1}, rhs_batch_dims={3}, "
                 "lhs_contracting_dims={0,3}, rhs_contracting_dims={2,0}")
    got = run(text, a, b)
    want = np.einsum("kbmc,cnkb->bmn", a.astype(np.float64), b.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == (2, 3, 6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dot_operands_that_are_strided_broadcast_and_transposed_views():
    # The operands reach dot as views: a stride-2 slice, a transposed batch layout and a broadcast
    # (stride 0), none of which BLAS can read as they are.
    a, b, c = normal(2, 8, 6), normal(2, 6, 5), normal(5)
    text = entry("a = f32[2,8,6] parameter(0)\nb = f32[2,6,5] parameter(1)\nc = f32[5] parameter(2)\n"
                 "s = f32[2,4,6] slice(a), slice={[0:2], [0:8:2], [0:6]}\n"
                 "t = f32[5,2,6] transpose(b), dimensions={2,0,1}\n"
                 "w = f32[6,5] broadcast(c), dimensions={1}\n"
                 "d1 = f32[2,4,5] dot(s, t), lhs_batch_dims={0}, rhs_batch_dims={1}, "
                 "lhs_contracting_dims={2}, rhs_contracting_dims={2}\n"
                 "d2 = f32[2,4,5] dot(s, w), lhs_contracting_dims={2}, rhs_contracting_dims={0}\n"
                 "ROOT r = (f32[2,4,5], f32[2,4,5]) tuple(d1, d2)")
    d1, d2 = run(text, a, b, c)
    a64, b64, c64 = (x.astype(np.float64) for x in (a, b, c))
    np.testing.assert_allclose(d1, np.einsum("bmk,bkn->bmn", a64[:, ::2], b64), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d2, np.einsum("bmk,n->bmn", a64[:, ::2], c64), rtol=1e-5, atol=1e-5)


def test_f32_dot_chain_stays_within_f32_rounding_of_the_exact_result():
    # The corpus module xnn.sequential_dots: four chained f32 [512,512] dots, then row sums. The
    # interpreter accumulates f32 dots in f32 (as XLA:CPU does) and sums rows in f64; every row
    # sum must be within a few f32 ulps of the magnitudes involved of the exact (f64) result.
    # (On the corpus inputs XLA:CPU itself is 4.4e-4 off at one cancelling element, where the
    # interpreter is 2e-6 off: that module stays listed as an XLA:CPU rounding difference.)
    n = 128
    p0, p1 = normal(n, n), normal(n, n)
    fusions = "".join(f"f{k} {{ a = f32[{n},{n}] parameter(0) b = f32[{n},{n}] parameter(1) "
                      f"ROOT d = f32[{n},{n}] dot(a, b), lhs_contracting_dims={{1}}, "
                      f"rhs_contracting_dims={{0}} }}\n" for k in range(4))
    adder = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"
    body = [f"p0 = f32[{n},{n}] parameter(0)", f"p1 = f32[{n},{n}] parameter(1)", "z = f32[] constant(0)"]
    prev = "p1"
    for k in range(4):
        body += [f"x{k} = f32[{n},{n}] fusion(p0, {prev}), kind=kCustom, calls=f{k}",
                 f"r{k} = f32[{n}] reduce(x{k}, z), dimensions={{1}}, to_apply=add"]
        prev = f"x{k}"
    body += [f"a0 = f32[{n}] add(r0, r1)", f"a1 = f32[{n}] add(r2, r3)", f"ROOT a2 = f32[{n}] add(a0, a1)"]
    got = run(entry("\n".join(body), fusions + adder), p0, p1)
    x, exact, scale = p1.astype(np.float64), np.zeros(n), np.zeros(n)
    for _ in range(4):
        x = p0.astype(np.float64) @ x
        exact += x.sum(axis=1)
        scale += np.abs(x).sum(axis=1)
    assert np.all(np.abs(got - exact) <= 8 * np.finfo(np.float32).eps * scale)


def test_dot_outer_product_without_contracting_dims():
    a, b = normal(3), normal(4)
    got = run(entry("a = f32[3] parameter(0)\nb = f32[4] parameter(1)\nROOT d = f32[3,4] dot(a, b)"), a, b)
    np.testing.assert_allclose(got, np.outer(a, b), rtol=1e-6)


def test_dot_bf16_accumulates_in_f32_and_rounds_once():
    # 256 products of 1 * 1/64 = 4: a bf16 running sum would stall at 2 (ulp(2) = 1/64).
    a = np.ones((1, 256), ml_dtypes.bfloat16)
    b = np.full((256, 1), 1 / 64, ml_dtypes.bfloat16)
    text = entry("a = bf16[1,256] parameter(0)\nb = bf16[256,1] parameter(1)\n"
                 "ROOT d = bf16[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    got = run(text, a, b)
    assert got.dtype == ml_dtypes.bfloat16 and float(got[0, 0]) == 4.0


def test_dot_integer_overflow_wraps_in_result_type():
    a = np.full((1, 3), 100, np.int8)
    b = np.full((3, 1), 100, np.int8)
    text = entry("a = s8[1,3] parameter(0)\nb = s8[3,1] parameter(1)\n"
                 "ROOT d = s8[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert run(text, a, b)[0, 0] == 48  # 30000 = 0x7530 wraps to 0x30
    text32 = text.replace("s8[1,1] dot", "s32[1,1] dot")
    assert run(text32, a, b)[0, 0] == 30000  # preferred element type: no overflow


def test_dot_s32_wraps_like_two_complement():
    a = np.array([[2**31 - 1, 2**31 - 1]], np.int32)
    b = np.array([[2], [3]], np.int32)
    text = entry("a = s32[1,2] parameter(0)\nb = s32[2,1] parameter(1)\n"
                 "ROOT d = s32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    want = ((2**31 - 1) * 5) % 2**32
    want = want - 2**32 if want >= 2**31 else want
    assert run(text, a, b)[0, 0] == want


def test_dot_complex_and_pred():
    a, b = normal(2, 3) + 1j * normal(2, 3), normal(3, 2) + 1j * normal(3, 2)
    a, b = a.astype(np.complex64), b.astype(np.complex64)
    got = run(entry("a = c64[2,3] parameter(0)\nb = c64[3,2] parameter(1)\n"
                    "ROOT d = c64[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"), a, b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5)
    p = np.array([[True, False], [False, False]])
    q = np.array([[True, False], [True, True]])
    got = run(entry("a = pred[2,2] parameter(0)\nb = pred[2,2] parameter(1)\n"
                    "ROOT d = pred[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"), p, q)
    np.testing.assert_array_equal(got, (p.astype(int) @ q.astype(int)) > 0)


def test_dot_mismatched_contracting_sizes_is_an_interpreter_error():
    text = entry("a = f32[2,3] parameter(0)\nb = f32[4,2] parameter(1)\n"
                 "ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    with pytest.raises(InterpreterError, match=r"%d \(dot\)"):
        run(text, normal(2, 3), normal(4, 2))


def test_ragged_dot_non_contracting_and_contracting_modes():
    lhs, rhs = normal(7, 3), normal(2, 3, 4)
    sizes = np.array([3, 2], np.int64)  # rows 0-2 group 0, rows 3-4 group 1, rows 5-6 no group
    text = entry("a = f32[7,3] parameter(0)\nb = f32[2,3,4] parameter(1)\ng = s64[2] parameter(2)\n"
                 "ROOT d = f32[7,4] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={1}, "
                 "lhs_ragged_dims={0}, rhs_group_dims={0}")
    want = np.zeros((7, 4), np.float32)
    want[0:3] = lhs[0:3] @ rhs[0]
    want[3:5] = lhs[3:5] @ rhs[1]
    np.testing.assert_allclose(run(text, lhs, rhs, sizes), want, rtol=1e-5, atol=1e-6)

    lhs2, rhs2 = normal(4, 6), normal(6, 5)
    text2 = entry("a = f32[4,6] parameter(0)\nb = f32[6,5] parameter(1)\ng = s64[2] parameter(2)\n"
                  "ROOT d = f32[2,4,5] ragged-dot(a, b, g), lhs_contracting_dims={1}, "
                  "rhs_contracting_dims={0}, "
                  "lhs_ragged_dims={1}")
    sizes2 = np.array([2, 3], np.int64)
    want2 = np.stack([lhs2[:, 0:2] @ rhs2[0:2], lhs2[:, 2:5] @ rhs2[2:5]])
    np.testing.assert_allclose(run(text2, lhs2, rhs2, sizes2), want2, rtol=1e-5, atol=1e-6)


def test_scaled_dot_applies_block_scales_along_contracting_dim():
    lhs, rhs = normal(2, 8), normal(3, 8)
    ls, rs = np.abs(normal(2, 2)) + 0.5, np.abs(normal(3, 2)) + 0.5
    text = entry("a = f32[2,8] parameter(0)\nb = f32[3,8] parameter(1)\nsa = f32[2,2] parameter(2)\n"
                 "sb = f32[3,2] parameter(3)\nROOT d = f32[2,3] scaled-dot(a, b, sa, sb), "
                 "lhs_contracting_dims={1}, rhs_contracting_dims={1}")
    want = (lhs * np.repeat(ls, 4, axis=1)) @ (rhs * np.repeat(rs, 4, axis=1)).T
    np.testing.assert_allclose(run(text, lhs, rhs, ls, rs), want, rtol=1e-5, atol=1e-6)


# -- convolution -----------------------------------------------------------------------------------

def conv_reference(lhs, rhs, stride, pad, lhs_dil, rhs_dil, rev, fgc=1, bgc=1):
    """Direct loops over canonical [N, C, S...] input and [O, I, K...] kernel (XLA's definition)."""
    n, _, *sizes = lhs.shape
    o, i, *ks = rhs.shape
    out_sizes = []
    for s, k, st, (lo, hi), ld, rd in zip(sizes, ks, stride, pad, lhs_dil, rhs_dil):
        padded = (s - 1) * ld + 1 + lo + hi
        out_sizes.append(max(0, (padded - ((k - 1) * rd + 1)) // st + 1))
    out = np.zeros([n // bgc, o] + out_sizes)
    for nb, oc, *x in itertools.product(range(n // bgc), range(o), *(range(s) for s in out_sizes)):
        fg, bg = oc // (o // fgc), oc // (o // bgc)
        acc = 0.0
        for c, *k in itertools.product(range(i), *(range(s) for s in ks)):
            pos = []
            for xd, kd, st, (lo, _), ld, rd in zip(x, k, stride, pad, lhs_dil, rhs_dil):
                p = xd * st + kd * rd - lo
                if p % ld or not 0 <= p // ld < sizes[len(pos)]:
                    break
                pos.append(p // ld)
            else:
                kk = [ks[d] - 1 - kd if rev[d] else kd for d, kd in enumerate(k)]
                acc += lhs[(bg * (n // bgc) + nb, fg * i + c, *pos)] * rhs[(oc, c, *kk)]
        out[(nb, oc, *x)] = acc
    return out


CONV_CASES = [
    # (lhs NCHW dims, kernel OIHW dims, window text, stride, pad, lhs_dil, rhs_dil, rev, fgc, bgc)
    ((2, 3, 5, 5), (4, 3, 3, 3), "size=3x3 pad=1_1x1_1", (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), (0, 0),
     1, 1),
    ((1, 2, 7, 6), (3, 2, 3, 2), "size=3x2 stride=2x3 "
                                 "pad=-1_2x0_1", (2, 3), ((-1, 2), (0, 1)), (1, 1), (1, 1),
     (0, 0), 1, 1),
    ((1, 2, 4, 5), (2, 2, 3, 3), "size=3x3 pad=2_1x1_2 lhs_dilate=2x1 rhs_dilate=1x2 rhs_reversal=1x0",
     (1, 1), ((2, 1), (1, 2)), (2, 1), (1, 2), (1, 0), 1, 1),
    ((2, 4, 4, 4), (6, 2, 3, 3), "size=3x3 pad=1_1x1_1", (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), (0, 0),
     2, 1),
    ((4, 3, 4, 4), (6, 3, 2, 2), "size=2x2", (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), (0, 0), 1, 2),
    # more kernel taps than output positions (a weight gradient's shape): patches per position
    ((2, 3, 7, 7), (4, 3, 6, 5), "size=6x5 pad=1_0x0_1", (1, 1), ((1, 0), (0, 1)), (1, 1), (1, 1), (0, 0),
     1, 1),
    ((1, 2, 9, 6), (3, 2, 4, 4), "size=4x4 stride=2x1 rhs_dilate=2x1", (2, 1), ((0, 0), (0, 0)), (1, 1),
     (2, 1), (0, 0), 1, 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: c[2])
def test_convolution_matches_direct_loops(case):
    lshape, kshape, win, stride, pad, ld, rd, rev, fgc, bgc = case
    lhs, rhs = normal(*lshape), normal(*kshape)
    want = conv_reference(lhs, rhs, stride, pad, ld, rd, rev, fgc, bgc)
    # Feed the interpreter NHWC input, HWIO kernel and ask for NHWC output (b01f_01io->b01f).
    lhs_t, rhs_t = lhs.transpose(0, 2, 3, 1), rhs.transpose(2, 3, 1, 0)
    out_dims = (want.shape[0],) + want.shape[2:] + (want.shape[1],)
    fmt = ",".join
    text = entry(f"a = f32[{fmt(map(str, lhs_t.shape))}] parameter(0)\n"
                 f"b = f32[{fmt(map(str, rhs_t.shape))}] parameter(1)\n"
                 f"ROOT c = f32[{fmt(map(str, out_dims))}] convolution(a, b), window={{{win}}}, "
                 f"dim_labels=b01f_01io->b01f, feature_group_count={fgc}, batch_group_count={bgc}")
    got = run(text, lhs_t, rhs_t)
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-5)


def test_convolution_permuted_dim_labels_and_integer_accumulation():
    lhs = RNG.integers(-100, 100, (3, 2, 9), dtype=np.int8)  # f b 0
    rhs = RNG.integers(-100, 100, (3, 4, 3), dtype=np.int8)  # i 0 o
    text = entry("a = s8[3,2,9] parameter(0)\nb = s8[3,3,4] parameter(1)\n"
                 "ROOT c = s32[9,4,2] convolution(a, b), window={size=3 pad=1_1}, dim_labels=fb0_i0o->0fb")
    got = run(text, lhs, rhs.transpose(0, 2, 1))
    want = conv_reference(lhs.transpose(1, 0, 2).astype(np.int64), rhs.transpose(1, 0, 2).astype(np.int64),
                          (1,), ((1, 1),), (1,), (1,), (0,))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.transpose(2, 1, 0).astype(np.int64))


def test_convolution_bf16_against_xla_cpu():
    lhs, rhs = normal(2, 6, 6, 8, dtype=ml_dtypes.bfloat16), normal(3, 3, 8, 4, dtype=ml_dtypes.bfloat16)
    text = entry("a = bf16[2,6,6,8] parameter(0)\nb = bf16[3,3,8,4] parameter(1)\n"
                 "ROOT c = bf16[2,3,3,4] convolution(a, b), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
                 "dim_labels=b01f_01io->b01f")
    want = xla_cpu(text, lhs, rhs).astype(np.float32)
    got = run(text, lhs, rhs).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


# -- fft, cholesky, triangular-solve, batch-norm ---------------------------------------------------

@pytest.mark.parametrize("kind, in_t, out_t, in_shape, out_shape, lengths, fn", [
    ("FFT", "c64", "c64", (3, 8), (3, 8), (8,), lambda x: np.fft.fft(x)),
    ("IFFT", "c64", "c64", (2, 3, 4), (2, 3, 4), (3, 4), lambda x: np.fft.ifft2(x)),
    ("RFFT", "f32", "c64", (4, 9), (4, 5), (9,), lambda x: np.fft.rfft(x)),
    ("IRFFT", "c64", "f32", (4, 5), (4, 8), (8,), lambda x: np.fft.irfft(x, 8)),
])
def test_fft_kinds(kind, in_t, out_t, in_shape, out_shape, lengths, fn):
    x = normal(*in_shape)
    if in_t == "c64":
        x = (x + 1j * normal(*in_shape)).astype(np.complex64)
    dims = lambda s: ",".join(map(str, s))  # noqa: E731
    text = entry(f"a = {in_t}[{dims(in_shape)}] parameter(0)\n"
                 f"ROOT f = {out_t}[{dims(out_shape)}] fft(a), fft_type={kind}, "
                 f"fft_length={{{dims(lengths)}}}")
    got = run(text, x)
    assert got.shape == out_shape
    np.testing.assert_allclose(got, fn(x.astype(np.complex128 if in_t == "c64" else np.float64)),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_reads_one_triangle_and_reconstructs(lower):
    m = normal(2, 4, 4)
    a = m @ m.transpose(0, 2, 1) + 4 * np.eye(4, dtype=np.float32)
    junk = a.copy()
    other = np.triu_indices(4, 1) if lower else np.tril_indices(4, -1)
    junk[:, other[0], other[1]] = 99.0  # the triangle XLA does not read
    text = entry(f"a = f32[2,4,4] parameter(0)\nROOT c = f32[2,4,4] cholesky(a), lower={str(lower).lower()}")
    got = run(text, junk).astype(np.float64)
    recon = got @ got.transpose(0, 2, 1) if lower else got.transpose(0, 2, 1) @ got
    np.testing.assert_allclose(recon, a, rtol=1e-5, atol=1e-5)
    assert np.all(got[:, other[0], other[1]] == 0)


@pytest.mark.parametrize("left, lower, unit, transpose", [
    (True, True, False, "NO_TRANSPOSE"), (True, False, True, "TRANSPOSE"),
    (False, True, False, "ADJOINT"), (False, False, False, "NO_TRANSPOSE"),
])
def test_triangular_solve_satisfies_its_equation(left, lower, unit, transpose):
    a = normal(2, 4, 4) + 5 * np.eye(4, dtype=np.float32)
    b = normal(2, 4, 3) if left else normal(2, 3, 4)
    text = entry(f"a = f32[2,4,4] parameter(0)\nb = f32[{','.join(map(str, b.shape))}] parameter(1)\n"
                 f"ROOT x = f32[{','.join(map(str, b.shape))}] triangular-solve(a, b), "
                 f"left_side={str(left).lower()}, lower={str(lower).lower()}, "
                 f"unit_diagonal={str(unit).lower()}, transpose_a={transpose}")
    x = run(text, a, b).astype(np.float64)
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        t[:, range(4), range(4)] = 1
    if transpose != "NO_TRANSPOSE":
        t = t.transpose(0, 2, 1)
    lhs = t @ x if left else x @ t
    np.testing.assert_allclose(lhs, b, rtol=1e-4, atol=1e-4)


def test_batch_norm_training_inference_and_grad():
    x, scale, offset = normal(2, 3, 4), normal(3), normal(3)
    eps = 0.001
    text = entry("x = f32[2,3,4] parameter(0)\ns = f32[3] parameter(1)\no = f32[3] parameter(2)\n"
                 "ROOT r = (f32[2,3,4], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001, "
                 "feature_index=1")
    y, mean, var = run(text, x, scale, offset)
    xd = x.astype(np.float64)
    m = xd.mean(axis=(0, 2))
    v = xd.var(axis=(0, 2))
    norm = (xd - m[None, :, None]) / np.sqrt(v[None, :, None] + eps)
    np.testing.assert_allclose(mean, m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y, norm * scale[None, :, None] + offset[None, :, None], rtol=1e-4, atol=1e-5)

    text_inf = entry("x = f32[2,3,4] parameter(0)\ns = f32[3] parameter(1)\no = f32[3] parameter(2)\n"
                     "m = f32[3] parameter(3)\nv = f32[3] parameter(4)\n"
                     "ROOT r = f32[2,3,4] batch-norm-inference(x, s, o, m, v), epsilon=0.001, "
                     "feature_index=1")
    got = run(text_inf, x, scale, offset, m.astype(np.float32), v.astype(np.float32))
    np.testing.assert_allclose(got, y, rtol=1e-4, atol=1e-5)

    dy = normal(2, 3, 4)
    text_grad = entry("x = f32[2,3,4] parameter(0)\ns = f32[3] parameter(1)\nm = f32[3] parameter(2)\n"
                      "v = f32[3] parameter(3)\ndy = f32[2,3,4] parameter(4)\n"
                      "ROOT r = (f32[2,3,4], f32[3], f32[3]) batch-norm-grad(x, s, m, v, dy), "
                      "epsilon=0.001, feature_index=1")
    gx, gs, go = run(text_grad, x, scale, m.astype(np.float32), v.astype(np.float32), dy)
    # Gradients of sum(y * dy) with mean/var held fixed to the given statistics, by finite sums.
    dyd = dy.astype(np.float64)
    rstd = 1 / np.sqrt(v + eps)
    np.testing.assert_allclose(go, dyd.sum(axis=(0, 2)), rtol=1e-4, atol=1e-5)
    want_gs = (dyd * (xd - m[None, :, None])).sum(axis=(0, 2)) * rstd
    np.testing.assert_allclose(gs, want_gs, rtol=1e-4, atol=1e-5)
    count = 8
    xc = xd - m[None, :, None]
    want_gx = scale[None, :, None] * rstd[None, :, None] * (
        dyd - dyd.mean(axis=(0, 2))[None, :, None]
        - xc * (dyd * xc).sum(axis=(0, 2))[None, :, None] / count / (v[None, :, None] + eps))
    np.testing.assert_allclose(gx, want_gx, rtol=1e-4, atol=1e-5)


# -- against XLA:CPU -------------------------------------------------------------------------------

XLA_CASES = {
    "dot_mixed_batch": ("a = f32[3,2,4] parameter(0)\nb = f32[2,5,4] parameter(1)\n"
                        "ROOT d = f32[2,3,5] dot(a, b), lhs_batch_dims={1}, rhs_batch_dims={0}, "
                        "lhs_contracting_dims={2}, rhs_contracting_dims={2}", [(3, 2, 4), (2, 5, 4)]),
    "conv_dilated_strided": ("a = f32[1,9,8,2] parameter(0)\nb = f32[3,2,2,3] parameter(1)\n"
                             "ROOT c = f32[1,5,2,3] convolution(a, b), "
                             "window={size=3x2 stride=3x4 pad=1_-1x2_-3 lhs_dilate=2x1 rhs_dilate=1x2}, "
                             "dim_labels=b01f_01io->b01f", [(1, 9, 8, 2), (3, 2, 2, 3)]),
    "conv_batch_groups": ("a = f32[3,6,5,5] parameter(0)\nb = f32[3,3,3,6] parameter(1)\n"
                          "ROOT c = f32[5,5,2,6] convolution(a, b), window={size=3x3 pad=1_1x1_1}, "
                          "dim_labels=fb01_i01o->01bf, batch_group_count=3", [(3, 6, 5, 5), (3, 3, 3, 6)]),
}


@pytest.mark.parametrize("name", sorted(XLA_CASES))
def test_against_xla_cpu(name):
    body, shapes = XLA_CASES[name]
    args = [normal(*s) for s in shapes]
    text = entry(body)
    np.testing.assert_allclose(run(text, *args), xla_cpu(text, *args), rtol=1e-4, atol=1e-4)
