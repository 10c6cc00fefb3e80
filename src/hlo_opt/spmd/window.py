"""Windowed input along one tiled dimension: each device's window of a tiled array, reached by a
halo exchange with its neighbours (XLA's PartitionedHlo::ReshardAsWindowedInput and ExchangeHalo
in xla/service/spmd/spmd_partitioner.cc and spmd_partitioner_util.cc).

Device with tile coordinate c on dimension `dim` holds the global elements [c*i, (c+1)*i) of it
and wants [lo_c, lo_c + width), which may start before 0 or end past the dimension (pad). The
halo is what the windows need beyond the device's own tile, clipped to the array: the widest
left and right halos over the devices are fetched from the neighbours at distance 1, 2, ... by
one collective-permute each (as XLA, every device receives the widest halo), concatenated around
the local tile, and each device's window is cut out at its offset (a dynamic-slice indexed by
partition-id). Positions outside the array are set to the pad value where one is given.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.attributes import PaddingConfig, SliceSpec
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.hlo.hlo_creation_utils import make_constant
from hlo_common.hlo.ir import HloInstruction
from hlo_opt.spmd.builder import SpmdBuilder
from hlo_opt.spmd.tiling import Tiling

PRED = PRIMITIVE_TYPES["pred"]


def window(b: SpmdBuilder, x: HloInstruction, t: Tiling, dim: int, full: int, starts: list[int],
           width: int, pad: HloInstruction | None = None) -> HloInstruction:
    """`x`, this device's tile of a dim of size `full` tiled by `t`, replaced on `dim` by the
    window [starts[c], starts[c] + width) of the device at tile coordinate c. `pad` (a scalar)
    fills positions outside [0, full); without it they hold unspecified values."""
    tiles = t.tiles[dim]
    i = full // tiles
    need = [(max(lo, 0), min(lo + width, full)) for lo in starts]
    left = max([c * i - a for c, (a, z) in enumerate(need) if a < z] + [0])
    right = max([z - (c + 1) * i for c, (a, z) in enumerate(need) if a < z] + [0])
    pieces = [_halo(b, x, t, dim, i, left, -1)] if left else []
    pieces.append(x)
    if right:
        pieces.append(_halo(b, x, t, dim, i, right, +1))
    e = _concat(b, pieces, dim)
    offsets = [lo - (c * i - left) for c, lo in enumerate(starts)]
    grow_lo = max(0, -min(offsets))
    grow_hi = max(0, max(o + width for o in offsets) - e.shape.dims[dim])
    if grow_lo or grow_hi:
        e = _pad(b, e, dim, grow_lo, grow_hi, pad)
        offsets = [o + grow_lo for o in offsets]
    out = _cut(b, e, t, dim, offsets, width)
    outside = any(lo < 0 or lo + width > full for lo in starts)
    if pad is not None and outside:
        out = _mask(b, out, t, dim, starts, full, pad)
    return out


def _halo(b: SpmdBuilder, x, t: Tiling, dim: int, i: int, size: int, side: int) -> HloInstruction:
    """`size` elements from the neighbours on one side (-1: left, +1: right), nearest last on
    the left and first on the right, as they lie in the array."""
    parts = []
    for k in range(1, -(-size // i) + 1):
        take = min(i, size - (k - 1) * i)
        lo = i - take if side < 0 else 0
        piece = _static_slice(b, x, dim, lo, lo + take)
        parts.append(b.collective_permute(piece, neighbour_pairs(t, dim, -side * k)))
    if side < 0:
        parts.reverse()
    return _concat(b, parts, dim)


def neighbour_pairs(t: Tiling, dim: int, shift: int) -> list[tuple[int, int]]:
    """(source, target) for every device whose tile coordinate on `dim` minus `shift` exists:
    the target receives from the device `shift` tiles before it (same other coordinates and
    replica slot)."""
    ids = np.moveaxis(t.ids, dim, 0)
    tiles = ids.shape[0]
    pairs = []
    for c in range(tiles):
        src = c - shift
        if 0 <= src < tiles:
            pairs += [(int(s), int(d)) for s, d in zip(ids[src].reshape(-1), ids[c].reshape(-1))]
    return sorted(pairs)


def _static_slice(b: SpmdBuilder, x, dim: int, lo: int, hi: int) -> HloInstruction:
    if lo == 0 and hi == x.shape.dims[dim]:
        return x
    spec = [(0, d, 1) for d in x.shape.dims]
    spec[dim] = (lo, hi, 1)
    dims = list(x.shape.dims)
    dims[dim] = hi - lo
    return b.add("slice", [x], x.shape.with_dims(tuple(dims)), {"slice": SliceSpec(tuple(spec))})


def _concat(b: SpmdBuilder, parts, dim: int) -> HloInstruction:
    if len(parts) == 1:
        return parts[0]
    dims = list(parts[0].shape.dims)
    dims[dim] = sum(p.shape.dims[dim] for p in parts)
    return b.add("concatenate", parts, parts[0].shape.with_dims(tuple(dims)), {"dimensions": (dim,)})


def _pad(b: SpmdBuilder, x, dim: int, lo: int, hi: int, pad) -> HloInstruction:
    value = pad if pad is not None else make_constant(b.comp, 0, x.shape.element_type)
    config = [(0, 0, 0)] * x.shape.rank
    config[dim] = (lo, hi, 0)
    dims = list(x.shape.dims)
    dims[dim] += lo + hi
    return b.add("pad", [x, value], x.shape.with_dims(tuple(dims)), {"padding": PaddingConfig(tuple(config))})


def _cut(b: SpmdBuilder, e, t: Tiling, dim: int, offsets: list[int], width: int) -> HloInstruction:
    if width == e.shape.dims[dim] and all(o == 0 for o in offsets):
        return e
    if all(o == offsets[0] for o in offsets):
        return _static_slice(b, e, dim, offsets[0], offsets[0] + width)
    starts = [b.zero()] * e.shape.rank
    starts[dim] = b.per_partition([offsets[c] for c in t.coords[:, dim]])
    sizes = list(e.shape.dims)
    sizes[dim] = width
    return b.add("dynamic-slice", [e] + starts, e.shape.with_dims(tuple(sizes)),
                 {"dynamic_slice_sizes": tuple(sizes)})


def global_index(b: SpmdBuilder, like, t: Tiling, dim: int, starts: list[int]) -> HloInstruction:
    """An s32 array shaped like `like`: the global index on `dim` of each element of a window
    starting at starts[c] on the device at coordinate c."""
    s32 = like.shape.with_element_type(PRIMITIVE_TYPES["s32"])
    iota = b.add("iota", [], s32, {"iota_dimension": dim})
    base = b.per_partition([starts[c] for c in t.coords[:, dim]])
    return b.add("add", [iota, b.add("broadcast", [base], s32, {"dimensions": ()})], s32)


def in_range(b: SpmdBuilder, index, lo: int, hi: int) -> HloInstruction:
    """pred: lo <= index < hi, elementwise."""
    pred = index.shape.with_element_type(PRED)
    s32 = index.shape.element_type

    def bound(v):
        return b.add("broadcast", [make_constant(b.comp, v, s32)], index.shape, {"dimensions": ()})
    ge = b.add("compare", [index, bound(lo)], pred, {"direction": "GE"})
    lt = b.add("compare", [index, bound(hi)], pred, {"direction": "LT"})
    return b.add("and", [ge, lt], pred)


def _mask(b: SpmdBuilder, x, t: Tiling, dim: int, starts: list[int], full: int, pad) -> HloInstruction:
    inside = in_range(b, global_index(b, x, t, dim, starts), 0, full)
    fill = b.add("broadcast", [pad], x.shape, {"dimensions": ()})
    return b.add("select", [inside, x, fill], x.shape)
