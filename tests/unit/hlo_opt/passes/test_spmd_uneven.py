"""Uneven shards (issue 17 item 3): a dim its tile count does not divide is held in padded tiles of
ceil(dim / tiles), as XLA's partitioner holds it; a reduce or a contraction over such a dim masks
the padding (its init value; zero). Each case checks the per-device shapes and the collectives,
and runs on N interpreter devices from random global arguments against the unpartitioned module;
cases after XLA's spmd_partitioner_test.cc where it has them (PadBeforeReduce-like masking,
TiledElementwise with 3 rows over 2 devices made 10 over 4 here)."""

from __future__ import annotations

import numpy as np
import pytest
from spmd_testlib import collective_opcodes, partition, run_global

from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.sharded_arrays import gather, split
from hlo_common.hlo.sharding import HloSharding
from hlo_common.interpreter.evaluator import evaluate

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"
MAX = "mx { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] maximum(a, b) }\n"
CASES = {
    # name: (text, params' per-device dims, collectives)
    "elementwise_10_over_4": ("""ENTRY e {
  p = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  q = f32[10,6] parameter(1), sharding={devices=[4,1]<=[4]}
  ROOT a = f32[10,6] add(p, q), sharding={devices=[4,1]<=[4]}
}""", [(3, 6), (3, 6)], []),
    "reduces_mask_the_padding": (ADD + MAX + """ENTRY e {
  p = f32[6,7] parameter(0), sharding={devices=[1,4]<=[4]}
  e = f32[6,7] exponential(p), sharding={devices=[1,4]<=[4]}
  z = f32[] constant(0)
  m = f32[] constant(-inf)
  s = f32[6] reduce(e, z), dimensions={1}, to_apply=add
  x = f32[6] reduce(p, m), dimensions={1}, to_apply=mx
  ROOT t = (f32[6], f32[6]) tuple(s, x)
}""", [(6, 2)], ["all-reduce", "all-reduce"]),
    "contraction_over_an_uneven_dim": ("""ENTRY e {
  a = f32[8,10] parameter(0), sharding={devices=[1,4]<=[4]}
  b = f32[10,6] parameter(1), sharding={devices=[4,1]<=[4]}
  ROOT d = f32[8,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", [(8, 3), (3, 6)], ["all-reduce"]),
    "uneven_batch": ("""ENTRY e {
  a = f32[6,4,5] parameter(0), sharding={devices=[4,1,1]<=[4]}
  b = f32[6,5,3] parameter(1), sharding={devices=[4,1,1]<=[4]}
  ROOT d = f32[6,4,3] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2},
    rhs_contracting_dims={1}, sharding={devices=[4,1,1]<=[4]}
}""", [(2, 4, 5), (2, 5, 3)], []),
    "reshard_rows_to_columns": ("""ENTRY e {
  p = f32[10,7] parameter(0), sharding={devices=[4,1]<=[4]}
  n = f32[10,7] negate(p), sharding={devices=[4,1]<=[4]}
  ROOT t = f32[10,7] copy(n), sharding={devices=[1,4]<=[4]}
}""", [(3, 7)], ["all-to-all"]),  # both padded to [12,8]: one all-to-all, as XLA
    "slice_off_the_end_in_place": ("""ENTRY e {
  p = f32[32,4] parameter(0), sharding={devices=[4,1]<=[4]}
  s = f32[31,4] slice(p), slice={[0:31], [0:4]}, sharding={devices=[4,1]<=[4]}
  ROOT n = f32[31,4] tanh(s), sharding={devices=[4,1]<=[4]}
}""", [(8, 4)], []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_uneven_shards_are_padded_and_masked(name):
    body, local_dims, collectives = CASES[name]
    text = "HloModule m\n" + body
    module = partition(text, 4)
    params = sorted(module.entry.parameters, key=lambda p: p.parameter_number)
    assert [p.shape.dims for p in params] == local_dims
    assert collective_opcodes(module) == collectives
    original = parse_module(text)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(p.shape.dims).astype(np.float32)
            for p in sorted(original.entry.parameters, key=lambda p: p.parameter_number)]
    want = evaluate(original, args)
    want = list(want) if isinstance(want, tuple) else [want]
    got = run_global(module, args, 4, [np.shape(w) for w in want])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_global_arrays_split_into_padded_tiles_and_gather_back():
    sharding = HloSharding.parse("{devices=[4,1]<=[4]}")
    array = np.arange(30, dtype=np.float32).reshape(10, 3)
    pieces = split(array, sharding, 4)
    assert [p.shape for p in pieces] == [(3, 3)] * 4
    assert np.array_equal(pieces[3][0], array[9]) and not pieces[3][1:].any()  # zeros after row 9
    back, disagree = gather(pieces, sharding, (10, 3))
    assert np.array_equal(back, array) and disagree == []
