"""The interpreter's split work: reductions by row blocks, dots and convolutions by blocks, converts
folded into the reduce that reads them. Each split must give the values of the unsplit
computation (or, for row blocks of a 2-D dot, values that depend on the shapes only), on any
number of threads.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_common.interpreter import Evaluator, convolution, evaluate, numeric, parallel, reduction
from hlo_common.parser import parse_module

RNG = np.random.default_rng(99)


def _bits(value) -> bytes:
    return value.tobytes()


@pytest.fixture(params=["1", "2"])
def threads(request, monkeypatch):
    monkeypatch.setenv(parallel.ENV_THREADS, request.param)
    return int(request.param)


REDUCE = """
HloModule r
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
max { a = f32[] parameter(0) b = f32[] parameter(1) ROOT m = f32[] maximum(a, b) }
ENTRY e {
  x = bf16[6,300,700] parameter(0)
  w = f32[6,300,700] convert(x)
  z = f32[] constant(0)
  s = f32[6,300] reduce(w, z), dimensions={2}, to_apply=add
  y = f32[6,300,700] parameter(1)
  ninf = f32[] constant(-inf)
  m = f32[6] reduce(y, ninf), dimensions={1,2}, to_apply=max
  sy = f32[6,300] reduce(y, z), dimensions={2}, to_apply=add
  ROOT t = (f32[6,300], f32[6], f32[6,300]) tuple(s, m, sy)
}
"""


def test_row_blocks_and_folded_converts_give_the_whole_array_values(threads, monkeypatch):
    module = parse_module(REDUCE)
    x = (RNG.standard_normal((6, 300, 700)) * 100).astype(ml_dtypes.bfloat16)
    y = (RNG.standard_normal((6, 300, 700)) * 1e4).astype(np.float32)
    got = evaluate(module, [x, y])
    monkeypatch.setattr(reduction, "PARALLEL_ELEMENTS", 1 << 62)  # one numpy call per reduce
    monkeypatch.setattr(Evaluator, "fold_converts", False)  # the convert makes an f32 array
    want = evaluate(module, [x, y])
    assert [_bits(g) for g in got] == [_bits(w) for w in want]
    np.testing.assert_allclose(got[0], x.astype(np.float64).sum(axis=2), rtol=1e-6)


def test_a_convert_is_folded_only_when_the_reduce_alone_reads_it():
    from hlo_common.interpreter.plan import Plan

    module = parse_module(REDUCE)
    ev = Evaluator()
    ev.evaluate(module, [np.zeros((6, 300, 700), ml_dtypes.bfloat16), np.zeros((6, 300, 700), np.float32)])
    names = [step[1].name for step in ev._plan(module.entry).variant_steps]
    assert "w" not in names and "s" in names
    shared = REDUCE.replace("ROOT t = (f32[6,300], f32[6], f32[6,300]) tuple(s, m, sy)",
                            "ROOT t = (f32[6,300], f32[6,300,700]) tuple(s, w)")
    plan = Plan(parse_module(shared).entry, lambda i: None)
    assert "w" in [step[1].name for step in plan.variant_steps]


def test_batched_dot_split_by_batch_changes_no_value(threads, monkeypatch):
    a = RNG.standard_normal((16, 256, 64)).astype(np.float32)
    b = RNG.standard_normal((16, 64, 256)).astype(np.float32)
    monkeypatch.setattr(numeric, "PARALLEL_WORK", 1)
    assert _bits(numeric.matmul(a, b)) == _bits(np.matmul(a, b))


def test_row_blocks_of_a_dot_depend_on_the_shape_only(monkeypatch):
    a = RNG.standard_normal((1000, 300)).astype(np.float32)
    b = RNG.standard_normal((300, 200)).astype(np.float32)
    monkeypatch.setattr(numeric, "PARALLEL_WORK", 1)
    results = []
    for n in ("1", "2", "3"):
        monkeypatch.setenv(parallel.ENV_THREADS, n)
        results.append(_bits(numeric.matmul(a, b)))
    assert results[0] == results[1] == results[2]
    np.testing.assert_allclose(np.frombuffer(results[0], np.float32).reshape(1000, 200), a @ b,
                               rtol=1e-4, atol=1e-4)


CONV = """
HloModule c
ENTRY e {
  x = f32[8,9,7,6] parameter(0)
  k = f32[3,2,GROUP_IN,8] parameter(1)
  ROOT y = f32[OUT_BATCH,9,4,8] convolution(x, k), window={size=3x2 stride=1x2 pad=1_1x0_1},
    dim_labels=b01f_01io->b01f, GROUPS
}
"""


@pytest.mark.parametrize("group_in, out_batch, groups", [
    (3, 8, "feature_group_count=2"), (6, 4, "batch_group_count=2"), (6, 8, "feature_group_count=1")])
def test_convolution_in_blocks_of_images(monkeypatch, group_in, out_batch, groups):
    text = CONV.replace("GROUP_IN", str(group_in)).replace("OUT_BATCH", str(out_batch))
    module = parse_module(text.replace("GROUPS", groups))
    x = RNG.standard_normal((8, 9, 7, 6)).astype(np.float32)
    k = RNG.standard_normal((3, 2, group_in, 8)).astype(np.float32)
    results = {}
    for block in (1, 1 << 40):  # one image per block, every image in one block
        monkeypatch.setattr(convolution, "BLOCK_ELEMENTS", block)
        for n in ("1", "2"):
            monkeypatch.setenv(parallel.ENV_THREADS, n)
            results[block, n] = evaluate(module, [x, k])
        assert _bits(results[block, "1"]) == _bits(results[block, "2"])
    np.testing.assert_allclose(results[1, "1"], results[1 << 40, "1"], rtol=1e-5, atol=1e-5)
