"""Composition through fusions checked numerically: random chains of index-only ops.

A seeded random chain (transpose, reshape, slice, reverse, broadcast, pad, elementwise) is
applied to one parameter with numpy and written as a fused computation; the fusion's
output-to-parameter maps must read exactly the elements numpy produced.
"""

from __future__ import annotations

import numpy as np
import pytest

from hlo_codegen.indexing import compute_output_to_input_indexing
from hlo_common.hlo.parser import parse_module

from test_indexing_numeric import distinct, np_pad, random_factorization, shp


def _transpose(rng, x):
    perm = rng.permutation(x.ndim).tolist()
    return np.transpose(x, perm), f"transpose(X), dimensions={{{','.join(map(str, perm))}}}"


def _reshape(rng, x):
    out = random_factorization(rng, x.size, int(rng.integers(1, 4)))
    return x.reshape(out), "reshape(X)"


def _slice(rng, x):
    spec = []
    for n in x.shape:
        start = int(rng.integers(0, n))
        spec.append((start, int(rng.integers(start + 1, n + 1)), int(rng.integers(1, 3))))
    text = ", ".join(f"[{a}:{b}:{c}]" for a, b, c in spec)
    return x[tuple(slice(a, b, c) for a, b, c in spec)], f"slice(X), slice={{{text}}}"


def _reverse(rng, x):
    axes = sorted(rng.choice(x.ndim, int(rng.integers(1, x.ndim + 1)), replace=False).tolist())
    return np.flip(x, axes), f"reverse(X), dimensions={{{','.join(map(str, axes))}}}"


def _broadcast(rng, x):
    if x.ndim >= 4:
        return _transpose(rng, x)
    pos = int(rng.integers(0, x.ndim + 1))
    out = list(x.shape)
    out.insert(pos, int(rng.integers(1, 4)))
    kept = [i for i in range(len(out)) if i != pos]
    return (np.broadcast_to(np.expand_dims(x, pos), out),
            f"broadcast(X), dimensions={{{','.join(map(str, kept))}}}")


def _negate(rng, x):
    return -x, "negate(X)"


STEPS = [_transpose, _reshape, _slice, _reverse, _broadcast, _negate]


def random_chain(seed: int, with_pad: bool):
    rng = np.random.default_rng(seed)
    dims = random_factorization(rng, int(rng.choice([12, 16, 24])), int(rng.integers(1, 4)))
    x = distinct(rng, dims)
    y, lines, prev = x, [f"p0 = {shp(dims)} parameter(0)"], "p0"
    steps = [STEPS[i] for i in rng.integers(0, len(STEPS), int(rng.integers(2, 6)))]
    if with_pad:
        steps.insert(int(rng.integers(0, len(steps) + 1)), "pad")
    for k, step in enumerate(steps):
        if step == "pad":
            config = [(int(rng.integers(-1 if n > 1 else 0, 3)), int(rng.integers(0, 3)),
                       int(rng.integers(0, 2))) for n in y.shape]
            y = np_pad(y, config, 0)
            text = "x".join(f"{a}_{b}_{c}" for a, b, c in config)
            lines.append(f"zero{k} = s64[] constant(0)")
            lines.append(f"op{k} = {shp(y.shape)} pad({prev}, zero{k}), padding={text}")
        else:
            y, template = step(rng, y)
            lines.append(f"op{k} = {shp(y.shape)} {template.replace('(X)', f'({prev})')}")
        prev = f"op{k}"
    lines[-1] = "ROOT " + lines[-1]
    body = "\n ".join(lines)
    hlo = (f"f {{ {body} }}\nENTRY e {{ p = {shp(dims)} parameter(0)\n"
           f" ROOT fusion = {shp(y.shape)} fusion(p), kind=kLoop, calls=f }}")
    return x, y, hlo


def gather_all(maps, x, out_shape):
    got = np.zeros(out_shape, np.int64)
    covered = np.zeros(out_shape, bool)
    for m in maps:
        d, s, r = m.evaluate_domain()
        assert s.shape[1] == 0
        got[tuple(d.T)] = x[tuple(r.T)]
        covered[tuple(d.T)] = True
    return got, covered


@pytest.mark.parametrize("seed", range(24))
def test_chain_of_index_ops_reads_the_right_elements(seed):
    x, want, hlo = random_chain(seed, with_pad=False)
    indexing = compute_output_to_input_indexing(parse_module(hlo).entry.root)
    maps = indexing.maps(0)
    assert len(maps) == 1, [str(m) for m in maps]
    got, covered = gather_all(maps, x, want.shape)
    assert covered.all()
    np.testing.assert_array_equal(np.abs(got), np.abs(want))


@pytest.mark.parametrize("seed", range(12))
def test_chain_with_pad_reads_the_right_elements_and_only_them(seed):
    x, want, hlo = random_chain(seed, with_pad=True)
    indexing = compute_output_to_input_indexing(parse_module(hlo).entry.root)
    got, covered = gather_all(indexing.maps(0), x, want.shape)
    np.testing.assert_array_equal(np.abs(got[covered]), np.abs(want[covered]))
    assert np.all(want[~covered] == 0)  # uncovered points are exactly the padding
