"""Global arrays and their per-device pieces under an HloSharding: how a runner hands a sharded
program jax's global arguments (each device its tile) and reassembles its results (issue 17
item 4; the layout rule is XLA's, xla/hlo/ir/hlo_sharding.h: tile (c_0, ..., c_{r-1}) of a
tiled sharding is held by the devices at those coordinates of its tile assignment, and by every
device of a replicated one).
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.sharding import HloSharding
from hlo_common.hlo.tile_assignment import ShardingError


def device_tiles(sharding: HloSharding | None, rank: int, n: int) -> np.ndarray:
    """ids[c_0, ..., c_{r-1}, k]: the devices holding each tile (k over its replicas)."""
    if sharding is None or sharding.kind in ("replicated", "maximal"):
        return np.arange(n).reshape((1,) * rank + (n,))
    if sharding.kind != "tiled" or sharding.subgroup_types:
        raise ShardingError(f"sharding {sharding} does not say which device holds which tile")
    ids = sharding.tiles.array()
    if not sharding.last_tile_dim_replicate:
        ids = ids[..., None]
    if ids.ndim != rank + 1 or ids.size != n:
        raise ShardingError(f"sharding {sharding} does not tile a rank-{rank} array over {n} devices")
    return ids


def _tile_slices(shape, tiles) -> dict:
    out = {}
    for coord in np.ndindex(*tiles):
        out[coord] = tuple(slice(c * (d // t), (c + 1) * (d // t)) for c, d, t in zip(coord, shape, tiles))
    return out


def padded_dims(shape, tiles) -> tuple[int, ...]:
    """`shape` rounded up to whole tiles: where a dim does not divide, every tile is
    ceil(dim / tiles) long and the last ones end in padding (XLA's uneven shards)."""
    return tuple(-(-d // t) * t for d, t in zip(shape, tiles))


def split(array: np.ndarray, sharding: HloSharding | None, n: int) -> list[np.ndarray]:
    """Each device's piece of a global array (uneven tiles padded with zeros at their end)."""
    ids = device_tiles(sharding, array.ndim, n)
    tiles = ids.shape[:-1]
    padded = padded_dims(array.shape, tiles)
    if padded != array.shape:
        array = np.pad(array, [(0, p - d) for p, d in zip(padded, array.shape)])
    pieces: list = [None] * n
    for coord, where in _tile_slices(array.shape, tiles).items():
        for device in ids[coord]:
            pieces[int(device)] = np.array(array[where], order="C")  # ascontiguousarray makes a scalar 1-d
    return pieces


def gather(pieces: list[np.ndarray], sharding: HloSharding | None,
           shape: tuple[int, ...] | None = None) -> tuple[np.ndarray, list[int]]:
    """The global array (of `shape`, the tiles' padding cut off; default: the tiles laid side by
    side) from each device's piece, and the devices whose piece differs from what another replica
    of the same tile holds (a correct program leaves that list empty)."""
    n, local = len(pieces), np.asarray(pieces[0])
    ids = device_tiles(sharding, local.ndim, n)
    tiles = ids.shape[:-1]
    full = tuple(d * t for d, t in zip(local.shape, tiles))
    out = np.empty(full, local.dtype)
    disagree = []
    for coord, where in _tile_slices(full, tiles).items():
        first = np.asarray(pieces[int(ids[coord][0])])
        out[where] = first
        disagree += [int(d) for d in ids[coord][1:] if not np.array_equal(np.asarray(pieces[int(d)]), first,
                                                                           equal_nan=True)]
    if shape is not None and tuple(shape) != full:
        out = np.ascontiguousarray(out[tuple(slice(0, d) for d in shape)])
    return out, sorted(disagree)


_DEVICE_OPS = frozenset({
    "all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter", "all-to-all",
    "collective-permute", "collective-permute-start", "collective-broadcast", "ragged-all-to-all",
    "partition-id", "replica-id",
})


# the entries of a manual (shard_map) region: Shardy's (jax 0.10) and GSPMD's
REGION_ENTRIES = frozenset({"xla.sdy.GlobalToLocalShape", "SPMDFullToShardShape"})


def is_global_program(module) -> bool:
    """Whether `module` is a sharded program over global arrays still to be partitioned (what jax
    lowers), rather than a per-device program: it carries a sharding and holds no collective and
    no partition-id / replica-id (outside shard_map regions, which only such programs have), and
    its entry is not an SPMD partitioner's output (XLA and ours
    name that entry `<name>_spmd`, xla/service/spmd/spmd_partitioner.cc)."""
    entry = module.entry
    if entry is None or entry.name.endswith("_spmd"):
        return False
    if any(i.opcode == "custom-call" and i.attrs.get("custom_call_target") in REGION_ENTRIES
           for i in entry.instructions):
        return True  # a shard_map region: its body's collectives are the user's
    sharded = False
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode in _DEVICE_OPS:
                return False
            sharded = sharded or (comp is entry and instr.sharding is not None)
    return sharded


def sharding_devices(module) -> int | None:
    """The most devices any tiled sharding of the entry names (None without one): what a global
    program needs `num_partitions` to be."""
    most = None
    for instr in module.entry.instructions:
        shardings = [instr.sharding] if instr.sharding is not None else []
        while shardings:
            s = shardings.pop()
            if s.kind == "tuple":
                shardings.extend(s.elements)
            elif s.kind == "tiled":
                most = max(most or 0, s.tiles.num_elements)
    return most
