"""Which operand and result layouts a GEMM thunk takes, and that the cuBLAS call hlo-run makes for
each reads and writes the right bytes (found by the layout tier: a batched dot whose result
layout puts the batch between the matrix dims, which XLA's MatrixLayout::For accepts and
layout-assignment may choose, ran as a naive elemental-dot kernel, 20 s on the host for one
attention block).

Without a GPU the cuBLAS call is checked against a numpy model of cublasGemmStridedBatchedEx
(column-major matrices, leading dims and batch strides in elements) on the buffers' bytes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hlo_common.gpu.gemm_config import build_gemm_config, matrix_layout
from hlo_common.manifest.layout_bytes import array_to_bytes, bytes_to_array
from hlo_common.hlo.shape import Shape
from hlo_run.cublas import OP_N, gemm_call

B, M, K, N = 3, 4, 5, 2
RNG = np.random.default_rng(11)
# XLA's MatrixLayout::For accepts these (major to minor): (B,R,C) (B,C,R) (R,B,C) (C,B,R)
ACCEPTED = {(0, 1, 2), (0, 2, 1), (1, 0, 2), (2, 0, 1)}


def stored(flat: np.ndarray, offset: int, ld: int, rows: int, cols: int) -> np.ndarray:
    """A column-major rows x cols matrix at `offset` with leading dim `ld` (cuBLAS's view)."""
    return flat[offset + np.arange(rows)[:, None] + ld * np.arange(cols)[None, :]]


def cublas_strided_batched(call: dict, buffers: dict[str, np.ndarray], out: np.ndarray) -> None:
    """What cublasGemmStridedBatchedEx computes for `gemm_call`'s arguments, alpha 1, beta 0."""
    m, n, k = call["m"], call["n"], call["k"]
    (a_name, _, opa, lda), (b_name, _, opb, ldb) = call["first"], call["second"]
    sa, sb, sc = call["strides"]
    for i in range(call["batch"]):
        a = stored(buffers[a_name], i * sa, lda, *((m, k) if opa == OP_N else (k, m)))
        b = stored(buffers[b_name], i * sb, ldb, *((k, n) if opb == OP_N else (n, k)))
        c = (a if opa == OP_N else a.T) @ (b if opb == OP_N else b.T)
        out[i * sc + np.arange(m)[:, None] + call["ldc"] * np.arange(n)[None, :]] = c


def shape(dims, major_to_minor) -> Shape:
    return Shape.array("f64", dims, tuple(reversed(major_to_minor)))


def test_matrix_layout_takes_the_batch_between_the_matrix_dims_as_xla():
    # [B,R,C] with the rows major, then the batch: a row's leading dim strides over B*C elements,
    # the next matrix starts C elements on (XLA's MatrixLayout::For, case (R,B,C))
    rbc = matrix_layout(shape((B, M, N), (1, 0, 2)), [0], [1], [2])
    assert (rbc.order, rbc.leading_dim, rbc.batch_stride) == ("row_major", B * N, N)
    cbr = matrix_layout(shape((B, M, N), (2, 0, 1)), [0], [1], [2])
    assert (cbr.order, cbr.leading_dim, cbr.batch_stride) == ("column_major", B * M, M)
    bcr = matrix_layout(shape((B, M, N), (0, 2, 1)), [0], [1], [2])
    assert (bcr.order, bcr.leading_dim, bcr.batch_stride) == ("column_major", M, M * N)
    assert matrix_layout(shape((B, M, N), (1, 2, 0)), [0], [1], [2]) is None  # batch most minor


PERMS = list(itertools.permutations(range(3)))


@pytest.mark.parametrize("out_perm", PERMS)
def test_every_accepted_layout_makes_a_cublas_call_that_computes_the_dot(out_perm):
    lhs_v, rhs_v = RNG.uniform(-1, 1, (B, M, K)), RNG.uniform(-1, 1, (B, K, N))
    want = np.einsum("bmk,bkn->bmn", lhs_v, rhs_v)
    taken = 0
    for lhs_perm, rhs_perm in itertools.product(PERMS, PERMS):
        lhs, rhs, out = shape((B, M, K), lhs_perm), shape((B, K, N), rhs_perm), shape((B, M, N), out_perm)
        cfg = build_gemm_config(lhs, rhs, out, ((0,), (0,), (2,), (1,)))
        accepted = {lhs_perm, rhs_perm, out_perm} <= ACCEPTED
        assert (cfg is not None) == accepted, (lhs_perm, rhs_perm, out_perm)
        if cfg is None:
            continue
        taken += 1
        buffers = {"lhs": np.frombuffer(array_to_bytes(lhs_v, lhs), np.float64),
                   "rhs": np.frombuffer(array_to_bytes(rhs_v, rhs), np.float64)}
        flat = np.full(B * M * N, np.nan)
        cublas_strided_batched(gemm_call(cfg), buffers, flat)
        np.testing.assert_allclose(bytes_to_array(flat.tobytes(), out), want, rtol=1e-12, atol=1e-12)
    assert taken == (16 if out_perm in ACCEPTED else 0)


def test_a_batch_between_the_result_dims_runs_as_a_gemm_thunk_on_the_host():
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.hlo.parser import parse_module
    from hlo_run.backends.host import HostDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    text = """HloModule batch_between
ENTRY e {
  a = f32[6,32,16]{2,1,0} parameter(0)
  b = f32[6,16,8]{2,1,0} parameter(1)
  ROOT d = f32[6,32,8]{1,0,2} dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},
    rhs_batch_dims={0}, rhs_contracting_dims={1}
}"""
    result = compile_module(parse_module(text), CompileOptions(target="host"))
    assert [t.kind for t in result.manifest.thunks.thunks] == ["kGemm"]  # no elemental-dot kernel
    args = [RNG.uniform(-1, 1, dims).astype(np.float32) for dims in ((6, 32, 16), (6, 16, 8))]
    got = ManifestExecutable(result.manifest, HostDevice(), "batch_between").run(args)
    np.testing.assert_allclose(got, evaluate(parse_module(text), args), rtol=1e-5, atol=1e-5)
