"""A dot's iteration space and the tilings over it (XLA's DotConvolutionDimsInfo in
xla/hlo/utils/hlo_sharding_util.cc, and the strategy search of xla/service/spmd/dot_handler.cc).

The space has one axis per batch dim, per lhs and rhs non-contracting dim and per contracting
dim. A tiling of the space ([tiles of each axis, replication]) fixes all three layouts at once:
the lhs holds its axes (the rhs non-contracting ones replicate), the rhs likewise, and each
device's local dot yields its output tile, a partial sum over the contracting tiles, which an
all-reduce over the devices that differ only in contracting coordinates completes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.spmd.tiling import Tiling

BATCH, LHS, RHS, CONTRACTING = "batch", "lhs", "rhs", "contracting"


@dataclass(frozen=True)
class DotAxis:
    kind: str
    lhs: int | None
    rhs: int | None
    out: int | None


def dot_axes(dot: HloInstruction) -> list[DotAxis]:
    a = dot.attrs
    lb, rb = tuple(a.get("lhs_batch_dims", ())), tuple(a.get("rhs_batch_dims", ()))
    lc, rc = tuple(a.get("lhs_contracting_dims", ())), tuple(a.get("rhs_contracting_dims", ()))
    lhs_rank, rhs_rank = dot.operands[0].shape.rank, dot.operands[1].shape.rank
    axes = [DotAxis(BATCH, l, r, k) for k, (l, r) in enumerate(zip(lb, rb))]
    out = len(lb)
    for d in range(lhs_rank):
        if d not in lb and d not in lc:
            axes.append(DotAxis(LHS, d, None, out))
            out += 1
    for d in range(rhs_rank):
        if d not in rb and d not in rc:
            axes.append(DotAxis(RHS, None, d, out))
            out += 1
    axes += [DotAxis(CONTRACTING, l, r, None) for l, r in zip(lc, rc)]
    return axes


def _side(axis: DotAxis, side: str) -> int | None:
    return getattr(axis, side)


def project(space: Tiling, axes: list[DotAxis], side: str) -> Tiling:
    """The tiling of `side` (lhs, rhs or out) that a space tiling implies; for out, the layout of
    the partial result, its contracting axes folded into replication."""
    dropped = [k for k, ax in enumerate(axes) if _side(ax, side) is None]
    folded = space.to_replication(dropped)
    kept = [k for k, ax in enumerate(axes) if _side(ax, side) is not None]
    ids = folded.ids.reshape([space.tiles[k] for k in kept] + [folded.ids.shape[-1]])
    order = sorted(range(len(kept)), key=lambda j: _side(axes[kept[j]], side))
    return Tiling.of(ids.transpose(order + [len(kept)]))


def lift(t: Tiling, axes: list[DotAxis], side: str) -> Tiling:
    """The space tiling that tiles only `side`'s axes as `t` does (the other axes untiled)."""
    shape = [t.tiles[_side(ax, side)] if _side(ax, side) is not None else 1 for ax in axes]
    present = [k for k, ax in enumerate(axes) if _side(ax, side) is not None]
    dims_in_space_order = [_side(axes[k], side) for k in present]
    ids = t.ids.transpose(dims_in_space_order + [t.rank])
    return Tiling.of(ids.reshape(shape + [t.ids.shape[-1]]))


def joint(lhs: Tiling, rhs: Tiling, axes: list[DotAxis]) -> Tiling | None:
    """The one space tiling whose projections are exactly `lhs` and `rhs`, if there is one."""
    n = lhs.n
    coords = np.zeros((n, len(axes)), np.int64)
    tiles = []
    for k, ax in enumerate(axes):
        l_t = lhs.tiles[ax.lhs] if ax.lhs is not None else None
        r_t = rhs.tiles[ax.rhs] if ax.rhs is not None else None
        if l_t is not None and r_t is not None:
            if l_t != r_t or np.any(lhs.coords[:, ax.lhs] != rhs.coords[:, ax.rhs]):
                return None
        tiles.append(l_t if l_t is not None else r_t)
        coords[:, k] = lhs.coords[:, ax.lhs] if ax.lhs is not None else rhs.coords[:, ax.rhs]
    total = int(np.prod(tiles, dtype=np.int64))
    if n % total:
        return None
    flat = np.ravel_multi_index(coords.T, tiles) if axes else np.zeros(n, np.int64)
    order = np.argsort(flat, kind="stable")
    counts = np.bincount(flat, minlength=total)
    if np.any(counts != n // total):
        return None
    ids = np.arange(n)[order].reshape(tiles + [n // total])
    space = Tiling.of(ids)
    if project(space, axes, "lhs") != lhs or project(space, axes, "rhs") != rhs:
        return None
    return space


def reduce_scatter(space: Tiling, contracting: list[int], out: Tiling,
                   want: Tiling) -> tuple[int, list[list[int]]] | None:
    """(dim, groups) when the all-reduce of the partial sums and the slice to `want` are one
    reduce-scatter (XLA's dot handler and ReduceScatterCreator): `want` splits one output dim
    further, k ways, k the size of each contraction group, and every group holds each of the k
    slices once (the group is ordered by slice)."""
    ratios = [w // o if o and w % o == 0 else 0 for w, o in zip(want.tiles, out.tiles)]
    if 0 in ratios or want.ids.shape[-1] * _size(want.tiles) != out.n:
        return None
    split = [d for d, r in enumerate(ratios) if r > 1]
    groups = space.groups(contracting)
    if len(split) != 1 or ratios[split[0]] != len(groups[0]):
        return None
    dim, k = split[0], ratios[split[0]]
    if np.any(want.coords[:, dim] // k != out.coords[:, dim]) or any(
            np.any(want.coords[:, d] != out.coords[:, d]) for d in range(out.rank) if d != dim):
        return None
    ordered = []
    for group in groups:
        by_slice = sorted(group, key=lambda dev: want.coords[dev, dim] % k)
        if [int(want.coords[dev, dim] % k) for dev in by_slice] != list(range(k)):
            return None
        ordered.append(by_slice)
    return dim, ordered


def _size(tiles) -> int:
    return int(np.prod(tiles, dtype=np.int64))
