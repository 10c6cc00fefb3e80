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
from hlo_common.hlo.parser import parse_module

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
    # rows of 700 sum in f32 as a pairwise tree: within about 20 ulps of the sum of magnitudes
    wide = x.astype(np.float64)
    bound = 24 * np.finfo(np.float32).eps * np.abs(wide).sum(axis=2)
    assert np.all(np.abs(got[0] - wide.sum(axis=2)) <= bound)


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


FUSED = """
HloModule f
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
maxbf { a = bf16[] parameter(0) b = bf16[] parameter(1) ROOT m = bf16[] maximum(a, b) }
ENTRY e {
  x = bf16[4,96,1000] parameter(0)
  c = bf16[] constant(0.7)
  cb = bf16[4,96,1000] broadcast(c), dimensions={}
  sq = bf16[4,96,1000] multiply(x, x)
  sh = bf16[4,96,1000] subtract(sq, cb)
  w = f32[4,96,1000] convert(sh)
  z = f32[] constant(1.5)
  s = f32[4,96] reduce(w, z), dimensions={2}, to_apply=add
  ninf = bf16[] constant(-inf)
  m = bf16[4] reduce(sh, ninf), dimensions={1,2}, to_apply=maxbf
  col = f32[4,1000] reduce(w, z), dimensions={1}, to_apply=add
  ROOT t = (f32[4,96], bf16[4], f32[4,1000]) tuple(s, m, col)
}
"""


def test_reductions_computed_inside_a_region_equal_whole_array_reductions(monkeypatch):
    from hlo_common.interpreter import regions

    module = parse_module(FUSED)
    x = (RNG.standard_normal((4, 96, 1000)) * 3).astype(ml_dtypes.bfloat16)
    monkeypatch.setattr(regions, "CHUNK_ELEMENTS", 1 << 16)  # slabs of 64 rows of 1000: dim 1 is cut
    ev = Evaluator()
    got = ev.evaluate(module, [x])
    region = next(s[0].__self__ for s in ev._plan(module.entry).variant_steps
                  if isinstance(getattr(s[0], "__self__", None), regions.Region))
    # m spans the dim the slabs cut, col does not reduce trailing dims: both read whole arrays
    assert [r.reduce.name for r in region.reductions] == ["s"]
    assert [o.name for o in region.outputs] == ["sh", "w"]  # sq is never written out
    monkeypatch.setattr(regions, "MIN_ELEMENTS", 1 << 62)
    monkeypatch.setattr(Evaluator, "fold_converts", False)
    assert [_bits(g) for g in got] == [_bits(w) for w in evaluate(module, [x])]


def test_a_reduction_through_a_folded_convert_leaves_only_what_others_read(monkeypatch):
    from hlo_common.interpreter import regions

    text = FUSED.replace("  col = f32[4,1000] reduce(w, z), dimensions={1}, to_apply=add\n", "")
    module = parse_module(text.replace("(f32[4,96], bf16[4], f32[4,1000]) tuple(s, m, col)",
                                       "(f32[4,96], bf16[4]) tuple(s, m)"))
    x = (RNG.standard_normal((4, 96, 1000)) * 3).astype(ml_dtypes.bfloat16)
    monkeypatch.setattr(regions, "CHUNK_ELEMENTS", 1 << 16)  # slabs of 64 rows of 1000: dim 1 is cut
    ev = Evaluator()
    got = ev.evaluate(module, [x])
    region = next(s[0].__self__ for s in ev._plan(module.entry).variant_steps
                  if isinstance(getattr(s[0], "__self__", None), regions.Region))
    assert [r.reduce.name for r in region.reductions] == ["s"]
    assert [o.name for o in region.outputs] == ["sh"]  # read by m; sq and w are never written out
    monkeypatch.setattr(regions, "MIN_ELEMENTS", 1 << 62)
    monkeypatch.setattr(Evaluator, "fold_converts", False)
    assert [_bits(g) for g in got] == [_bits(w) for w in evaluate(module, [x])]


def test_a_reduced_member_is_never_overwritten_by_a_later_member(monkeypatch):
    # sq's last reader is pl, which could compute into sq's array (pl is not an output), but the
    # region reduces sq after the slab's members ran: sq must keep its values.
    from hlo_common.interpreter import regions

    text = """
    HloModule f
    add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
    ENTRY e {
      x = f32[512,1000] parameter(0)
      sq = f32[512,1000] multiply(x, x)
      pl = f32[512,1000] add(sq, x)
      q = f32[512,1000] multiply(pl, x)
      z = f32[] constant(0)
      s = f32[512] reduce(sq, z), dimensions={1}, to_apply=add
      ROOT t = (f32[512], f32[512,1000]) tuple(s, q)
    }"""
    module = parse_module(text)
    x = RNG.standard_normal((512, 1000)).astype(np.float32)
    s, q = evaluate(module, [x])
    np.testing.assert_allclose(s, (x.astype(np.float64) ** 2).sum(axis=1), rtol=1e-5)
    monkeypatch.setattr(regions, "MIN_ELEMENTS", 1 << 62)
    assert [_bits(v) for v in (s, q)] == [_bits(v) for v in evaluate(module, [x])]


def test_a_forked_child_gets_its_own_threads(monkeypatch):
    import multiprocessing

    monkeypatch.setenv(parallel.ENV_THREADS, "2")
    a = RNG.standard_normal((8, 256, 64)).astype(np.float32)
    b = RNG.standard_normal((8, 64, 256)).astype(np.float32)
    monkeypatch.setattr(numeric, "PARALLEL_WORK", 1)
    want = numeric.matmul(a, b)  # the parent's pool exists now
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_matmul_in_child, (a, b)).get(timeout=60)  # hangs on the parent's pool
    assert _bits(got) == _bits(want)


def _matmul_in_child(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    numeric.PARALLEL_WORK = 1
    return numeric.matmul(a, b)
