"""spmd-partitioning of `rng` (XLA's SpmdPartitioningVisitor::HandleRng): split, each device draws
its own tile and nothing is sent; replicated, device 0's draw is broadcast so that every device
holds the same values. On the interpreter's devices (each its own random stream) the replicated
draw agrees across devices and the split tiles differ."""

from __future__ import annotations

import numpy as np
import pytest
from spmd_testlib import collective_opcodes, partition

from hlo_common.interpreter.devices import run_devices

TEXT = """HloModule rng
ENTRY e {{
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  p = f32[8,4] parameter(0), sharding={s}
  r = f32[8,4] rng(lo, hi), distribution=rng_uniform, sharding={s}
  ROOT a = f32[8,4] add(p, r), sharding={s}
}}
"""


@pytest.mark.parametrize("sharding, local, collectives", [
    ("{devices=[4,1]<=[4]}", (2, 4), []),
    ("{replicated}", (8, 4), ["collective-broadcast"]),
])
def test_rng_draws_tiles_or_broadcasts_one_draw(sharding, local, collectives):
    module = partition(TEXT.format(s=sharding), 4)
    (rng,) = [i for i in module.entry.instructions if i.opcode == "rng"]
    assert rng.shape.dims == local and collective_opcodes(module) == collectives
    zeros = [[np.zeros(local, np.float32)] for _ in range(4)]
    draws = run_devices(module, zeros, 1, 4)
    assert all(0 <= d.min() and d.max() < 1 for d in draws)
    same = [np.array_equal(draws[0], d) for d in draws[1:]]
    assert same == ([True] * 3 if sharding == "{replicated}" else [False] * 3)
