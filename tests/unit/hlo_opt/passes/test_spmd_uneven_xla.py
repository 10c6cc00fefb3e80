"""Uneven shards in the SPMD partitioner (issue 17 item 3), after the uneven cases of XLA's
xla/service/spmd/spmd_partitioner_test.cc: each device holds ceil(dim / tiles) elements, the last
tiles partly padding; a reduce or a contracting dot over such a dim masks the padding first.
Each case checks the collectives, the per-device shapes and the numbers on N interpreter devices
against the unpartitioned module on the interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from spmd_testlib import collective_opcodes, partition, run_global

from hlo_common.hlo.parser import parse_module

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
"""

# name: (devices, entry, collectives, {instruction: per-device shape})
CASES = {
    # XLA: Copy(Slice(Reshape(Transpose(AllToAll(Reshape(Pad f32[8,16,128])))))), one all-to-all
    "TiledToTiledUneven": (2, """
  %param = f32[7,31,128]{2,1,0} parameter(0), sharding={devices=[1,2,1]0,1}
  ROOT %copy = f32[7,31,128]{2,1,0} copy(%param), sharding={devices=[2,1,1]0,1}""",
        ["all-to-all"], {"param": "f32[7,16,128]", "pad": "f32[8,16,128]", "copy": "f32[4,31,128]"}),
    "ElementwiseUneven": (4, """
  p = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  q = f32[10,6] parameter(1), sharding={devices=[4,1]<=[4]}
  e = f32[10,6] exponential(p)
  ROOT m = f32[10,6] multiply(e, q), sharding={devices=[4,1]<=[4]}""",
        [], {"p": "f32[3,6]", "m": "f32[3,6]"}),
    "UnevenToReplicated": (4, """
  p = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  ROOT c = f32[10,6] copy(p), sharding={replicated}""",
        ["all-gather"], {"all-gather": "f32[12,6]", "slice": "f32[10,6]", "c": "f32[10,6]"}),
    "ReplicatedToUneven": (4, """
  p = f32[10,6] parameter(0), sharding={replicated}
  ROOT c = f32[10,6] copy(p), sharding={devices=[4,1]<=[4]}""",
        [], {"pad": "f32[12,6]", "c": "f32[3,6]"}),
    "UnevenRowsToUnevenColumns": (4, """
  p = f32[10,7] parameter(0), sharding={devices=[4,1]<=[4]}
  ROOT c = f32[10,7] copy(p), sharding={devices=[1,4]<=[4]}""", ["all-to-all"], {"c": "f32[10,2]"}),
    # the padding (zeros from the split) would beat every negative value: it is masked with -inf
    "ReduceMaxOverUnevenDim": (4, """
  p = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  e = f32[10,6] exponential(p)
  n = f32[10,6] negate(e)
  z = f32[] constant(-inf)
  ROOT r = f32[6] reduce(n, z), dimensions={0}, to_apply=max, sharding={replicated}""",
        ["all-reduce"], {"select": "f32[3,6]", "r": "f32[6]"}),
    "ReduceKeepingUnevenDim": (4, """
  p = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  z = f32[] constant(0)
  r = f32[10] reduce(p, z), dimensions={1}, to_apply=add
  ROOT n = f32[10] negate(r), sharding={devices=[4]<=[4]}""", [], {"r": "f32[3]", "n": "f32[3]"}),
    # exp(padding) is 1 on both sides: only the zero mask keeps it out of the sum
    "DotUnevenContracting": (2, """
  a = f32[6,7] parameter(0), sharding={devices=[1,2]0,1}
  b = f32[7,5] parameter(1), sharding={devices=[2,1]0,1}
  ea = f32[6,7] exponential(a)
  eb = f32[7,5] exponential(b)
  ROOT d = f32[6,5] dot(ea, eb), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}""",
        ["all-reduce"], {"a": "f32[6,4]", "b": "f32[4,5]", "d": "f32[6,5]"}),
    # the result wanted split unevenly: no reduce-scatter of 9 rows over 4, an all-reduce
    "DotUnevenContractingResultUneven": (4, """
  a = f32[9,10] parameter(0), sharding={devices=[1,4]<=[4]}
  b = f32[10,2] parameter(1), sharding={devices=[4,1]<=[4]}
  d = f32[9,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT n = f32[9,2] negate(d), sharding={devices=[4,1]<=[4]}""",
        ["all-reduce"], {"a": "f32[9,3]", "n": "f32[3,2]"}),
    "DotUnevenBatch": (2, """
  a = f32[5,4,8] parameter(0), sharding={devices=[2,1,1]0,1}
  b = f32[5,8,3] parameter(1), sharding={devices=[2,1,1]0,1}
  ROOT d = f32[5,4,3] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2},
    rhs_contracting_dims={1}, sharding={devices=[2,1,1]0,1}""", [], {"a": "f32[3,4,8]", "d": "f32[3,4,3]"}),
    "DotUnevenNonContracting": (4, """
  a = f32[10,8] parameter(0), sharding={devices=[4,1]<=[4]}
  b = f32[8,3] parameter(1), sharding={replicated}
  ROOT d = f32[10,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},
    sharding={devices=[4,1]<=[4]}""", [], {"d": "f32[3,3]"}),
    # a layernorm's sum over a sharded axis of 7 on 4 devices (exp(padding) masked), broadcast back
    "SumOverUnevenAxisBroadcastBack": (4, """
  x = f32[7,16] parameter(0), sharding={devices=[4,1]<=[4]}
  e = f32[7,16] exponential(x)
  z = f32[] constant(0)
  s = f32[16] reduce(e, z), dimensions={0}, to_apply=add
  b = f32[7,16] broadcast(s), dimensions={1}
  ROOT c = f32[7,16] subtract(x, b), sharding={devices=[4,1]<=[4]}""", ["all-reduce"], {"c": "f32[2,16]"}),
    # a 2-D mesh, both dims uneven: one all-reduce over all 4 devices of the masked partial sums
    "ReduceAllOverUneven2dMesh": (4, """
  p = f32[10,7] parameter(0), sharding={devices=[2,2]<=[4]}
  e = f32[10,7] exponential(p)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(e, z), dimensions={0,1}, to_apply=add""",
        ["all-reduce"], {"p": "f32[5,4]", "select": "f32[5,4]"}),
    "ReducePartiallyReplicatedUneven": (4, """
  p = f32[10,7] parameter(0), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}
  e = f32[10,7] exponential(p)
  z = f32[] constant(0)
  ROOT r = f32[10] reduce(e, z), dimensions={1}, to_apply=add,
    sharding={devices=[2,2]<=[4] last_tile_dim_replicate}""",
        ["all-reduce"], {"p": "f32[10,4]", "r": "f32[10]"}),
    # the same padded tiles on other devices: one collective-permute (XLA's ReshardWithCollectivePermute)
    "UnevenTilesToOtherDevices": (4, """
  p = f32[10,7] parameter(0), sharding={devices=[2,2]<=[4]}
  ROOT c = f32[10,7] sine(p), sharding={devices=[2,2]<=[2,2]T(1,0)}""",
        ["collective-permute"], {"c": "f32[5,4]"}),
    # an uneven contraction whose result is wanted evenly split: the reduce-scatter still applies
    "DotUnevenContractingReduceScatter": (4, """
  a = f32[8,7] parameter(0), sharding={devices=[1,4]<=[4]}
  b = f32[7,4] parameter(1), sharding={devices=[4,1]<=[4]}
  ea = f32[8,7] exponential(a)
  eb = f32[7,4] exponential(b)
  d = f32[8,4] dot(ea, eb), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT n = f32[8,4] negate(d), sharding={devices=[4,1]<=[4]}""",
        ["reduce-scatter"], {"a": "f32[8,2]", "n": "f32[2,4]"}),
    "ReshapeAddingUnitDimOfUnevenArray": (2, """
  x = f32[7] parameter(0), sharding={devices=[2]0,1}
  e = f32[7] exponential(x)
  ROOT r = f32[7,1] reshape(e), sharding={devices=[2,1]0,1}""", [], {"r": "f32[4,1]"}),
}


def _module(entry: str) -> str:
    return f"HloModule m\n{ADD}\nENTRY e {{{entry}\n}}\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_uneven_case(name):
    from hlo_common.interpreter.evaluator import Evaluator

    n, entry, collectives, shapes = CASES[name]
    text = _module(entry)
    module = partition(text, n, name)
    assert collective_opcodes(module) == collectives
    by_name = {i.name: i.shape.to_string(print_layout=False) for i in module.entry.instructions}
    by_opcode = {i.opcode: i.shape.to_string(print_layout=False) for i in module.entry.instructions}
    for what, shape in shapes.items():
        assert by_name.get(what, by_opcode.get(what)) == shape, (what, by_name, by_opcode)
    original = parse_module(text, "original")
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(p.shape.dims).astype(np.float32)
            for p in sorted(original.entry.parameters, key=lambda p: p.parameter_number)]
    expected = Evaluator().evaluate(original, list(args))
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    got = run_global(module, args, n, [e.shape for e in expected])
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_split_pads_and_gather_cuts_uneven_shards():
    from hlo_common.hlo.sharded_arrays import gather, split
    from hlo_common.hlo.sharding import HloSharding

    sharding = HloSharding.parse("{devices=[4,1]<=[4]}")
    a = np.arange(30, dtype=np.float32).reshape(10, 3)
    pieces = split(a, sharding, 4)
    assert [p.shape for p in pieces] == [(3, 3)] * 4
    np.testing.assert_array_equal(pieces[3][0], a[9])
    assert not pieces[3][1:].any()  # the padding is zeros
    pieces[3][1:] = 7.0  # whatever the padding holds, it is cut
    out, disagree = gather(pieces, sharding, (10, 3))
    np.testing.assert_array_equal(out, a)
    assert disagree == []


HLO_RUN = Path(sys.executable).parent / "hlo-run"
GLOBAL = """HloModule uneven_global

ENTRY e {
  p = f32[10,6] parameter(0), sharding={devices=[4,1]<=[4]}
  q = f32[6,5] parameter(1), sharding={devices=[1,4]<=[4]}
  e = f32[10,6] exponential(p)
  ROOT d = f32[10,5] dot(e, q), lhs_contracting_dims={1}, rhs_contracting_dims={0},
    sharding={devices=[4,1]<=[4]}
}
"""


@pytest.mark.parametrize("platform", ["interpreter", "host"])
def test_hlo_run_global_arrays_with_uneven_shards(platform, tmp_path):
    """hlo-run cuts each global argument into padded tiles and the result's padding off again
    (on the host the 4 devices are MPI ranks); checked here and by hlo-run's own reference."""
    if platform == "host" and not (HLO_RUN.parent / "mpiexec").is_file():
        pytest.skip("needs the mpi extra (mpiexec)")
    rng = np.random.default_rng(5)
    p, q = rng.standard_normal((10, 6)).astype(np.float32), rng.standard_normal((6, 5)).astype(np.float32)
    hlo, inputs, output = tmp_path / "m.hlo", tmp_path / "in.npz", tmp_path / "out.npz"
    hlo.write_text(GLOBAL)
    np.savez(inputs, arg0=p, arg1=q)
    proc = subprocess.run([str(HLO_RUN), str(hlo), "--platform", platform, "--num-partitions", "4",
                           "--inputs", str(inputs), "--output", str(output)],
                          check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(output) as got:
        np.testing.assert_allclose(got["out0"], np.exp(p) @ q, rtol=1e-5, atol=1e-5)
