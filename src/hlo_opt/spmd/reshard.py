"""Resharding: a per-device value laid out by one tiling, re-laid out by another (XLA's
PartitionedHlo::ReshardNoCache in xla/service/spmd/spmd_partitioner.cc).

In order of preference, as XLA chooses them:
- the same tiling: nothing;
- a tiled dim moving to another dim over the same devices: one all-to-all (ReshardWithAllToAll);
- the target's tiles inside each device's current tile: a dynamic-slice at offsets from
  partition-id, no communication (ReshardFromReplicated / the partial-replication cases);
- otherwise all-gather the dims whose tiles do not nest into the target's, one at a time
  (ReplicatePartial), then slice.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.spmd.builder import SpmdBuilder
from hlo_opt.spmd.tiling import Tiling


def reshard(b: SpmdBuilder, x: HloInstruction, full: Shape, src: Tiling, dst: Tiling) -> HloInstruction:
    """`x`, the per-device part of a value of shape `full` tiled by `src`, tiled by `dst`."""
    if src == dst:
        return x
    moved = _all_to_all(b, x, full, src, dst)
    if moved is not None:
        return moved
    while True:
        bad = _mismatched_axes(src, dst)
        if not bad:
            break
        axis = bad[0]
        x = b.all_gather(x, src.groups([axis]), axis)
        src = src.to_replication([axis])
    return _slice(b, x, src, dst)


def reshard_cost(full_dims: tuple[int, ...], src: Tiling, dst: Tiling) -> float:
    """Elements each device receives to reshard (the partitioner's cost model for choosing among
    layouts; XLA's dot handler weighs its strategies by communication the same way)."""
    if src == dst:
        return 0.0
    local = float(np.prod(full_dims, dtype=np.float64)) / max(src.num_tiles, 1)
    if any(src.tiles[i] > 1 and src.tiles[j] == 1 and dst.tiles[i] == 1 and
           Tiling.of(np.swapaxes(src.ids, i, j)) == dst
           for i in range(src.rank) for j in range(src.rank) if i != j):
        return local
    cost = 0.0
    while True:
        bad = _mismatched_axes(src, dst)
        if not bad:
            return cost
        k = src.tiles[bad[0]]
        cost += local * (k - 1)
        local *= k
        src = src.to_replication([bad[0]])


def _ratios(src: Tiling, dst: Tiling) -> np.ndarray | None:
    s, d = np.asarray(src.tiles), np.asarray(dst.tiles)
    return None if np.any(d % s) else d // s


def _mismatched_axes(src: Tiling, dst: Tiling) -> list[int]:
    """The tiled dims of `src` whose tiles do not contain the target tile of every device."""
    s, d = np.asarray(src.tiles), np.asarray(dst.tiles)
    bad = []
    for axis in range(src.rank):
        if s[axis] == 1:
            continue
        if d[axis] % s[axis] or np.any(dst.coords[:, axis] // (d[axis] // s[axis]) != src.coords[:, axis]):
            bad.append(axis)
    return bad


def _slice(b: SpmdBuilder, x: HloInstruction, src: Tiling, dst: Tiling) -> HloInstruction:
    ratios = _ratios(src, dst)
    if not np.any(ratios > 1):
        return x
    sizes = tuple(dim // int(r) for dim, r in zip(x.shape.dims, ratios))
    starts = []
    for axis, r in enumerate(ratios):
        offsets = (dst.coords[:, axis] % int(r)) * sizes[axis]
        starts.append(b.per_partition([int(v) for v in offsets]))
    return b.add("dynamic-slice", [x] + starts, x.shape.with_dims(sizes), {"dynamic_slice_sizes": sizes})


def _all_to_all(b: SpmdBuilder, x: HloInstruction, full: Shape, src: Tiling,
                dst: Tiling) -> HloInstruction | None:
    """Dim i's tiling moved to dim j (untiled in `src`) over the same device groups."""
    for i in range(src.rank):
        for j in range(src.rank):
            if i == j or src.tiles[i] == 1 or src.tiles[j] != 1 or dst.tiles[i] != 1:
                continue
            if Tiling.of(np.swapaxes(src.ids, i, j)) == dst and x.shape.dims[j] % src.tiles[i] == 0:
                return _emit_all_to_all(b, x, src, i, j)
    return None


def _emit_all_to_all(b: SpmdBuilder, x: HloInstruction, src: Tiling, i: int, j: int) -> HloInstruction:
    k, dims, rank = src.tiles[i], list(x.shape.dims), src.rank
    split = dims[:j] + [k, dims[j] // k] + dims[j + 1:]
    y = b.add("reshape", [x], x.shape.with_dims(tuple(split)))
    front = [j] + [a for a in range(rank + 1) if a != j]
    y = b.add("transpose", [y], None, {"dimensions": tuple(front)})
    y = b.add("all-to-all", [y], y.shape, {
        "channel_id": b.channel(), "replica_groups": _explicit(src.groups([i])), "dimensions": (0,)})
    # axes now: [k (sender = coordinate on i)] + x's dims with dim j divided by k
    order = []
    for a in range(rank):
        if a == i:
            order.append(0)
        order.append(a + 1)
    y = b.add("transpose", [y], None, {"dimensions": tuple(order)})
    out = list(dims)
    out[i], out[j] = dims[i] * k, dims[j] // k
    return b.add("reshape", [y], x.shape.with_dims(tuple(out)))


def _explicit(groups):
    from hlo_common.hlo.replica_groups import ReplicaGroups

    return ReplicaGroups(explicit=tuple(tuple(g) for g in groups))
