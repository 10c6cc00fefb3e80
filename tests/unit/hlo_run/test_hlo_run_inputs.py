"""hlo_run.inputs: the documented --seed rule (ranges, determinism, constrained parameters)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlo_common.hlo.parser import parse_module
from hlo_run.inputs import make_fake_arguments


def _args(text: str, seed: int = 0):
    return make_fake_arguments(parse_module(text), seed)


def test_floats_follow_the_documented_recipe():
    # The rule, spelled out with numpy directly: default_rng([seed, i]).uniform(-1, 1, n), rounded.
    args = _args("ENTRY e { p = f32[3,4] parameter(0) q = bf16[5] parameter(1) "
                 "ROOT t = (f32[3,4], bf16[5]) tuple(p, q) }", seed=7)
    want0 = np.random.default_rng([7, 0]).uniform(-1.0, 1.0, 12).astype(np.float32).reshape(3, 4)
    want1 = np.random.default_rng([7, 1]).uniform(-1.0, 1.0, 5).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(args[0], want0)
    assert args[1].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(args[1].view(np.uint16), want1.view(np.uint16))


def test_same_seed_same_arrays_other_seed_other_arrays():
    text = "ENTRY e { p = f32[64] parameter(0) ROOT n = f32[64] negate(p) }"
    a, b, c = _args(text, 3)[0], _args(text, 3)[0], _args(text, 4)[0]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.min() >= -1.0 and a.max() < 1.0


def test_integer_pred_and_complex_ranges():
    args = _args("ENTRY e { a = s32[1000] parameter(0) b = u8[1000] parameter(1) c = pred[1000] parameter(2) "
                 "d = c64[10] parameter(3) f = s4[100] parameter(4) "
                 "ROOT t = (s32[1000], u8[1000], pred[1000], c64[10], s4[100]) tuple(a, b, c, d, f) }")
    a, b, c, d, f = args
    assert a.dtype == np.int32 and a.min() >= -8 and a.max() <= 7 and a.min() < 0
    assert b.dtype == np.uint8 and b.max() <= 15
    assert c.dtype == np.bool_ and 0 < c.sum() < 1000
    assert d.dtype == np.complex64 and np.all(np.abs(d.real) <= 1) and np.any(d.imag != 0)
    assert f.dtype == ml_dtypes.int4


def test_dynamic_slice_starts_stay_in_bounds():
    text = """ENTRY e {
      p = f32[10,6] parameter(0) i = s32[] parameter(1) j = s32[] parameter(2)
      ROOT d = f32[4,6] dynamic-slice(p, i, j), dynamic_slice_sizes={4,6} }"""
    for seed in range(20):
        _, i, j = _args(text, seed)
        assert 0 <= int(i) <= 6 and int(j) == 0


def test_dynamic_update_slice_start_through_convert_and_fusion():
    text = """
    fused {
      p0 = f32[8] parameter(0) p1 = f32[3] parameter(1) p2 = s64[] parameter(2)
      c = s32[] convert(p2)
      ROOT u = f32[8] dynamic-update-slice(p0, p1, c)
    }
    ENTRY e {
      a = f32[8] parameter(0) b = f32[3] parameter(1) k = s64[] parameter(2)
      ROOT f = f32[8] fusion(a, b, k), kind=kLoop, calls=fused }"""
    seen = {int(_args(text, seed)[2]) for seed in range(40)}
    assert seen <= set(range(6)) and len(seen) > 2


def test_gather_indices_bounded_and_sorted_when_asked():
    text = """ENTRY e {
      p = f32[5,4] parameter(0) i = s32[50,1] parameter(1)
      ROOT g = f32[50,4] gather(p, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
        index_vector_dim=1, slice_sizes={1,4}, indices_are_sorted=true }"""
    idx = _args(text)[1].reshape(-1)
    assert idx.min() >= 0 and idx.max() <= 4 and len(set(idx.tolist())) > 1
    assert np.all(np.diff(idx) >= 0)


def test_scatter_indices_bounded():
    text = """
    add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
    ENTRY e {
      p = f32[7] parameter(0) i = s32[20,1] parameter(1) u = f32[20] parameter(2)
      ROOT s = f32[7] scatter(p, i, u), update_window_dims={}, inserted_window_dims={0},
        scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add }"""
    idx = _args(text)[1]
    assert idx.min() >= 0 and idx.max() <= 6


def test_reduce_init_values_are_identities():
    text = """
    add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
    mul { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] multiply(a, b) }
    max { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] maximum(a, b) }
    ENTRY e {
      x = f32[4,5] parameter(0) z = f32[] parameter(1) y = s32[4] parameter(2) o = s32[] parameter(3)
      m = f32[] parameter(4)
      r0 = f32[4] reduce(x, z), dimensions={1}, to_apply=add
      r1 = s32[] reduce(y, o), dimensions={0}, to_apply=mul
      r2 = f32[4] reduce(x, m), dimensions={1}, to_apply=max
      ROOT t = (f32[4], s32[], f32[4]) tuple(r0, r1, r2) }"""
    args = _args(text)
    assert float(args[1]) == 0.0 and int(args[3]) == 1 and float(args[4]) == -np.inf


def test_key_value_sort_keys_are_distinct():
    text = """
    lt { a = s32[] parameter(0) b = s32[] parameter(1) c = f32[] parameter(2) d = f32[] parameter(3)
         ROOT r = pred[] compare(a, b), direction=LT }
    ENTRY e { k = s32[64] parameter(0) v = f32[64] parameter(1)
      ROOT s = (s32[64], f32[64]) sort(k, v), dimensions={0}, to_apply=lt }"""
    keys = _args(text)[0]
    assert sorted(keys.tolist()) == list(range(-32, 32))


def test_tuple_and_token_parameters():
    from hlo_common.interpreter.registry import TOKEN

    args = _args("ENTRY e { p = (f32[2], (s32[3])) parameter(0) t = token[] parameter(1) "
                 "ROOT g = f32[2] get-tuple-element(p), index=0 }")
    assert isinstance(args[0], tuple) and args[0][0].shape == (2,) and args[0][1][0].dtype == np.int32
    assert args[1] is TOKEN


def test_index_read_from_sliced_data_stays_in_bounds_of_every_use():
    # off = p[0] starts a slice of p; off2 = that slice's element 1 starts a slice of the slice:
    # both uses bound the values (44 and 10), so every element of p is in [0, 10].
    text = """ENTRY e {
      p = s32[64] parameter(0)
      t1 = s32[1] slice(p), slice={[0:1]}
      off = s32[] reshape(t1)
      d1 = s32[20] dynamic-slice(p, off), dynamic_slice_sizes={20}
      t2 = s32[1] slice(d1), slice={[1:2]}
      off2 = s32[] reshape(t2)
      ROOT d2 = s32[10] dynamic-slice(d1, off2), dynamic_slice_sizes={10} }"""
    p = _args(text)[0]
    assert p.min() >= 0 and p.max() <= 10 and p.max() > 5


def test_bf16_sort_keys_are_distinct_along_the_sorted_dimension():
    # 16 rows of 256 keys: one iota per row fits bf16's 8 significant bits; 4096 in one would not.
    text = """
    gt { a = bf16[] parameter(0) b = bf16[] parameter(1) c = s32[] parameter(2) d = s32[] parameter(3)
         ROOT r = pred[] compare(a, b), direction=GT }
    ENTRY e { k = bf16[16,256] parameter(0) v = s32[16,256] parameter(1)
      ROOT s = (bf16[16,256], s32[16,256]) sort(k, v), dimensions={1}, to_apply=gt }"""
    keys = _args(text)[0].astype(np.float32)
    for row in keys:
        assert sorted(row.tolist()) == list(range(-128, 128))
    assert not np.array_equal(keys[0], keys[1])
