"""TileAssignment: which device holds each tile of a sharded value (XLA's
xla/hlo/ir/tile_assignment.h): an explicit device array, or an iota (the ids 0..N-1 reshaped to
`iota_dims`, transposed by `perm`, reshaped to the tile dims), kept canonical as XLA keeps it
(IotaTileAssignment::Create), with the iota arithmetic HloSharding's normalizations need.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class ShardingError(ValueError):
    """A sharding that does not parse, or does not fit its shape or the device count."""


@dataclass(frozen=True)
class TileAssignment:
    """The device of each tile: an explicit array (`devices`), or an iota (`iota_dims`, `perm`)."""

    dims: tuple[int, ...]
    devices: tuple[int, ...] | None = None
    iota_dims: tuple[int, ...] | None = None
    perm: tuple[int, ...] | None = None

    @staticmethod
    def iota(dims: tuple[int, ...], reshape: tuple[int, ...], perm: tuple[int, ...] | None) -> TileAssignment:
        perm = tuple(range(len(reshape))) if perm is None else perm
        if sorted(perm) != list(range(len(reshape))):
            raise ShardingError(f"T({','.join(map(str, perm))}) is not a permutation of {len(reshape)} dims")
        if int(np.prod(dims, dtype=np.int64)) != int(np.prod(reshape, dtype=np.int64)):
            raise ShardingError(f"tile dims [{join_ints(dims)}] and iota dims [{join_ints(reshape)}] hold "
                                "different "
                                "numbers of devices")
        reshape, perm = canonical_iota(reshape, perm)
        return TileAssignment(dims, iota_dims=reshape, perm=perm)

    @property
    def num_elements(self) -> int:
        return int(np.prod(self.dims, dtype=np.int64))

    def array(self) -> np.ndarray:
        """The device id of every tile, shaped `dims`."""
        if self.devices is not None:
            return np.asarray(self.devices, np.int64).reshape(self.dims)
        ids = np.arange(self.num_elements, dtype=np.int64).reshape(self.iota_dims)
        return ids.transpose(self.perm).reshape(self.dims)

    def __str__(self) -> str:
        if self.devices is not None:
            return f"devices=[{join_ints(self.dims)}]{join_ints(self.devices)}"
        text = f"devices=[{join_ints(self.dims)}]<=[{join_ints(self.iota_dims)}]"
        if self.perm != tuple(range(len(self.perm))):
            text += f"T({join_ints(self.perm)})"
        return text


def canonical_iota(reshape: tuple[int, ...],
                   perm: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """XLA's canonical iota: dims of size one dropped, and dims that stay next to each other in the
    same order through the transpose merged into one."""
    dims, order = list(reshape), list(perm)
    while True:
        ones = [d for d, size in enumerate(dims) if size == 1]
        if ones and len(dims) > 1:
            d = ones[0]
            dims.pop(d)
            order = [p - (p > d) for p in order if p != d]
            continue
        for j in range(len(order) - 1):
            if order[j + 1] == order[j] + 1:
                d = order[j]
                dims[d:d + 2] = [dims[d] * dims[d + 1]]
                order = [p - (p > d) for k, p in enumerate(order) if k != j + 1]
                break
        else:
            return tuple(dims), tuple(order)


def reshaped(tiles: TileAssignment, dims: tuple[int, ...]) -> TileAssignment:
    if tiles.devices is not None:
        return TileAssignment(dims, devices=tiles.devices)
    return TileAssignment(dims, iota_dims=tiles.iota_dims, perm=tiles.perm)


def group_minor_iota_dims_sorted(dims: tuple[int, ...], perm: tuple[int, ...],
                                  group: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """XLA's GroupMinorIotaDimsSorted: the iota with the minor dims that make up one replication
    group put in ascending order (splitting one dim when the group ends inside it); None when the
    group does not divide the dims evenly."""
    grouped, split = 0, None
    for dim in reversed(perm):
        size = dims[dim]
        if size <= group:
            if group % size:
                return None
            group //= size
            grouped += 1
        else:
            if size % group:
                return None
            split = (dim, size // group)
            grouped += 1
            break
    if split is None:
        new_perm = list(perm)
        new_perm[len(perm) - grouped:] = sorted(new_perm[len(perm) - grouped:])
        return tuple(dims), tuple(new_perm)
    at, major = split
    new_dims = list(dims[:at]) + [major, dims[at] // major] + list(dims[at + 1:])
    new_perm = []
    for dim in perm:
        shifted = dim if dim <= at else dim + 1
        new_perm.append(shifted)
        if dim == at:
            new_perm.append(shifted + 1)
    new_perm[len(new_perm) - grouped:] = sorted(new_perm[len(new_perm) - grouped:])
    return tuple(new_dims), tuple(new_perm)


def iota_transpose(tiles: TileAssignment, perm: list[int]) -> TileAssignment | None:
    """XLA's IotaTileAssignment::Transpose: the iota whose array is `tiles`' transposed by `perm`,
    None where the tile dims cut across the iota's dims so that no iota describes it."""
    dims, reshape, order = tiles.dims, tiles.iota_dims, tiles.perm
    new_dims = tuple(dims[p] for p in perm)
    non_one = [d for d in dims if d != 1]
    kept = [p for p in perm if dims[p] != 1]
    if kept == sorted(kept):  # only size-one dims move: the same ids in the same order
        return TileAssignment.iota(new_dims, reshape, order)
    if len(reshape) == 1:
        return TileAssignment.iota(new_dims, dims, tuple(perm))
    position = {d: k for k, d in enumerate(d for d in range(len(dims)) if dims[d] != 1)}
    if len(non_one) == len(reshape) and all(reshape[order[k]] == n for k, n in enumerate(non_one)):
        return TileAssignment.iota(new_dims, reshape, tuple(order[position[p]] for p in kept))
    factors, spans = _prime_factors(reshape)
    factor_order = [f for d in order for f in range(*spans[d])]
    groups, k = [], 0
    for n in non_one:
        group = []
        while k < len(factor_order) and n % factors[factor_order[k]] == 0:
            n //= factors[factor_order[k]]
            group.append(factor_order[k])
            k += 1
            if n == 1:
                break
        if n != 1:
            return None
        groups.append(group)
    return TileAssignment.iota(new_dims, tuple(factors), tuple(f for p in kept for f in groups[position[p]]))


def _prime_factors(dims: tuple[int, ...]) -> tuple[list[int], list[tuple[int, int]]]:
    """Every dim split into its prime factors (XLA's FullyDecanonicalize), with each dim's span."""
    factors, spans = [], []
    for size in dims:
        start, p = len(factors), 2
        while p * p <= size:
            while size % p == 0:
                factors.append(p)
                size //= p
            p += 1
        if size > 1:
            factors.append(size)
        spans.append((start, len(factors)))
    return factors, spans


def join_ints(values) -> str:
    return ",".join(str(v) for v in values)
