"""Reference interpreter: gather and scatter.

Expectations are explicit loops written here from XLA's operation semantics: gather clamps each
start so the slice fits, scatter skips an update window that would leave the operand and applies
duplicate indices in order. A few cases are also checked against XLA:CPU when jax is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.interpreter import evaluate
from hlo_common.hlo.parser import parse_module

RNG = np.random.default_rng(5)


def run(text: str, *args):
    return evaluate(parse_module(text), list(args))


def ints(values) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def dims(shape) -> str:
    return ",".join(str(d) for d in shape)


def start_vector(indices, batch_index, ivd, index_map, operand_batching, indices_batching, rank):
    """The operand start for one batch position (index_vector_dim may be the implicit last dim)."""
    if ivd == indices.ndim:
        indices = indices[..., None]
    where = list(batch_index)
    where.insert(ivd, slice(None))
    vec = indices[tuple(where)]
    start = [0] * rank
    for k, d in enumerate(index_map):
        start[d] = int(vec[k])
    for od, idim in zip(operand_batching, indices_batching):
        start[od] = batch_index[idim if idim < ivd else idim - 1]
    return start


def gather_reference(operand, indices, offset_dims, collapsed, index_map, ivd, slice_sizes,
                     operand_batching=(), indices_batching=()):
    batch_shape = [d for k, d in enumerate(indices.shape if ivd < indices.ndim else indices.shape + (1,))
                   if k != ivd]
    window_dims = [d for d in range(operand.ndim) if d not in collapsed and d not in operand_batching]
    out_rank = len(batch_shape) + len(window_dims)
    out_shape, b, w = [], 0, 0
    for pos in range(out_rank):
        if pos in offset_dims:
            out_shape.append(slice_sizes[window_dims[w]])
            w += 1
        else:
            out_shape.append(batch_shape[b])
            b += 1
    out = np.empty(out_shape, operand.dtype)
    for o in np.ndindex(*out_shape):
        batch_index = [o[p] for p in range(out_rank) if p not in offset_dims]
        offsets = [o[p] for p in offset_dims]
        start = start_vector(indices, batch_index, ivd, index_map, operand_batching, indices_batching,
                             operand.ndim)
        full = []
        for d in range(operand.ndim):
            s = min(max(start[d], 0), operand.shape[d] - slice_sizes[d])
            full.append(s + (offsets[window_dims.index(d)] if d in window_dims else 0))
        out[o] = operand[tuple(full)]
    return out


def scatter_reference(operand, indices, updates, window_dims_u, inserted, index_map, ivd, combine,
                      operand_batching=(), indices_batching=()):
    out = operand.copy()
    window_dims = [d for d in range(operand.ndim) if d not in inserted and d not in operand_batching]
    sizes = {d: updates.shape[u] for d, u in zip(window_dims, window_dims_u)}
    for u in np.ndindex(*updates.shape):  # row-major: scatter dims come first in these tests
        batch_index = [u[k] for k in range(updates.ndim) if k not in window_dims_u]
        wpos = [u[k] for k in window_dims_u]
        start = start_vector(indices, batch_index, ivd, index_map, operand_batching, indices_batching,
                             operand.ndim)
        if any(not 0 <= start[d] <= operand.shape[d] - sizes.get(d, 1) for d in range(operand.ndim)):
            continue  # the whole window is dropped
        full = tuple(start[d] + (wpos[window_dims.index(d)] if d in window_dims else 0)
                     for d in range(operand.ndim))
        out[full] = combine(out[full], updates[u])
    return out


# -- gather ----------------------------------------------------------------------------------------

GATHER_CASES = [
    # operand shape, indices (array), offset_dims, collapsed, start_index_map, ivd, slice_sizes
    ((5, 6), [[0, 1], [4, 5], [-3, 2], [3, 9]], (1, 2), (), (0, 1), 1, (2, 3)),  # clamped starts
    ((5, 6), [[0, 1], [4, 5], [2, 2]], (1,), (0,), (0, 1), 1, (1, 3)),
    ((5, 6), [[0, 4, 2], [1, 5, 0]], (0,), (0,), (0, 1), 0, (1, 3)),  # index vector dim first
    ((5, 6), [[0, 4], [2, 7]], (1,), (0,), (0,), 2, (1, 6)),  # implicit trailing index vector dim
    ((4, 3, 2), [[3], [0]], (0, 2), (1,), (1,), 1, (4, 1, 2)),  # offset dims around the batch dim
]


@pytest.mark.parametrize("case", GATHER_CASES, ids=[f"g{k}" for k in range(len(GATHER_CASES))])
def test_gather_matches_loops(case):
    oshape, idx, offset_dims, collapsed, index_map, ivd, slice_sizes = case
    operand = RNG.standard_normal(oshape).astype(np.float32)
    indices = np.array(idx, np.int32)
    want = gather_reference(operand, indices, offset_dims, collapsed, index_map, ivd, slice_sizes)
    text = (f"HloModule m\nENTRY e "
            f"{{\no = f32[{dims(oshape)}] parameter(0)\ni = s32[{dims(indices.shape)}] parameter(1)\n"
            f"ROOT g = f32[{dims(want.shape)}] gather(o, i), offset_dims={ints(offset_dims)}, "
            f"collapsed_slice_dims={ints(collapsed)}, start_index_map={ints(index_map)}, "
            f"index_vector_dim={ivd}, slice_sizes={ints(slice_sizes)}\n}}")
    np.testing.assert_array_equal(run(text, operand, indices), want)


def test_gather_with_batching_dims():
    operand = RNG.standard_normal((3, 5, 4)).astype(np.float32)
    indices = RNG.integers(-1, 7, (2, 3, 1)).astype(np.int64)  # some out of range: clamped
    want = gather_reference(operand, indices, (2,), (1,), (1,), 2, (1, 1, 4), (0,), (1,))
    text = ("HloModule m\nENTRY e {\no = f32[3,5,4] parameter(0)\ni = s64[2,3,1] parameter(1)\n"
            f"ROOT g = f32[{dims(want.shape)}] gather(o, i), offset_dims={{2}}, collapsed_slice_dims={{1}}, "
            "start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={1}, "
            "index_vector_dim=2, slice_sizes={1,1,4}\n}")
    np.testing.assert_array_equal(run(text, operand, indices), want)


def test_gather_unsigned_indices_clamp_high():
    operand = np.arange(10, dtype=np.int32)
    indices = np.array([[3], [2**32 - 1]], np.uint32)
    text = ("HloModule m\nENTRY e {\no = s32[10] parameter(0)\ni = u32[2,1] parameter(1)\n"
            "ROOT g = s32[2,2] gather(o, i), offset_dims={1}, collapsed_slice_dims={}, start_index_map={0}, "
            "index_vector_dim=1, slice_sizes={2}\n}")
    np.testing.assert_array_equal(run(text, operand, indices), [[3, 4], [8, 9]])


# -- scatter ---------------------------------------------------------------------------------------

COMBINERS = {
    "add": ("f32", "add", lambda a, b: a + b),
    "sub": ("f32", "subtract", lambda a, b: a - b),  # non-commutative: order of duplicates matters
    "max": ("f32", "maximum", max),
    "mul": ("f32", "multiply", lambda a, b: a * b),
}


def combiner(name: str) -> str:
    t, op, _ = COMBINERS[name]
    return f"{name} {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT r = {t}[] {op}(a, b) }}\n"


@pytest.mark.parametrize("name", sorted(COMBINERS))
def test_scatter_rows_with_duplicates_and_out_of_bounds(name):
    operand = RNG.integers(-3, 4, (5, 4)).astype(np.float32)
    indices = np.array([[0], [2], [0], [4], [7], [-1], [2], [0]], np.int32)  # 7 and -1 are dropped
    updates = RNG.integers(-3, 4, (8, 4)).astype(np.float32)
    want = scatter_reference(operand, indices, updates, (1,), (0,), (0,), 1, COMBINERS[name][2])
    text = (f"HloModule m\n{combiner(name)}\nENTRY e "
            f"{{\no = f32[5,4] parameter(0)\ni = s32[8,1] parameter(1)\n"
            "u = f32[8,4] parameter(2)\nROOT s = f32[5,4] scatter(o, i, u), update_window_dims={1}, "
            f"inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, "
            f"to_apply={name}\n}}")
    np.testing.assert_array_equal(run(text, operand, indices, updates), want)


def test_scatter_window_partly_outside_is_skipped_entirely():
    operand = np.zeros((4, 4), np.float32)
    indices = np.array([[0, 0], [3, 3], [2, 1], [2, 3]], np.int32)  # 2x2 windows at (3,3), (2,3) overflow
    updates = np.ones((4, 2, 2), np.float32)
    want = scatter_reference(operand, indices, updates, (1, 2), (), (0, 1), 1, lambda a, b: a + b)
    text = (f"HloModule m\n{combiner('add')}\nENTRY e "
            f"{{\no = f32[4,4] parameter(0)\ni = s32[4,2] parameter(1)\n"
            "u = f32[4,2,2] parameter(2)\nROOT s = f32[4,4] scatter(o, i, u), update_window_dims={1,2}, "
            "inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, "
            "to_apply=add\n}")
    got = run(text, operand, indices, updates)
    np.testing.assert_array_equal(got, want)
    assert got.sum() == 8  # only the two in-bounds windows landed


def test_scatter_overwrite_last_update_wins():
    comp = "assign { a = s32[] parameter(0)  ROOT b = s32[] parameter(1) }\n"
    operand = np.zeros(4, np.int32)
    indices = np.array([1, 3, 1, 1, 0], np.int32)  # implicit index vector dim
    updates = np.array([10, 20, 30, 40, 50], np.int32)
    text = (f"HloModule m\n{comp}\nENTRY e {{\no = s32[4] parameter(0)\ni = s32[5] parameter(1)\n"
            "u = s32[5] parameter(2)\nROOT s = s32[4] scatter(o, i, u), update_window_dims={}, "
            "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
            "to_apply=assign\n}")
    np.testing.assert_array_equal(run(text, operand, indices, updates), [50, 40, 0, 20])


def test_scatter_integer_add_wraps():
    comp = "add8 { a = s8[] parameter(0)  b = s8[] parameter(1)  ROOT r = s8[] add(a, b) }\n"
    operand = np.array([100, 0], np.int8)
    indices = np.array([[0], [0], [0]], np.int32)
    updates = np.array([100, 100, 100], np.int8)
    text = (f"HloModule m\n{comp}\nENTRY e {{\no = s8[2] parameter(0)\ni = s32[3,1] parameter(1)\n"
            "u = s8[3] parameter(2)\nROOT s = s8[2] scatter(o, i, u), update_window_dims={}, "
            "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
            "to_apply=add8\n}")
    assert run(text, operand, indices, updates)[0] == 400 - 512  # 400 = 0x190 wraps to -112


def test_scatter_variadic_with_general_combiner():
    comp = ("pair { a = f32[] parameter(0)  b = s32[] parameter(1)  c = f32[] parameter(2)  d = s32[] "
            "parameter(3)\n"
            "  s = f32[] subtract(a, c)  t = s32[] add(b, d)  ROOT r = (f32[], s32[]) tuple(s, t) }\n")
    operand = RNG.integers(-3, 4, (4, 3)).astype(np.float32)
    counts = np.zeros((4, 3), np.int32)
    indices = np.array([[1], [1], [3], [1]], np.int32)
    updates = RNG.integers(-3, 4, (4, 3)).astype(np.float32)
    ones = np.ones((4, 3), np.int32)
    text = (f"HloModule m\n{comp}\nENTRY e {{\no = f32[4,3] parameter(0)\nc = s32[4,3] parameter(1)\n"
            "i = s32[4,1] parameter(2)\nu = f32[4,3] parameter(3)\nw = s32[4,3] parameter(4)\n"
            "ROOT s = (f32[4,3], s32[4,3]) scatter(o, c, i, u, w), update_window_dims={1}, "
            "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
            "to_apply=pair\n}")
    values, seen = run(text, operand, counts, indices, updates, ones)
    np.testing.assert_array_equal(values, scatter_reference(operand, indices, updates, (1,), (0,), (0,), 1,
                                                            lambda a, b: a - b))
    np.testing.assert_array_equal(seen[:, 0], [0, 3, 0, 1])


def test_scatter_with_batching_dims():
    operand = RNG.integers(-3, 4, (2, 5, 3)).astype(np.float32)
    indices = np.array([[[1], [4]], [[1], [1]]], np.int32)  # [scatter=2, batch=2, 1]
    updates = RNG.integers(-3, 4, (2, 2, 3)).astype(np.float32)
    want = scatter_reference(operand, indices, updates, (2,), (1,), (1,), 2, lambda a, b: a + b, (0,), (1,))
    text = (f"HloModule m\n{combiner('add')}\nENTRY e "
            f"{{\no = f32[2,5,3] parameter(0)\ni = s32[2,2,1] parameter(1)\n"
            "u = f32[2,2,3] parameter(2)\nROOT s = f32[2,5,3] scatter(o, i, u), update_window_dims={2}, "
            "inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, "
            "scatter_indices_batching_dims={1}, index_vector_dim=2, to_apply=add\n}")
    np.testing.assert_array_equal(run(text, operand, indices, updates), want)


def test_scatter_and_gather_against_xla_cpu():
    pytest.importorskip("jax", reason="XLA:CPU reference needs jax")
    from hlo_run.xla_cpu import run_hlo_text

    text = (f"HloModule m\n{combiner('sub')}\nENTRY e "
            f"{{\no = f32[6,5] parameter(0)\ni = s32[9,2] parameter(1)\n"
            "u = f32[9,2] parameter(2)\ns = f32[6,5] scatter(o, i, u), update_window_dims={1}, "
            "inserted_window_dims={0}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=sub\n"
            "ROOT g = f32[9,3,2] gather(s, i), offset_dims={1,2}, collapsed_slice_dims={}, "
            "start_index_map={0,1}, "
            "index_vector_dim=1, slice_sizes={3,2}\n}")
    args = [RNG.integers(-3, 4, (6, 5)).astype(np.float32), RNG.integers(-1, 6, (9, 2)).astype(np.int32),
            RNG.integers(-3, 4, (9, 2)).astype(np.float32)]
    np.testing.assert_array_equal(run(text, *args), run_hlo_text(text, args))


def test_scatter_unique_indices_general_combiner():
    operand = RNG.integers(-3, 4, (6, 2)).astype(np.float32)
    indices = np.array([[5], [0], [3]], np.int32)
    updates = RNG.integers(-3, 4, (3, 2)).astype(np.float32)
    want = scatter_reference(operand, indices, updates, (1,), (0,), (0,), 1, lambda a, b: a - b)
    text = (f"HloModule m\n{combiner('sub')}\nENTRY e {{\no = f32[6,2] parameter(0)\n"
            "i = s32[3,1] parameter(1)\n"
            "u = f32[3,2] parameter(2)\nROOT s = f32[6,2] scatter(o, i, u), update_window_dims={1}, "
            "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
            "unique_indices=true, to_apply=sub\n}")
    np.testing.assert_array_equal(run(text, operand, indices, updates), want)


PAIR_ADD = """pair_add {
  a0 = f32[] parameter(0)  a1 = f32[] parameter(1)  b0 = f32[] parameter(2)  b1 = f32[] parameter(3)
  sum0 = f32[] add(a0, a1)
  sum1 = f32[] add(b0, b1)
  ROOT r = (f32[], f32[]) tuple(sum0, sum1)
}
"""


def _pair_scatter(first: str, second: str) -> str:
    return (f"HloModule m\n{PAIR_ADD}\nENTRY e {{\nx = f32[4,3] parameter(0)\ny = f32[4,3] parameter(1)\n"
            "i = s32[2,1] parameter(2)\nu = f32[2,3] parameter(3)\n"
            f"ROOT s = (f32[4,3], f32[4,3]) scatter({first}, {second}, i, u, u), update_window_dims={{1}}, "
            "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
            "to_apply=pair_add\n}")


def test_variadic_scatter_same_operand_twice():
    # The corpus module import_emit_stablehlo #82: the combiner takes (operand values..., update
    # values...) and returns (t0 + t1, u0 + u1), so at a scattered row out0 = 2x and out1 = 2u,
    # elsewhere both keep x. That one HLO value is both operands changes nothing.
    x = RNG.integers(-3, 4, (4, 3)).astype(np.float32)
    u = RNG.integers(-3, 4, (2, 3)).astype(np.float32)
    i = np.array([[1], [3]], np.int32)
    want0, want1 = x.copy(), x.copy()
    want0[[1, 3]] = 2 * x[[1, 3]]
    want1[[1, 3]] = 2 * u
    for first, second in (("x", "x"), ("x", "y")):
        out0, out1 = run(_pair_scatter(first, second), x, x.copy(), i, u)
        np.testing.assert_array_equal(out0, want0)
        np.testing.assert_array_equal(out1, want1)


def test_variadic_scatter_distinct_operands_against_xla_cpu():
    # XLA:CPU agrees when the two operands are different HLO values (with the same operand twice
    # it gives out1 == out0: its buffer assignment lets both results share one buffer).
    pytest.importorskip("jax", reason="XLA:CPU reference needs jax")
    from hlo_run.xla_cpu import run_hlo_text

    x = RNG.integers(-3, 4, (4, 3)).astype(np.float32)
    args = [x, x.copy(), np.array([[1], [3]], np.int32), RNG.integers(-3, 4, (2, 3)).astype(np.float32)]
    text = _pair_scatter("x", "y")
    for got, want in zip(run(text, *args), run_hlo_text(text, args)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(COMBINERS) + ["set", "last"])
@pytest.mark.parametrize("start", [[2, 1], [4, 0], [1, 3], [-1, 0]])  # in bounds, at the edge, out
def test_scatter_of_a_single_window(name, start):
    # One index vector: the interpreter's one-window path (a slice, Python-int bounds check).
    operand = RNG.integers(-3, 4, (6, 5)).astype(np.float32)
    indices = np.array(start, np.int32)  # index_vector_dim=0 of a rank-1 index: one window
    updates = RNG.integers(-3, 4, (2, 3)).astype(np.float32)
    comps = "".join(combiner(n) for n in COMBINERS) + (
        "set { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] copy(b) }\n"
        "last { a = f32[] parameter(0)  ROOT b = f32[] parameter(1) }\n")
    fn = COMBINERS[name][2] if name in COMBINERS else (lambda a, b: b)
    want = scatter_reference(operand, indices[None], updates[None], (1, 2), (), (0, 1), 1, fn)
    text = (f"HloModule m\n{comps}\nENTRY e {{\no = f32[6,5] parameter(0)\ni = s32[2] parameter(1)\n"
            "u = f32[2,3] parameter(2)\nROOT s = f32[6,5] scatter(o, i, u), update_window_dims={0,1}, "
            f"inserted_window_dims={{}}, scatter_dims_to_operand_dims={{0,1}}, index_vector_dim=0, "
            f"to_apply={name}\n}}")
    np.testing.assert_array_equal(run(text, operand, indices, updates), want)
