"""Every per-op map checked numerically against numpy's semantics of the op.

For seeded random small shapes, the op's output-to-input map is evaluated over its whole
domain, the operand is read at the mapped indices, and the result must reproduce the op's
output computed independently with numpy (`np.transpose`, `np.pad`, `np.einsum`, ...).
Operand values are distinct integers, so any wrong index shows up.
"""

from __future__ import annotations

import numpy as np
import pytest

from hlo_codegen.indexing import OperandIndexing, compute_output_to_input_indexing
from hlo_common.hlo.parser import parse_module

SEEDS = range(10)
ADD = "add { a = s64[] parameter(0)\n b = s64[] parameter(1)\n ROOT r = s64[] add(a, b) }\n"


def shp(dims, layout=None, dtype="s64") -> str:
    text = f"{dtype}[{','.join(str(int(d)) for d in dims)}]"
    if layout is not None:
        text += "{" + ",".join(str(int(i)) for i in layout) + "}"
    return text


def ints(values) -> str:
    return ",".join(str(int(v)) for v in values)


def distinct(rng, dims) -> np.ndarray:
    n = int(np.prod(dims))
    return (rng.permutation(n) + 1).astype(np.int64).reshape(tuple(int(d) for d in dims))


def root_indexing(body: str):
    return compute_output_to_input_indexing(parse_module(body).entry.root)


def read(oi: OperandIndexing, x: np.ndarray, rt_values=None):
    """(output points [N, rank], symbol values [N, k], operand values [N]) over the whole domain."""
    d, s, r = oi.map.evaluate_domain(rt_values)
    assert np.all(r >= 0) and np.all(r < np.array(x.shape)), "map reads out of bounds"
    return d, s, x[tuple(r.T)]


def fill(oi: OperandIndexing, x: np.ndarray, out_shape, background=0, exact_cover=True, rt_values=None):
    """Output built by reading `x` through a symbol-free map."""
    d, s, v = read(oi, x, rt_values)
    assert s.shape[1] == len(oi.map.rt_vars)
    out = np.full(out_shape, background, np.int64)
    out[tuple(d.T)] = v
    if exact_cover:
        assert len(d) == int(np.prod(out_shape)) == len({tuple(p) for p in d.tolist()})
    return out


def only(indexing, operand_id=0) -> OperandIndexing:
    (oi,) = indexing.indexing_maps[operand_id]
    return oi


@pytest.mark.parametrize("seed", SEEDS)
def test_transpose(seed):
    rng = np.random.default_rng(seed)
    dims = rng.integers(1, 5, rng.integers(1, 5))
    perm = rng.permutation(len(dims))
    x = distinct(rng, dims)
    want = np.transpose(x, perm)
    idx = root_indexing(f"ENTRY e {{ p = {shp(dims)} parameter(0)\n"
                        f" ROOT t = {shp(want.shape)} transpose(p), dimensions={{{ints(perm)}}} }}")
    np.testing.assert_array_equal(fill(only(idx), x, want.shape), want)


@pytest.mark.parametrize("seed", SEEDS)
def test_broadcast(seed):
    rng = np.random.default_rng(seed)
    out_dims = rng.integers(1, 4, rng.integers(1, 5))
    kept = sorted(rng.choice(len(out_dims), rng.integers(0, len(out_dims) + 1), replace=False).tolist())
    x = distinct(rng, out_dims[kept])
    expand = [slice(None) if i in kept else None for i in range(len(out_dims))]
    want = np.broadcast_to(x[tuple(expand)], tuple(out_dims))
    idx = root_indexing(f"ENTRY e {{ p = {shp(x.shape)} parameter(0)\n"
                        f" ROOT b = {shp(out_dims)} broadcast(p), dimensions={{{ints(kept)}}} }}")
    np.testing.assert_array_equal(fill(only(idx), x, want.shape), want)


def random_factorization(rng, n: int, rank: int) -> list[int]:
    dims = [1] * rank
    for p in _prime_factors(n):
        dims[rng.integers(0, rank)] *= p
    return dims


def _prime_factors(n: int) -> list[int]:
    out, f = [], 2
    while n > 1:
        while n % f == 0:
            out.append(f)
            n //= f
        f += 1
    return out


@pytest.mark.parametrize("seed", range(16))
def test_reshape(seed):
    rng = np.random.default_rng(seed)
    dims = random_factorization(rng, int(rng.choice([12, 16, 24, 30, 36, 48])), int(rng.integers(1, 5)))
    out = random_factorization(rng, int(np.prod(dims)), int(rng.integers(1, 5)))
    x = distinct(rng, dims)
    want = x.reshape(out)
    idx = root_indexing(f"ENTRY e {{ p = {shp(dims)} parameter(0)\n ROOT r = {shp(out)} reshape(p) }}")
    np.testing.assert_array_equal(fill(only(idx), x, want.shape), want)


def physical(x: np.ndarray, minor_to_major) -> np.ndarray:
    """The buffer of `x` stored with this layout, as a flat array."""
    return np.transpose(x, list(reversed(minor_to_major))).ravel()


@pytest.mark.parametrize("seed", range(16))
def test_bitcast_follows_layouts(seed):
    rng = np.random.default_rng(seed)
    dims = random_factorization(rng, int(rng.choice([12, 16, 24, 30])), int(rng.integers(1, 4)))
    out_dims = random_factorization(rng, int(np.prod(dims)), int(rng.integers(1, 4)))
    in_layout, out_layout = rng.permutation(len(dims)), rng.permutation(len(out_dims))
    x = distinct(rng, dims)
    buffer = physical(x, in_layout)
    major_to_minor = list(reversed(out_layout.tolist()))
    phys = buffer.reshape([out_dims[d] for d in major_to_minor])
    want = np.transpose(phys, np.argsort(major_to_minor))
    idx = root_indexing(f"ENTRY e {{ p = {shp(dims, in_layout)} parameter(0)\n"
                        f" ROOT b = {shp(out_dims, out_layout)} bitcast(p) }}")
    np.testing.assert_array_equal(fill(only(idx), x, want.shape), want)


@pytest.mark.parametrize("seed", SEEDS)
def test_slice(seed):
    rng = np.random.default_rng(seed)
    dims = rng.integers(1, 9, rng.integers(1, 4))
    spec = []
    for n in dims:
        start = int(rng.integers(0, n))
        limit = int(rng.integers(start + 1, n + 1))
        spec.append((start, limit, int(rng.integers(1, 4))))
    x = distinct(rng, dims)
    want = x[tuple(slice(a, b, c) for a, b, c in spec)]
    text = ", ".join(f"[{a}:{b}:{c}]" for a, b, c in spec)
    idx = root_indexing(f"ENTRY e {{ p = {shp(dims)} parameter(0)\n"
                        f" ROOT s = {shp(want.shape)} slice(p), slice={{{text}}} }}")
    np.testing.assert_array_equal(fill(only(idx), x, want.shape), want)


@pytest.mark.parametrize("seed", SEEDS)
def test_reverse(seed):
    rng = np.random.default_rng(seed)
    dims = rng.integers(1, 6, rng.integers(1, 4))
    axes = sorted(rng.choice(len(dims), rng.integers(0, len(dims) + 1), replace=False).tolist())
    x = distinct(rng, dims)
    want = np.flip(x, axes) if axes else x
    idx = root_indexing(f"ENTRY e {{ p = {shp(dims)} parameter(0)\n"
                        f" ROOT r = {shp(dims)} reverse(p), dimensions={{{','.join(map(str, axes))}}} }}")
    np.testing.assert_array_equal(fill(only(idx), x, want.shape), want)


def np_pad(x: np.ndarray, config, value: int) -> np.ndarray:
    """HLO pad: interior padding first, then edge padding (negative = cropping)."""
    for axis, (low, high, interior) in enumerate(config):
        n = x.shape[axis]
        size = n + max(n - 1, 0) * interior
        shape = list(x.shape)
        shape[axis] = size
        y = np.full(shape, value, np.int64)
        sl = [slice(None)] * x.ndim
        sl[axis] = slice(0, size, interior + 1)
        y[tuple(sl)] = x
        pads = [(0, 0)] * x.ndim
        pads[axis] = (max(low, 0), max(high, 0))
        y = np.pad(y, pads, constant_values=value)
        crop = [slice(None)] * x.ndim
        crop[axis] = slice(max(-low, 0), y.shape[axis] - max(-high, 0))
        x = y[tuple(crop)]
    return x


@pytest.mark.parametrize("seed", range(16))
def test_pad(seed):
    rng = np.random.default_rng(seed)
    dims = rng.integers(1, 6, rng.integers(1, 4))
    config = []
    for n in dims:
        interior = int(rng.integers(0, 3))
        size = n + (n - 1) * interior
        low, high = int(rng.integers(-size // 2, 4)), int(rng.integers(-size // 2, 4))
        config.append((low, high, interior))
    x = distinct(rng, dims)
    want = np_pad(x, config, -1)
    text = "x".join(f"{lo}_{hi}_{it}" for lo, hi, it in config)
    idx = root_indexing(f"ENTRY e {{ p = {shp(dims)} parameter(0)\n v = s64[] parameter(1)\n"
                        f" ROOT r = {shp(want.shape)} pad(p, v), padding={text} }}")
    got = fill(only(idx, 0), x, want.shape, background=-1, exact_cover=False)
    np.testing.assert_array_equal(got, want)
    assert only(idx, 1).map.num_results == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_concatenate(seed):
    rng = np.random.default_rng(seed)
    dims = rng.integers(1, 5, rng.integers(1, 4))
    axis = int(rng.integers(0, len(dims)))
    parts = []
    for _ in range(int(rng.integers(1, 4))):
        d = dims.copy()
        d[axis] = rng.integers(1, 5)
        parts.append(distinct(rng, d) + 1000 * len(parts))
    want = np.concatenate(parts, axis)
    params = "\n".join(f"p{i} = {shp(p.shape)} parameter({i})" for i, p in enumerate(parts))
    args = ", ".join(f"p{i}" for i in range(len(parts)))
    idx = root_indexing(f"ENTRY e {{ {params}\n ROOT c = {shp(want.shape)} concatenate({args}), "
                        f"dimensions={{{axis}}} }}")
    got = np.zeros(want.shape, np.int64)
    covered = 0
    for i, part in enumerate(parts):
        d, _, v = read(only(idx, i), part)
        got[tuple(d.T)] = v
        covered += len(d)
    assert covered == want.size
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", SEEDS)
def test_reduce_sum(seed):
    rng = np.random.default_rng(seed)
    dims = rng.integers(1, 5, rng.integers(1, 5))
    axes = sorted(rng.choice(len(dims), rng.integers(1, len(dims) + 1), replace=False).tolist())
    x = distinct(rng, dims)
    want = x.sum(axis=tuple(axes))
    idx = root_indexing(ADD + f"ENTRY e {{ p = {shp(dims)} parameter(0)\n z = s64[] constant(0)\n"
                        f" ROOT r = {shp(want.shape)} reduce(p, z), dimensions={{{ints(axes)}}},"
                        " to_apply=add }")
    d, s, v = read(only(idx), x)
    got = np.zeros(want.shape, np.int64)
    if want.ndim:
        np.add.at(got, tuple(d.T), v)
    else:
        got[()] = v.sum()
    np.testing.assert_array_equal(got, want)


def np_reduce_window_sum(x, size, stride, pad, base_dil, win_dil):
    padded = np_pad(x, [(lo, hi, b - 1) for (lo, hi), b in zip(pad, base_dil)], 0)
    extent = [(k - 1) * w + 1 for k, w in zip(size, win_dil)]
    out_shape = [(p - e) // s + 1 for p, e, s in zip(padded.shape, extent, stride)]
    out = np.zeros(out_shape, np.int64)
    for o in np.ndindex(*out_shape):
        for k in np.ndindex(*size):
            out[o] += padded[tuple(oi * s + ki * w for oi, s, ki, w in zip(o, stride, k, win_dil))]
    return out


@pytest.mark.parametrize("seed", range(12))
def test_reduce_window_sum(seed):
    rng = np.random.default_rng(seed)
    dims = rng.integers(1, 6, 2)
    size, stride = rng.integers(1, 4, 2), rng.integers(1, 3, 2)
    pad = [tuple(rng.integers(0, 3, 2)) for _ in range(2)]
    base_dil, win_dil = rng.integers(1, 3, 2), rng.integers(1, 3, 2)
    for i in range(2):  # make the padded input at least as large as the dilated window
        padded = dims[i] + sum(pad[i]) + (dims[i] - 1) * (base_dil[i] - 1)
        size[i] = min(size[i], (padded - 1) // win_dil[i] + 1)
    x = distinct(rng, dims)
    want = np_reduce_window_sum(x, size, stride, pad, base_dil, win_dil)
    window = (f"size={size[0]}x{size[1]} stride={stride[0]}x{stride[1]} "
              f"pad={pad[0][0]}_{pad[0][1]}x{pad[1][0]}_{pad[1][1]} "
              f"lhs_dilate={base_dil[0]}x{base_dil[1]} rhs_dilate={win_dil[0]}x{win_dil[1]}")
    idx = root_indexing(ADD + f"ENTRY e {{ p = {shp(dims)} parameter(0)\n z = s64[] constant(0)\n"
                        f" ROOT r = {shp(want.shape)} reduce-window(p, z), window={{{window}}},"
                        " to_apply=add }")
    d, _, v = read(only(idx), x)
    got = np.zeros(want.shape, np.int64)
    np.add.at(got, tuple(d.T), v)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", range(12))
def test_dot(seed):
    rng = np.random.default_rng(seed)
    nb, nc, nl, nr = (int(v) for v in (rng.integers(0, 2), rng.integers(1, 3), rng.integers(0, 2),
                                       rng.integers(0, 2)))
    sizes = {c: int(rng.integers(1, 4)) for c in "abcdefgh"}
    batch, contract, lfree, rfree = "ab"[:nb], "cd"[:nc], "ef"[:nl], "gh"[:nr]
    lhs_labels = "".join(rng.permutation(list(batch + lfree + contract)))
    rhs_labels = "".join(rng.permutation(list(batch + rfree + contract)))
    out_labels = batch + lfree + rfree
    lhs = distinct(rng, [sizes[c] for c in lhs_labels])
    rhs = distinct(rng, [sizes[c] for c in rhs_labels])
    want = np.einsum(f"{lhs_labels},{rhs_labels}->{out_labels}", lhs, rhs)

    def pos(labels, chars):
        return ",".join(str(labels.index(c)) for c in chars)

    idx = root_indexing(
        f"ENTRY e {{ l = {shp(lhs.shape)} parameter(0)\n r = {shp(rhs.shape)} parameter(1)\n"
        f" ROOT d = {shp(want.shape)} dot(l, r), lhs_batch_dims={{{pos(lhs_labels, batch)}}},"
        f" rhs_batch_dims={{{pos(rhs_labels, batch)}}},"
        f" lhs_contracting_dims={{{pos(lhs_labels, contract)}}},"
        f" rhs_contracting_dims={{{pos(rhs_labels, contract)}}} }}")
    lmap, rmap = only(idx, 0).map, only(idx, 1).map
    d, s, li = lmap.evaluate_domain()
    ri = np.stack([np.broadcast_to(np.asarray(v), (len(d),)) for v in rmap.evaluate(list(d.T), list(s.T))],
                  axis=1)
    got = np.zeros(want.shape, np.int64)
    np.add.at(got, tuple(d.T), lhs[tuple(li.T)] * rhs[tuple(ri.T)])
    np.testing.assert_array_equal(got, want)


def runtime_values(oi: OperandIndexing, values: dict[str, np.ndarray]):
    """Runtime-variable values per output point, read through the variables' own maps."""
    def fn(dims):
        out = []
        for rt in oi.rt_vars:
            where = [np.broadcast_to(np.asarray(v), dims[0].shape) for v in rt.map.evaluate(dims)]
            out.append(values[rt.hlo.name][tuple(where)])
        return out
    return fn


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("constant_starts", [False, True])
def test_dynamic_slice_clamps_starts(seed, constant_starts):
    rng = np.random.default_rng(seed)
    dims = rng.integers(1, 7, rng.integers(1, 4))
    sizes = [int(rng.integers(1, n + 1)) for n in dims]
    starts = [int(rng.integers(-2, n + 2)) for n in dims]
    x = distinct(rng, dims)
    clamped = [min(max(s, 0), n - k) for s, n, k in zip(starts, dims, sizes)]
    want = x[tuple(slice(c, c + k) for c, k in zip(clamped, sizes))]
    kind = "constant({})" if constant_starts else "parameter({})"
    decls = "\n".join(f"i{j} = s64[] " + kind.format(starts[j] if constant_starts else j + 1)
                      for j in range(len(dims)))
    args = ", ".join(f"i{j}" for j in range(len(dims)))
    idx = root_indexing(f"ENTRY e {{ p = {shp(dims)} parameter(0)\n {decls}\n ROOT ds = {shp(sizes)} "
                        f"dynamic-slice(p, {args}), dynamic_slice_sizes={{{','.join(map(str, sizes))}}} }}")
    oi = only(idx)
    assert len(oi.rt_vars) == (0 if constant_starts else len(dims))
    values = {f"i{j}": np.array(starts[j]) for j in range(len(dims))}
    np.testing.assert_array_equal(fill(oi, x, want.shape, rt_values=runtime_values(oi, values)), want)


@pytest.mark.parametrize("seed", SEEDS)
def test_dynamic_update_slice(seed):
    rng = np.random.default_rng(seed)
    dims = rng.integers(1, 7, rng.integers(1, 4))
    upd_dims = [int(rng.integers(1, n + 1)) for n in dims]
    starts = [int(rng.integers(-2, n + 2)) for n in dims]
    x, upd = distinct(rng, dims), distinct(rng, upd_dims) + 10000
    want = x.copy()
    clamped = [min(max(s, 0), n - k) for s, n, k in zip(starts, dims, upd_dims)]
    want[tuple(slice(c, c + k) for c, k in zip(clamped, upd_dims))] = upd
    decls = "\n".join(f"i{j} = s64[] parameter({j + 2})" for j in range(len(dims)))
    args = ", ".join(f"i{j}" for j in range(len(dims)))
    idx = root_indexing(f"ENTRY e {{ p = {shp(dims)} parameter(0)\n u = {shp(upd_dims)} parameter(1)\n"
                        f" {decls}\n ROOT dus = {shp(dims)} dynamic-update-slice(p, u, {args}) }}")
    got = fill(only(idx, 0), x, want.shape)
    oi = only(idx, 1)
    d, s, r = oi.map.evaluate_domain(runtime_values(oi, {f"i{j}": np.array(v) for j, v in enumerate(starts)}))
    assert len(d) == upd.size  # the domain is exactly the window the update is written to
    got[tuple(d.T)] = upd[tuple(r.T)]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", SEEDS)
def test_canonical_gather(seed):
    rng = np.random.default_rng(seed)
    dims = rng.integers(1, 6, rng.integers(1, 4))
    k = int(rng.integers(1, len(dims) + 1))
    start_map = sorted(rng.choice(len(dims), k, replace=False).tolist())
    sizes = [int(rng.integers(1, n + 1)) for n in dims]
    n_idx = int(rng.integers(1, 5))
    indices = rng.integers(-2, int(dims.max()) + 2, (n_idx, k))
    x = distinct(rng, dims)
    want = np.zeros([n_idx] + sizes, np.int64)
    for b in range(n_idx):
        start = [0] * len(dims)
        for j, dim_id in enumerate(start_map):
            start[dim_id] = min(max(int(indices[b, j]), 0), int(dims[dim_id]) - sizes[dim_id])
        want[b] = x[tuple(slice(s, s + n) for s, n in zip(start, sizes))]
    offset_dims = ",".join(str(i + 1) for i in range(len(dims)))
    idx = root_indexing(
        f"ENTRY e {{ p = {shp(dims)} parameter(0)\n ind = {shp(indices.shape)} parameter(1)\n"
        f" ROOT g = {shp(want.shape)} gather(p, ind), offset_dims={{{offset_dims}}},"
        " collapsed_slice_dims={},"
        f" start_index_map={{{','.join(map(str, start_map))}}}, index_vector_dim=1,"
        f" slice_sizes={{{','.join(map(str, sizes))}}} }}")
    oi = only(idx, 0)
    np.testing.assert_array_equal(fill(oi, x, want.shape, rt_values=runtime_values(oi, {"ind": indices})),
                                  want)
    d, s, r = only(idx, 1).map.evaluate_domain()  # the indices operand: whole row d0
    assert sorted({tuple(v) for v in r.tolist()}) == [(b, j) for b in range(n_idx) for j in range(k)]


def test_select_with_scalar_predicate_and_iota():
    idx = root_indexing("ENTRY e { p = pred[] parameter(0)\n a = s64[3,4] parameter(1)\n"
                        " b = s64[3,4] parameter(2)\n ROOT s = s64[3,4] select(p, a, b) }")
    d, _, r = only(idx, 0).map.evaluate_domain()
    assert d.shape == (12, 2) and r.shape == (12, 0)
    x = distinct(np.random.default_rng(0), (3, 4))
    np.testing.assert_array_equal(fill(only(idx, 1), x, (3, 4)), x)
    assert root_indexing("ENTRY e { ROOT i = s64[3,4] iota(), iota_dimension=1 }").indexing_maps == []
