"""Data movement and shape opcodes of the interpreter, against numpy written out by hand."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def run(body: str, *args):
    return evaluate(parse_module("ENTRY e { " + body + " }"), list(args))


def test_broadcast_reshape_transpose_slice_reverse_concat():
    np.testing.assert_array_equal(
        run("p = f32[3] parameter(0) ROOT r = f32[2,3,4] broadcast(p), dimensions={1}", X[0, :, 0]),
        np.broadcast_to(X[0, :, 0][None, :, None], (2, 3, 4)))
    y = X[0, :2, :].T.copy()  # f32[4,2]; dims={2,0} maps its dim 0 to output dim 2
    out = run("p = f32[4,2] parameter(0) ROOT r = f32[2,3,4] broadcast(p), dimensions={2,0}", y)
    np.testing.assert_array_equal(out, np.broadcast_to(y.T[:, None, :], (2, 3, 4)))
    np.testing.assert_array_equal(run("p = f32[2,3,4] parameter(0) ROOT r = f32[4,6] reshape(p)", X),
                                  X.reshape(4, 6))
    np.testing.assert_array_equal(
        run("p = f32[2,3,4] parameter(0) ROOT r = f32[4,2,3] transpose(p), dimensions={2,0,1}", X),
        X.transpose(2, 0, 1))
    np.testing.assert_array_equal(
        run("p = f32[2,3,4] parameter(0) ROOT r = f32[1,2,2] slice(p), slice={[1:2], [0:3:2], [1:4:2]}", X),
        X[1:2, 0:3:2, 1:4:2])
    np.testing.assert_array_equal(
        run("p = f32[2,3,4] parameter(0) ROOT r = f32[2,3,4] reverse(p), dimensions={0,2}", X),
        X[::-1, :, ::-1])
    np.testing.assert_array_equal(
        run("p = f32[2,3,4] parameter(0) q = f32[2,1,4] parameter(1) "
            "ROOT r = f32[2,4,4] concatenate(p, q), dimensions={1}", X, X[:, :1]),
        np.concatenate([X, X[:, :1]], axis=1))


def _pad_by_hand(x, value, config):
    """Interior padding first, then edge padding (negative edges crop), element by element."""
    out_dims = [lo + hi + n + max(n - 1, 0) * it for (lo, hi, it), n in zip(config, x.shape)]
    out = np.full(out_dims, value, x.dtype)
    for idx in np.ndindex(*x.shape):
        pos = [lo + i * (it + 1) for i, (lo, _, it) in zip(idx, config)]
        if all(0 <= p < d for p, d in zip(pos, out_dims)):
            out[tuple(pos)] = x[idx]
    return out


@pytest.mark.parametrize("padding, config", [
    ("1_0x-1_2_1x0_-1_1", [(1, 0, 0), (-1, 2, 1), (0, -1, 1)]),
    ("0_0x0_0_1x-2_-2_2", [(0, 0, 0), (0, 0, 1), (-2, -2, 2)]),
    ("-1_0x-2_0x-3_0", [(-1, 0, 0), (-2, 0, 0), (-3, 0, 0)]),
    ("2_1_3x0_0x1_1", [(2, 1, 3), (0, 0, 0), (1, 1, 0)]),
])
def test_pad_with_negative_and_interior_padding(padding, config):
    want = _pad_by_hand(X, -1, config)
    dims = ",".join(str(d) for d in want.shape)
    out = run(f"p = f32[2,3,4] parameter(0) c = f32[] constant(-1) ROOT r = f32[{dims}] pad(p, c), "
              f"padding={padding}", X)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("itype, starts, clamped", [
    ("s32", [5, -4, 1], [1, 0, 1]),
    ("u32", [1, 0xFFFFFFFF, 0], [1, 1, 0]),  # huge unsigned starts clamp to the last valid one
    ("s8", [-3, 1, 127], [0, 1, 1]),
    ("u8", [0, 255, 2], [0, 1, 1]),
])
def test_dynamic_slice_and_update_clamp_start_indices(itype, starts, clamped):
    np_t = {"s32": np.int32, "u32": np.uint32, "s8": np.int8, "u8": np.uint8}[itype]
    idx = [np.array(s, np_t) for s in starts]
    params = " ".join(f"i{k} = {itype}[] parameter({k + 1})" for k in range(3))
    ds = run(f"p = f32[2,3,4] parameter(0) {params} "
             "ROOT r = f32[1,2,3] dynamic-slice(p, i0, i1, i2), dynamic_slice_sizes={1,2,3}", X, *idx)
    a, b, c = clamped
    np.testing.assert_array_equal(ds, X[a:a + 1, b:b + 2, c:c + 3])
    upd = -np.ones((1, 2, 3), np.float32)
    params = " ".join(f"i{k} = {itype}[] parameter({k + 2})" for k in range(3))
    dus = run(f"p = f32[2,3,4] parameter(0) u = f32[1,2,3] parameter(1) {params} "
              "ROOT r = f32[2,3,4] dynamic-update-slice(p, u, i0, i1, i2)", X, upd, *idx)
    want = X.copy()
    want[a:a + 1, b:b + 2, c:c + 3] = -1
    np.testing.assert_array_equal(dus, want)


@pytest.mark.parametrize("t, np_t", [("s32", np.int32), ("f32", np.float32), ("u8", np.uint8),
                                     ("bf16", ml_dtypes.bfloat16), ("s8", np.int8)])
def test_iota_any_dimension_and_type(t, np_t):
    out = run(f"ROOT r = {t}[3,300] iota(), iota_dimension=1")
    assert out.dtype == np.dtype(np_t)
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(300).astype(np_t), (3, 300)))
    col = run(f"ROOT r = {t}[4,2] iota(), iota_dimension=0")
    np.testing.assert_array_equal(col, np.broadcast_to(np.arange(4).astype(np_t)[:, None], (4, 2)))


def test_bitcast_reinterprets_physical_order():
    # {0,1} is column-major: physical order of [[a, b], [c, d]] is a, c, b, d.
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    out = run("p = f32[2,3]{0,1} parameter(0) ROOT r = f32[6]{0} bitcast(p)", x)
    np.testing.assert_array_equal(out, x.T.reshape(-1))
    out = run("p = f32[6]{0} parameter(0) ROOT r = f32[3,2]{0,1} bitcast(p)", np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(out, np.arange(6, dtype=np.float32).reshape(2, 3).T)
    # A transpose expressed as a bitcast between layouts.
    out = run("p = f32[2,3]{1,0} parameter(0) ROOT r = f32[3,2]{0,1} bitcast(p)", x)
    np.testing.assert_array_equal(out, x.T)
    out = run("p = f32[2]{0} parameter(0) ROOT r = s32[2]{0} bitcast(p)", np.float32([1, -2]))
    np.testing.assert_array_equal(out, np.float32([1, -2]).view(np.int32))


def test_tuple_gte_copy_and_dimension_sizes():
    out = run("p = f32[2,3] parameter(0) c = s32[] constant(7) t = (f32[2,3], s32[]) tuple(p, c) "
              "g = s32[] get-tuple-element(t), index=1 "
              "d = s32[] get-dimension-size(p), dimensions={1} "
              "cp = f32[2,3]{0,1} copy(p) "
              "ROOT r = (s32[], s32[], f32[2,3]) tuple(g, d, cp)", X[0, :2, :3])
    assert out[0] == 7 and out[1] == 3
    np.testing.assert_array_equal(out[2], X[0, :2, :3])


def test_constant_tuple_and_copy_start_done():
    out = run("c = (s32[2], f32[]) constant(({1, 2}, 3.5)) "
              "s = ((s32[2], f32[]), (s32[2], f32[]), u32[]) copy-start(c) "
              "ROOT d = (s32[2], f32[]) copy-done(s)")
    assert out[0].tolist() == [1, 2] and out[1] == 3.5


def test_bitcast_between_sub_byte_and_byte_types_packs_like_bitcast_convert():
    import ml_dtypes

    nibbles = np.array([[1, 2], [3, 4], [-1, 5]], ml_dtypes.int4)
    out = run("p = s4[3,2]{1,0:E(4)} parameter(0) ROOT b = s8[3]{0} bitcast(p)", nibbles)
    assert out.dtype == np.int8 and out.tolist() == [0x21, 0x43, 0x5F]
    back = run("p = s8[3]{0} parameter(0) ROOT b = s4[3,2]{1,0:E(4)} bitcast(p)", out)
    np.testing.assert_array_equal(back.astype(np.int8), nibbles.astype(np.int8))
