"""Uneven shards in the SPMD partitioner (`hlo_opt.spmd.uneven`): tiles of ceil(D / t) whose tail
is padding, masked where a reduce or a contracting dot would see it. Small cases in the manner of
XLA's xla/service/spmd/spmd_partitioner_test.cc, whose shapes are often uneven (its
BroadcastOnlyNewDimsSharded, f32[3,..] over 2, is in test_spmd_partitioner.py): each checks the
collectives, the per-device parameter and result shapes, and the numbers on N interpreter
devices against the unpartitioned module on one."""

from __future__ import annotations

import numpy as np
import pytest
from spmd_testlib import collective_opcodes, partition, run_global

from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.sharded_arrays import gather, split
from hlo_common.hlo.sharding import HloSharding

ADD = "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }\n"
MAX = "mx { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] maximum(x, y) }\n"

# name: (devices, body, per-device parameter dims, per-device root dims, collectives)
CASES = {
    "elementwise_10x6_over_4": (4, """
  a = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  b = f32[10,6] parameter(1), sharding={devices=[4,1]<=[4]}
  ROOT c = f32[10,6] add(a, b), sharding={devices=[4,1]<=[4]}""", [(3, 6), (3, 6)], (3, 6), []),
    "reduce_sum_over_uneven_dim": (4, """
  a = f32[3,7] parameter(0), sharding={devices=[1,4]<=[4]}
  z = f32[] constant(0)
  ROOT r = f32[3] reduce(a, z), dimensions={1}, to_apply=add, sharding={replicated}""",
        [(3, 2)], (3,), ["all-reduce"]),
    # max: padding (zeros from the split) would win over all-negative rows without the mask
    "reduce_max_over_uneven_dim": (4, """
  a = f32[7,3] parameter(0), sharding={devices=[4,1]<=[4]}
  n = f32[7,3] negate(a)
  m = f32[7,3] abs(n)
  o = f32[7,3] negate(m)
  z = f32[] constant(-inf)
  ROOT r = f32[3] reduce(o, z), dimensions={0}, to_apply=mx, sharding={replicated}""",
        [(2, 3)], (3,), ["all-reduce"]),
    "dot_uneven_contracting": (4, """
  a = f32[4,7] parameter(0), sharding={devices=[1,4]<=[4]}
  b = f32[7,5] parameter(1), sharding={devices=[4,1]<=[4]}
  ROOT d = f32[4,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}""",
        [(4, 2), (2, 5)], (4, 5), ["all-reduce"]),
    "dot_uneven_non_contracting": (4, """
  a = f32[10,8] parameter(0), sharding={devices=[4,1]<=[4]}
  b = f32[8,5] parameter(1), sharding={replicated}
  ROOT d = f32[10,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},
    sharding={devices=[4,1]<=[4]}""", [(3, 8), (8, 5)], (3, 5), []),
    "dot_uneven_batch": (2, """
  a = f32[3,4,8] parameter(0), sharding={devices=[2,1,1]<=[2]}
  b = f32[3,8,5] parameter(1), sharding={devices=[2,1,1]<=[2]}
  ROOT d = f32[3,4,5] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2},
    rhs_contracting_dims={1}, sharding={devices=[2,1,1]<=[2]}""", [(2, 4, 8), (2, 8, 5)], (2, 4, 5), []),
    # both paddings fit one padded f32[12,8]: an all-to-all of it, as XLA (then cut to 10 rows)
    "reshard_uneven_rows_to_columns": (4, """
  a = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  ROOT c = f32[10,6] copy(a), sharding={devices=[1,4]<=[4]}""", [(3, 6)], (10, 2), ["all-to-all"]),
    # 10 rows pad to 12 over 4 but to 10 over 2: gathered whole, cut, sliced again
    "reshard_uneven_to_2d": (4, """
  a = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  ROOT c = f32[10,6] copy(a), sharding={devices=[2,2]<=[4]}""", [(3, 6)], (5, 3), ["all-gather"]),
    "reshard_same_padding_permutes": (4, """
  a = f32[7,6] parameter(0), sharding={devices=[4,1]<=[4]}
  ROOT c = f32[7,6] copy(a), sharding={devices=[4,1]3,2,1,0}""", [(2, 6)], (2, 6), ["collective-permute"]),
    "replicated_to_uneven_slices": (4, """
  a = f32[7,6] parameter(0), sharding={replicated}
  ROOT c = f32[7,6] copy(a), sharding={devices=[4,1]<=[4]}""", [(7, 6)], (2, 6), []),
    "transpose_uneven": (4, """
  a = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  t = f32[6,10] transpose(a), dimensions={1,0}
  ROOT n = f32[6,10] negate(t), sharding={devices=[1,4]<=[4]}""", [(3, 6)], (6, 3), []),
    "broadcast_uneven_new_dim": (2, """
  a = f32[4,3] parameter(0), sharding={replicated}
  ROOT b = f32[3,4,3] broadcast(a), dimensions={1,2}, sharding={devices=[2,1,1]0,1}""",
        [(4, 3)], (2, 4, 3), []),
    # no padded form of these yet: made whole (gathered, padding cut), run whole, sliced again
    "reshape_uneven_runs_whole": (4, """
  a = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  ROOT r = f32[5,12] reshape(a), sharding={devices=[4,1]<=[4]}""", [(3, 6)], (2, 12), ["all-gather"]),
    "slice_uneven_runs_whole": (4, """
  a = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  ROOT s = f32[7,6] slice(a), slice={[2:9], [0:6]}, sharding={devices=[4,1]<=[4]}""",
        [(3, 6)], (2, 6), ["all-gather"]),
}


def _module(body: str) -> str:
    return "HloModule m\n" + ADD + MAX + "ENTRY e {" + body + "\n}\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_uneven_case(name):
    from hlo_common.interpreter.evaluator import Evaluator

    n, body, params, root, collectives = CASES[name]
    text = _module(body)
    module = partition(text, n, name)
    ordered = sorted(module.entry.parameters, key=lambda p: p.parameter_number)
    assert [tuple(p.shape.dims) for p in ordered] == params
    assert tuple(module.entry.root.shape.dims) == root
    assert collective_opcodes(module) == collectives
    original = parse_module(text, "original")
    rng = np.random.default_rng(3)
    args = [(rng.standard_normal(p.shape.dims) * 4).astype(np.float32)
            for p in sorted(original.entry.parameters, key=lambda p: p.parameter_number)]
    expected = Evaluator().evaluate(original, list(args))
    (got,) = run_global(module, args, n, [np.shape(expected)])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_reduce_over_an_uneven_dim_masks_with_the_init_value():
    module = partition(_module(CASES["reduce_max_over_uneven_dim"][1]), 4)
    ops = [i.opcode for i in module.entry.instructions]
    assert "select" in ops and "partition-id" in ops
    even = partition(_module(CASES["reduce_max_over_uneven_dim"][1].replace("7,3", "8,3")), 4)
    assert "select" not in [i.opcode for i in even.entry.instructions]


def test_dot_masks_only_an_uneven_contracting_dim():
    masked = partition(_module(CASES["dot_uneven_contracting"][1]), 4)
    plain = partition(_module(CASES["dot_uneven_non_contracting"][1]), 4)
    assert sum(i.opcode == "select" for i in masked.entry.instructions) == 2  # both operands
    assert not any(i.opcode == "select" for i in plain.entry.instructions)


def test_split_pads_and_gather_unpads_uneven_tiles():
    s = HloSharding.parse("{devices=[4,1]<=[4]}")
    x = np.arange(10 * 2, dtype=np.float32).reshape(10, 2)
    pieces = split(x, s, 4)
    assert [p.shape for p in pieces] == [(3, 2)] * 4
    np.testing.assert_array_equal(pieces[3], [[18, 19], [0, 0], [0, 0]])
    back, disagree = gather(pieces, s, (10, 2))
    np.testing.assert_array_equal(back, x)
    assert disagree == []
    # 3 over 4: the last tile is all padding
    pieces = split(np.arange(3, dtype=np.int32), HloSharding.parse("{devices=[4]<=[4]}"), 4)
    assert [p.tolist() for p in pieces] == [[0], [1], [2], [0]]
