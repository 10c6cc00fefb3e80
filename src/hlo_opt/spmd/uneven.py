"""Uneven shards (XLA's padding of a dim its tile count does not divide: spmd_partitioner_util.cc
GetPaddedShapeForUnevenPartitioning, PartitionedHlo::PadWithValue).

An array of dims D tiled T ways along a dim is held as ceil(D / T)-long tiles: the array padded at
its end to whole tiles, the padding's contents unspecified. Elementwise ops, broadcasts and
transposes compute on the padded tiles as they are; what would read the padding is masked with a
neutral value first (a reduce over such a dim: its init value; a contraction over it: zero).
Resharding an uneven value: when both tilings pad the array alike it is the even resharding of
the padded array; otherwise the value is gathered whole, cut to D, padded again for the wanted
tiles and cut there (`reshard_uneven`). Every other op takes uneven operands whole (the
handlers' evenness checks send it to `Partitioner._whole`).
"""

from __future__ import annotations

from hlo_common.hlo.attributes import PaddingConfig, SliceSpec
from hlo_common.hlo.hlo_creation_utils import make_constant
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.spmd.reshard import reshard
from hlo_opt.spmd.tiling import Tiling
from hlo_opt.spmd.window import global_index


def is_uneven(shape: Shape, t: Tiling) -> bool:
    return shape.is_array and bool(t.uneven_dims(shape.dims))


def reshard_uneven(p, new: HloInstruction, shape: Shape, have: Tiling, want: Tiling) -> HloInstruction:
    """`new` (the per-device value of a `shape` array tiled `have`) in tiling `want`, either of
    them uneven: through one padded shape both tilings fit where there is one (a dim split by
    one of them padded for it, the other then holding that padding whole), else through the
    whole array."""
    common = _common_padding(shape.dims, have, want)
    if common is not None:
        held = _resize_whole_dims(p, new, have, shape.dims, common)
        moved = reshard(p.b, held, shape.with_dims(common), have, want)
        return _resize_whole_dims(p, moved, want, common, shape.dims)
    held, wanted = have.padded_dims(shape.dims), want.padded_dims(shape.dims)
    whole = Tiling.replicated(shape.rank, p.n)
    full = reshard(p.b, new, shape.with_dims(held), have, whole)
    full = _resize_whole_dims(p, full, whole, held, shape.dims)
    full = _resize_whole_dims(p, full, whole, shape.dims, wanted)
    return reshard(p.b, full, shape.with_dims(wanted), whole, want)


def _common_padding(dims, have: Tiling, want: Tiling) -> tuple[int, ...] | None:
    """Per dim the padded length both tilings take: the splitting one's (both's, when they
    split it alike); None when both split a dim into tiles of different padded lengths."""
    padded = [(t, t.padded_dims(dims)) for t in (have, want)]
    out = []
    for d, size in enumerate(dims):
        lengths = {p[d] for t, p in padded if t.tiles[d] > 1}
        if len(lengths) > 1:
            return None
        out.append(lengths.pop() if lengths else size)
    return tuple(out)


def _resize_whole_dims(p, x: HloInstruction, t: Tiling, src, dst) -> HloInstruction:
    """`x` (tiled `t`) with each dim `t` keeps whole grown (zero padding at its end) or cut from
    its length in `src` to the one in `dst`."""
    whole = [d for d in range(len(src)) if t.tiles[d] == 1 and src[d] != dst[d]]
    grow = [d for d in whole if dst[d] > src[d]]
    cut = [d for d in whole if dst[d] < src[d]]
    if grow:
        config = tuple((0, dst[d] - src[d], 0) if d in grow else (0, 0, 0) for d in range(len(src)))
        dims = tuple(dst[d] if d in grow else n for d, n in enumerate(x.shape.dims))
        zero = make_constant(p.b.comp, 0, x.shape.element_type)
        x = p.b.add("pad", [x, zero], x.shape.with_dims(dims), {"padding": PaddingConfig(config)})
    if cut:
        spec = tuple((0, dst[d] if d in cut else n, 1) for d, n in enumerate(x.shape.dims))
        dims = tuple(dst[d] if d in cut else n for d, n in enumerate(x.shape.dims))
        x = p.b.add("slice", [x], x.shape.with_dims(dims), {"slice": SliceSpec(spec)})
    return x


def mask(p, x: HloInstruction, shape: Shape, t: Tiling, dims, value) -> HloInstruction:
    """`x` (a per-device tile of the `shape` array tiled `t`) with the padding along `dims`
    replaced by `value` (a scalar instruction, or a number of x's type): select(global index <
    dim, x, value)."""
    dims = [d for d in dims if d in t.uneven_dims(shape.dims)]
    if not dims:
        return x
    local = x.shape
    pred = Shape.array("pred", local.dims)
    keep = None
    for d in dims:
        rows = local.dims[d]
        index = global_index(p.b, x, t, d, [c * rows for c in range(t.tiles[d])])
        limit = p.b.add("broadcast", [make_constant(p.b.comp, shape.dims[d], "s32")], index.shape,
                        {"dimensions": ()})
        inside = p.b.add("compare", [index, limit], pred, {"direction": "LT"})
        keep = inside if keep is None else p.b.add("and", [keep, inside], pred)
    if not isinstance(value, HloInstruction):
        value = make_constant(p.b.comp, value, local.element_type)
    fill = p.b.add("broadcast", [value], local, {"dimensions": ()})
    return p.b.add("select", [keep, x, fill], local)


def keeps_tiles(start: int, limit: int, stride: int, size: int, tiles: int) -> bool:
    """Whether slicing [start:limit:stride] of a dim of `size` split `tiles` ways leaves every
    tile where it was: the slice cuts the end off and the tiles stay as long (the cut elements
    become the last tile's padding)."""
    return start == 0 and stride == 1 and -(-limit // tiles) == -(-size // tiles)


def slice_in_place(p, instr: HloInstruction) -> bool:
    """A slice that keeps every device's tile where it is (XLA's HandleSlice when no data crosses
    shards): along each split dim it starts at 0, steps by 1 and leaves the tiles as long as they
    were (the cut rows become the last tile's padding); other dims are sliced locally."""
    operand = instr.operands[0]
    new, have = p.values[operand]
    want = p.wanted(instr)
    if not isinstance(have, Tiling) or have != want or not instr.shape.is_array:
        return False
    spec = []
    for d, (start, limit, stride) in enumerate(instr.attrs["slice"].dims):
        t = want.tiles[d]
        if t == 1:
            spec.append((start, limit, stride))
        elif keeps_tiles(start, limit, stride, operand.shape.dims[d], t):
            spec.append((0, new.shape.dims[d], 1))
        else:
            return False
    local = p.local(instr.shape, want, instr)
    out = p.b.add("slice", [new], local, {"slice": SliceSpec(tuple(spec))})
    p.values[instr] = (out, want)
    return True
