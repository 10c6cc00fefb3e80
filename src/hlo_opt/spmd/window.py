"""Windowed input along one tiled dimension: each device's window of a tiled array, the parts
other devices hold fetched by collective-permutes (XLA's PartitionedHlo::ReshardAsWindowedInput
and ExchangeHalo in xla/service/spmd/spmd_partitioner.cc and spmd_partitioner_util.cc).

Device at tile coordinate c on dimension `dim` holds the global elements [c*i, (c+1)*i) and wants
[lo_c, lo_c + width), which may start before 0 or end past the dimension (pad). Every transfer
(source tile, target tile, the part of the source's tile the target's window needs) is packed
into rounds in which each device sends at most once and receives at most once (XLA's halo
exchange is the special case of the neighbours at distance 1; a rotation is one round); a round
is one collective-permute of the widest part in it, each source cutting its part at its own
offset. Each device writes its tile and what it received into a buffer laid out as its window
(with margins), initialised to the pad value, and cuts the window out. Several windows of one
array (a concatenate of slices of it) share the rounds.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.attributes import SliceSpec
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
    fills positions outside [0, full) (zeros without it)."""
    return windows(b, x, t, dim, full, [(starts, width)], pad)[0]


def windows(b: SpmdBuilder, x: HloInstruction, t: Tiling, dim: int, full: int, wins, pad=None) -> list:
    """One window per (starts, width) of `wins`, sharing the collective-permutes; a window given
    as (starts, width, low, high) needs only the elements [low, high) (the rest unspecified)."""
    i = full // t.tiles[dim]
    transfers = _transfers(t.tiles[dim], i, full, wins)
    inside = all(c * i <= lo and lo + w <= (c + 1) * i
                 for starts, w, *_b in wins for c, lo in enumerate(starts))
    if inside:  # every window within the device's own tile
        return [_cut(b, x, t, dim, [lo - c * i for c, lo in enumerate(starts)], w) for starts, w, *_b in wins]
    value = pad if pad is not None else make_constant(b.comp, 0, x.shape.element_type)
    coords = [int(c) for c in t.coords[:, dim]]
    buffers = []
    for starts, w, *_b in wins:
        dims = list(x.shape.dims)
        dims[dim] = w + 3 * i  # margins of i on both sides and a scratch tile at the end
        buf = b.add("broadcast", [value], x.shape.with_dims(tuple(dims)), {"dimensions": ()})
        own = [c * i - starts[c] + i if c * i < starts[c] + w and (c + 1) * i > starts[c] else w + 2 * i
               for c in coords]
        buffers.append(_place(b, buf, x, dim, own))
    for round_ in _rounds(transfers):
        piece, pairs, placed = _send(b, x, t, dim, i, round_, wins)
        got = b.collective_permute(piece, pairs)
        for k, (starts, w, *_b) in enumerate(wins):
            if any(kk == k for kk, *_ in round_):
                where = [placed.get((k, c), w + 2 * i) for c in coords]
                buffers[k] = _place(b, buffers[k], got, dim, where)
    return [_static_slice(b, buf, dim, i, i + win[1]) for buf, win in zip(buffers, wins)]


def _transfers(tiles: int, i: int, full: int, wins) -> list[tuple[int, int, int, int, int]]:
    """(window, source tile, target tile, lo, hi): the global elements [lo, hi) of the source's
    tile in the target's window."""
    out = []
    for k, (starts, width, *bounds) in enumerate(wins):
        low, high = bounds or (0, full)
        for c, a in enumerate(starts):
            need_lo, need_hi = max(a, low), min(a + width, high)
            for s in range(tiles):
                lo, hi = max(need_lo, s * i), min(need_hi, (s + 1) * i)
                if s != c and lo < hi:
                    out.append((k, s, c, lo, hi))
    return out


def _rounds(transfers) -> list[list]:
    """Transfers packed greedily, by cyclic distance, into rounds where a tile sends at most once
    and receives at most once."""
    tiles = 1 + max([max(s, c) for _k, s, c, _l, _h in transfers], default=0)
    order = sorted(transfers, key=lambda tr: ((tr[2] - tr[1]) % tiles, tr))
    rounds: list[tuple[list, set, set]] = []
    for tr in order:
        for members, sources, targets in rounds:
            if tr[1] not in sources and tr[2] not in targets:
                members.append(tr)
                sources.add(tr[1])
                targets.add(tr[2])
                break
        else:
            rounds.append(([tr], {tr[1]}, {tr[2]}))
    return [members for members, _s, _t in rounds]


def _send(b: SpmdBuilder, x, t: Tiling, dim: int, i: int, round_, wins):
    """The piece each source sends in a round (the widest part, cut so it holds its own), the
    device pairs, and where each (window, target tile) puts what it receives."""
    w = max(hi - lo for _k, _s, _c, lo, hi in round_)
    offsets, tile_pairs, placed = {}, [], {}
    for k, s, c, lo, hi in round_:
        o = min(lo - s * i, i - w)
        offsets[s] = o
        tile_pairs.append((s, c))
        placed[(k, c)] = s * i + o - wins[k][0][c] + i
    coords = [int(c) for c in t.coords[:, dim]]
    values = [offsets.get(c, 0) for c in coords]
    if all(v == values[0] for v in values):
        piece = _static_slice(b, x, dim, values[0], values[0] + w)
    else:
        starts = [b.zero()] * x.shape.rank
        starts[dim] = b.per_partition(values)
        sizes = list(x.shape.dims)
        sizes[dim] = w
        piece = b.add("dynamic-slice", [x] + starts, x.shape.with_dims(tuple(sizes)),
                      {"dynamic_slice_sizes": tuple(sizes)})
    return piece, tile_pairs_to_devices(t, dim, tile_pairs), placed


def tile_pairs_to_devices(t: Tiling, dim: int, tile_pairs) -> list[tuple[int, int]]:
    """(source device, target device) for every (source tile, target tile) on `dim`, in every
    group of devices that share the other tile coordinates and the replica slot."""
    ids = np.moveaxis(t.ids, dim, 0)
    pairs = []
    for s, c in tile_pairs:
        pairs += [(int(a), int(z)) for a, z in zip(ids[s].reshape(-1), ids[c].reshape(-1))]
    return sorted(pairs)


def _place(b: SpmdBuilder, buf, piece, dim: int, where: list[int]) -> HloInstruction:
    """dynamic-update-slice of `piece` into `buf` at where[d] on `dim` on device d."""
    starts = [b.zero()] * buf.shape.rank
    starts[dim] = b.per_partition(where)
    return b.add("dynamic-update-slice", [buf, piece] + starts, buf.shape)


def _static_slice(b: SpmdBuilder, x, dim: int, lo: int, hi: int) -> HloInstruction:
    if lo == 0 and hi == x.shape.dims[dim]:
        return x
    spec = [(0, d, 1) for d in x.shape.dims]
    spec[dim] = (lo, hi, 1)
    dims = list(x.shape.dims)
    dims[dim] = hi - lo
    return b.add("slice", [x], x.shape.with_dims(tuple(dims)), {"slice": SliceSpec(tuple(spec))})


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
