"""Resharding: a per-device value laid out by one tiling, re-laid out by another (XLA's
PartitionedHlo::ReshardNoCache in xla/service/spmd/spmd_partitioner.cc).

The steps XLA uses, each changing the tiling the value holds:
- dynamic-slice at offsets from partition-id, no communication, when the target's tiles lie
  inside each device's current tile (ReshardFromReplicated and the partial-replication cases);
- all-to-all moving one dim's tiling to an untiled dim over the same devices (ReshardWithAllToAll);
- collective-permute when the tiles are the same but sit on other devices
  (ReshardWithCollectivePermute);
- all-gather of one tiled dim (ReplicatePartial).
`plan` searches the shortest sequences of these for the one that sends the fewest bytes (each
device's share, as `hlo_common.analysis.collective_traffic` counts them); `reshard` emits it and
`reshard_cost` prices it for the dot handler's choice of layouts.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.replica_groups import ReplicaGroups
from hlo_common.hlo.shape import Shape
from hlo_opt.spmd.builder import SpmdBuilder
from hlo_opt.spmd.tiling import Tiling

MAX_STEPS = 4


def reshard(b: SpmdBuilder, x: HloInstruction, full: Shape, src: Tiling, dst: Tiling) -> HloInstruction:
    """`x`, the per-device part of a value of shape `full` tiled by `src`, tiled by `dst`."""
    for step in plan(full.dims, src, dst)[1]:
        kind = step[0]
        if kind == "slice":
            x = _slice(b, x, src, dst)
            src = dst
        elif kind == "all-to-all":
            x = _emit_all_to_all(b, x, src, *step[1:])
            src = _moved(src, *step[1:])
        elif kind == "permute":
            x = _emit_permute(b, x, src, dst)
            src = dst
        else:
            x = b.all_gather(x, src.groups([step[1]]), step[1])
            src = src.to_replication([step[1]])
    return x


def reshard_cost(full_dims: tuple[int, ...], src: Tiling, dst: Tiling) -> float:
    """Bytes-per-element units each device sends to reshard (the dot handler's cost model)."""
    return plan(tuple(full_dims), src, dst)[0]


@lru_cache(maxsize=4096)
def plan(full_dims: tuple[int, ...], src: Tiling, dst: Tiling) -> tuple[float, tuple]:
    """(cost, steps): the cheapest way found from `src` to `dst` in at most MAX_STEPS collectives."""
    best = _search(full_dims, src, dst, MAX_STEPS)
    if best is None:  # cannot happen: gathering everything then slicing always works
        raise AssertionError(f"no resharding from {src.tiles} to {dst.tiles}")
    return best


def _search(dims, src: Tiling, dst: Tiling, budget: int):
    if src == dst:
        return 0.0, ()
    if not _mismatched_axes(src, dst):
        return 0.0, (("slice",),)
    if budget == 0:
        return None
    local = float(np.prod(dims, dtype=np.float64)) / src.num_tiles
    options = []
    if src.ids.shape == dst.ids.shape:
        options.append((local, ("permute",), dst))
    for i, j, f in _moves(src, dims):
        options.append((local * (f - 1) / f, ("all-to-all", i, j, f), _moved(src, i, j, f)))
    for axis in _mismatched_axes(src, dst):
        options.append((local * (src.tiles[axis] - 1), ("all-gather", axis), src.to_replication([axis])))
    best = None
    for cost, step, nxt in options:
        rest = _search(dims, nxt, dst, budget - 1)
        if rest is not None and (best is None or cost + rest[0] < best[0]):
            best = (cost + rest[0], (step,) + rest[1])
    return best


def _moves(src: Tiling, dims) -> list[tuple[int, int, int]]:
    """(i, j, f): the minor factor f of dim i's tiling can move to dim j, becoming j's minor
    factor (each device's part of dim j splits evenly by f)."""
    out = []
    for i in range(src.rank):
        for j in range(src.rank):
            if i == j:
                continue
            local_j = dims[j] // src.tiles[j]
            out += [(i, j, f) for f in range(2, src.tiles[i] + 1)
                    if src.tiles[i] % f == 0 and local_j % f == 0]
    return out


def _split(src: Tiling, i: int, f: int) -> np.ndarray:
    """The device array with dim i's tiles split into (major, f minor): rank + 2 axes."""
    shape = list(src.ids.shape)
    return src.ids.reshape(shape[:i] + [shape[i] // f, f] + shape[i + 1:])


def _moved(src: Tiling, i: int, j: int, f: int) -> Tiling:
    ids = _split(src, i, f)
    axes = list(range(ids.ndim))
    axes.remove(i + 1)
    at = axes.index(j if j < i else j + 1) + 1  # right after dim j: f becomes its minor factor
    axes.insert(at, i + 1)
    moved = ids.transpose(axes)
    shape = list(src.tiles)
    shape[i] //= f
    shape[j] *= f
    return Tiling.of(moved.reshape(shape + [src.ids.shape[-1]]))


def _move_groups(src: Tiling, i: int, f: int) -> list[list[int]]:
    ids = _split(src, i, f)
    rest = [a for a in range(ids.ndim) if a != i + 1]
    return [[int(d) for d in row] for row in ids.transpose(rest + [i + 1]).reshape(-1, f)]


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
    ratios = np.asarray(dst.tiles) // np.asarray(src.tiles)
    if not np.any(ratios > 1):
        return x
    sizes = tuple(dim // int(r) for dim, r in zip(x.shape.dims, ratios))
    starts = []
    for axis, r in enumerate(ratios):
        offsets = (dst.coords[:, axis] % int(r)) * sizes[axis]
        starts.append(b.per_partition([int(v) for v in offsets]))
    return b.add("dynamic-slice", [x] + starts, x.shape.with_dims(sizes), {"dynamic_slice_sizes": sizes})


def _emit_permute(b: SpmdBuilder, x: HloInstruction, src: Tiling, dst: Tiling) -> HloInstruction:
    """Each tile from the device that holds it to the one that should (a device keeping its own
    tile sends it to itself, so that every device receives)."""
    pairs = tuple(sorted((int(s), int(t)) for s, t in zip(src.ids.reshape(-1), dst.ids.reshape(-1))))
    return b.collective_permute(x, pairs)


def _emit_all_to_all(b: SpmdBuilder, x: HloInstruction, src: Tiling, i: int, j: int, f: int) -> HloInstruction:
    """Dim j's local part split f ways, piece p to the p-th member of each group (the devices
    that differ in the minor factor f of dim i's coordinate); what arrives is stacked, sender
    major, into dim i."""
    dims, rank = list(x.shape.dims), src.rank
    split = dims[:j] + [f, dims[j] // f] + dims[j + 1:]
    y = b.add("reshape", [x], x.shape.with_dims(tuple(split)))
    front = [j] + [a for a in range(rank + 1) if a != j]
    y = b.add("transpose", [y], None, {"dimensions": tuple(front)})
    y = b.add("all-to-all", [y], y.shape, {
        "channel_id": b.channel(), "dimensions": (0,),
        "replica_groups": ReplicaGroups(explicit=tuple(tuple(g) for g in _move_groups(src, i, f)))})
    # axes now: [f (the sender)] + x's dims with dim j divided by f
    order = []
    for a in range(rank):
        if a == i:
            order.append(0)
        order.append(a + 1)
    y = b.add("transpose", [y], None, {"dimensions": tuple(order)})
    out = list(dims)
    out[i], out[j] = dims[i] * f, dims[j] // f
    return b.add("reshape", [y], x.shape.with_dims(tuple(out)))
