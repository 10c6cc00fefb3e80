"""Tiling: a sharding of one array as the partitioner computes with it, a device array of shape
[tiles of dim 0, ..., tiles of dim r-1, replication] (XLA's TileAssignment with the replicated
last dim always present, xla/hlo/ir/hlo_sharding.h).

Device ids inside one replication group are kept sorted, so two tilings that place the same data
on the same devices compare equal. `from_sharding` reads an HloSharding (replicated and maximal
become the all-replicated tiling: every device holds the whole value), `to_sharding` writes one
back (an iota form where the array is a plain iota, else the explicit device list).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from hlo_common.hlo.sharded_arrays import padded_dims
from hlo_common.hlo.sharding import HloSharding
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.tile_assignment import TileAssignment


@dataclass(frozen=True, eq=False)
class Tiling:
    """`ids[c_0, ..., c_{r-1}, k]`: the k-th device holding tile (c_0, ..., c_{r-1})."""

    ids: np.ndarray

    @staticmethod
    def of(ids: np.ndarray) -> Tiling:
        ids = np.sort(np.asarray(ids, np.int64), axis=-1)
        ids.setflags(write=False)
        return Tiling(ids)

    @staticmethod
    def replicated(rank: int, n: int) -> Tiling:
        return Tiling.of(np.arange(n).reshape((1,) * rank + (n,)))

    @property
    def rank(self) -> int:
        return self.ids.ndim - 1

    @property
    def tiles(self) -> tuple[int, ...]:
        return tuple(int(t) for t in self.ids.shape[:-1])

    @property
    def n(self) -> int:
        return int(self.ids.size)

    @property
    def num_tiles(self) -> int:
        return int(np.prod(self.tiles, dtype=np.int64))

    @property
    def is_replicated(self) -> bool:
        return self.num_tiles == 1

    def __eq__(self, other) -> bool:
        return isinstance(other, Tiling) and self.ids.shape == other.ids.shape and \
            bool(np.array_equal(self.ids, other.ids))

    def __hash__(self) -> int:
        return hash((self.ids.shape, self.ids.tobytes()))

    @cached_property
    def coords(self) -> np.ndarray:
        """coords[d] = the tile coordinates of device d, shape [n, rank]."""
        out = np.zeros((self.n, self.rank), np.int64)
        for index in np.ndindex(*self.ids.shape):
            out[self.ids[index]] = index[:-1]
        return out

    def local_dims(self, dims: tuple[int, ...]) -> tuple[int, ...] | None:
        """The per-device dims of an array of `dims`; None where a tile count does not divide."""
        if any(d % t for d, t in zip(dims, self.tiles)):
            return None
        return tuple(d // t for d, t in zip(dims, self.tiles))

    def padded_dims(self, dims: tuple[int, ...]) -> tuple[int, ...]:
        """`dims` rounded up to whole tiles (XLA's uneven shards: each tile ceil(dim / tiles)
        long, the last ones ending in padding)."""
        return padded_dims(dims, self.tiles)

    def uneven_dims(self, dims: tuple[int, ...]) -> list[int]:
        """The dims whose tile count does not divide them."""
        return [k for k, (d, t) in enumerate(zip(dims, self.tiles)) if d % t]

    def groups(self, axes: list[int]) -> list[list[int]]:
        """The device groups that differ only in the tile coordinates of `axes` (each group in
        row-major order of those coordinates): the members of a collective over those axes."""
        rest = [a for a in range(self.rank + 1) if a not in axes]
        moved = self.ids.transpose(rest + list(axes))
        size = int(np.prod([self.ids.shape[a] for a in axes], dtype=np.int64))
        return [[int(d) for d in row] for row in moved.reshape(-1, size)]

    def to_replication(self, axes: list[int]) -> Tiling:
        """The tiling after the data of `axes` is gathered: those tile dims fold into replication."""
        rest = [a for a in range(self.rank) if a not in axes]
        moved = self.ids.transpose(rest + list(axes) + [self.rank])
        shape = [self.ids.shape[a] for a in rest] + [-1]
        out = moved.reshape(shape)
        for a in sorted(axes):
            out = np.expand_dims(out, a)
        return Tiling.of(out)

    def to_sharding(self) -> HloSharding:
        if self.is_replicated:
            return HloSharding("replicated")
        replication = self.ids.shape[-1]
        dims = self.tiles + ((replication,) if replication > 1 else ())
        tiles = _as_iota(self.ids.reshape(dims), dims)
        if tiles is None:
            tiles = TileAssignment(dims, devices=tuple(int(d) for d in self.ids.reshape(-1)))
        return HloSharding.tiled(tiles, replicate_last=replication > 1)


def _as_iota(array: np.ndarray, dims: tuple[int, ...]) -> TileAssignment | None:
    """The iota form (`<=[R]T(P)`) of a device array that is a transposed iota over its own
    non-trivial dims, as XLA prints the shardings it makes; None for any other array."""
    sizes = [d for d in dims if d > 1]
    if len(sizes) > 5:
        return None
    squeezed = array.reshape(sizes)
    ids = np.arange(array.size)
    for perm in itertools.permutations(range(len(sizes))):
        reshape = [0] * len(sizes)
        for a, p in enumerate(perm):
            reshape[p] = sizes[a]
        if np.array_equal(ids.reshape(reshape).transpose(perm), squeezed):
            return TileAssignment.iota(dims, tuple(reshape), tuple(perm))
    return None


def from_sharding(sharding: HloSharding | None, rank: int, n: int) -> Tiling | None:
    """The tiling of a non-tuple sharding; None for what the partitioner does not take (manual,
    unknown, subgroups other than replication)."""
    if sharding is None or sharding.kind in ("replicated", "maximal"):
        return Tiling.replicated(rank, n)
    if sharding.kind != "tiled" or sharding.subgroup_types:
        return None
    array = sharding.tiles.array()
    if not sharding.last_tile_dim_replicate:
        array = array[..., None]
    if array.ndim != rank + 1 or array.size != n:
        return None
    return Tiling.of(array)


def local_shape(shape: Shape, tiling: Tiling) -> Shape | None:
    dims = tiling.local_dims(shape.dims)
    return None if dims is None else shape.with_dims(dims)
