"""The partitioner's handlers for slice, pad, concatenate, dynamic-slice, dynamic-update-slice and
iota (XLA's SpmdPartitioningVisitor::HandleSlice, HandlePad, HandleConcatenate,
HandleDynamicSlice, HandleDynamicUpdateSlice and HandleIota in xla/service/spmd/
spmd_partitioner.cc).

Each handler takes the `Partitioner` and the instruction and returns False where it does not
apply (the op then runs whole on every device). The result is tiled as sharding-propagation
asked; along a tiled dimension that the op moves data across, every device fetches the part of
its window that neighbouring devices hold (`hlo_opt.spmd.window`):
- slice: the window of the operand starting at start + c * (local size) * stride;
- pad: the window starting at c * (local size) - low, positions outside the operand set to the
  pad value;
- concatenate along a tiled dim: each operand's window, chosen by global position (XLA builds the
  whole dim with dynamic-update-slices and an all-reduce; the halos send less);
- dynamic-slice / dynamic-update-slice: dims sliced (or updated) only in part are made whole
  (XLA's choice where the offsets are data), the others stay tiled;
- iota: the local iota plus the device's offset along the iota dim, from partition-id;
- reduce-window: the input window under each output tile, padded with the init value;
- reverse: output tile c of a reversed dim is the reverse of input tile (tiles - 1 - c), so the
  operand is fetched in the result's tiling with the tile order of the reversed dims flipped (a
  collective-permute where the devices differ, none where the sharding already says so), then
  reversed locally (XLA's HandleReverse).
"""

from __future__ import annotations

from dataclasses import replace

from hlo_common.hlo.attributes import PaddingConfig, SliceSpec, Window
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.replica_groups import ReplicaGroups
from hlo_opt.spmd.tiling import Tiling
from hlo_opt.spmd.window import global_index, in_range, window, windows


def _even(shape, t: Tiling) -> bool:
    return t.local_dims(shape.dims) is not None


def _done(p, instr: HloInstruction, new: HloInstruction, t: Tiling) -> bool:
    p.values[instr] = (new, t)
    return True


def handle_slice(p, instr: HloInstruction) -> bool:
    want, operand = p.wanted(instr), instr.operands[0]
    if not _even(operand.shape, want) or not _even(instr.shape, want):
        return False
    x = p.get(operand, want)
    spec = list(instr.attrs["slice"].dims)
    for d, (start, limit, stride) in enumerate(spec):
        t = want.tiles[d]
        full = operand.shape.dims[d]
        if t == 1:
            continue
        if (start, limit, stride) == (0, full, 1):
            spec[d] = (0, full // t, 1)
            continue
        o = instr.shape.dims[d] // t
        span = (o - 1) * stride + 1
        x = window(p.b, x, want, d, full, [start + c * o * stride for c in range(t)], span)
        spec[d] = (0, span, stride)
    local = p.local(instr.shape, want, instr)
    if any(s != (0, n, 1) for s, n in zip(spec, x.shape.dims)):
        x = p.b.add("slice", [x], local, {"slice": SliceSpec(tuple(spec))})
    return _done(p, instr, x, want)


def handle_pad(p, instr: HloInstruction) -> bool:
    want, (operand, value) = p.wanted(instr), instr.operands
    config = list(instr.attrs["padding"].dims)
    if not _even(operand.shape, want) or not _even(instr.shape, want):
        return False
    if any(want.tiles[d] > 1 and interior for d, (_lo, _hi, interior) in enumerate(config)):
        return False
    x = p.get(operand, want)
    pad = p.get(value, p.replicated(value.shape))
    tiled = [d for d in range(instr.shape.rank) if want.tiles[d] > 1 and config[d][:2] != (0, 0)]
    local_config = [(0, 0, 0) if d in tiled else c for d, c in enumerate(config)]
    if any(c != (0, 0, 0) for c in local_config):
        dims = tuple(n if d in tiled else n + lo + hi + max(n - 1, 0) * it
                     for d, (n, (lo, hi, it)) in enumerate(zip(x.shape.dims, config)))
        x = p.b.add("pad", [x, pad], x.shape.with_dims(dims), {"padding": PaddingConfig(tuple(local_config))})
    for d in tiled:
        t, low = want.tiles[d], config[d][0]
        o = instr.shape.dims[d] // t
        x = window(p.b, x, want, d, operand.shape.dims[d], [c * o - low for c in range(t)], o, pad)
    return _done(p, instr, x, want)


def handle_concatenate(p, instr: HloInstruction) -> bool:
    want = p.wanted(instr)
    (dim,) = instr.attrs["dimensions"]
    if not _even(instr.shape, want):
        return False
    local = p.local(instr.shape, want, instr)
    t = want.tiles[dim]
    if t == 1:
        if not all(_even(o.shape, want) for o in instr.operands):
            return False
        parts = [p.get(o, want) for o in instr.operands]
        return _done(p, instr, p.b.add("concatenate", parts, local, {"dimensions": (dim,)}), want)
    sources = [_source(o, dim, want) for o in instr.operands]
    if any(src is None for src, _lo, _hi in sources):
        return False
    o = local.dims[dim]
    groups: dict = {}  # source -> [(output offset, (starts, width, low, high))]
    offset = 0
    for operand, (src, lo, hi) in zip(instr.operands, sources):
        starts = [c * o - offset + lo for c in range(t)]
        if any(a < hi and a + o > lo for a in starts):  # some device's window meets it
            groups.setdefault(src, []).append((offset, (starts, o, lo, hi)))
        offset += operand.shape.dims[dim]
    pieces = []
    for src, wins in groups.items():
        got = windows(p.b, p.get(src, want), want, dim, src.shape.dims[dim], [w for _o, w in wins])
        pieces += [(at, win[3] - win[2], piece) for (at, win), piece in zip(wins, got)]
    pieces.sort(key=lambda piece: piece[0])
    out = pieces[0][2]
    for at, size, piece in pieces[1:]:
        index = global_index(p.b, piece, want, dim, [c * o for c in range(t)])
        out = p.b.add("select", [in_range(p.b, index, at, at + size), piece, out], piece.shape)
    return _done(p, instr, out, want)


def _source(operand: HloInstruction, dim: int, want: Tiling):
    """(array, low, high): the operand is elements [low, high) of `array` on `dim`, which tiles
    evenly; a unit-stride slice along `dim` alone is read from the array it slices (a rotation
    then moves only what crosses tiles). None where nothing tiles evenly."""
    if operand.opcode == "slice" and _even(operand.operands[0].shape, want):
        spec, src = operand.attrs["slice"].dims, operand.operands[0]
        others = all(s == (0, n, 1) for d, (s, n) in enumerate(zip(spec, src.shape.dims)) if d != dim)
        if others and spec[dim][2] == 1:
            return src, spec[dim][0], spec[dim][1]
    if _even(operand.shape, want):
        return operand, 0, operand.shape.dims[dim]
    return None, 0, 0


def _partial_dims(operand_dims, sizes) -> list[int]:
    return [d for d, (n, s) in enumerate(zip(operand_dims, sizes)) if n != s]


def handle_dynamic_slice(p, instr: HloInstruction) -> bool:
    operand, starts = instr.operands[0], instr.operands[1:]
    if any(s.shape.rank for s in starts):
        return False
    sliced = _partial_dims(operand.shape.dims, instr.shape.dims)
    need = p.wanted(instr).to_replication(sliced)
    if not _even(operand.shape, need):
        return False
    x = p.get(operand, need)
    indices = [p.get(s, p.replicated(s.shape)) for s in starts]
    local = p.local(instr.shape, need, instr)
    new = p.b.add("dynamic-slice", [x] + indices, local, {"dynamic_slice_sizes": local.dims})
    return _done(p, instr, new, need)


def handle_dynamic_update_slice(p, instr: HloInstruction) -> bool:
    operand, update, starts = instr.operands[0], instr.operands[1], instr.operands[2:]
    if any(s.shape.rank for s in starts):
        return False
    updated = _partial_dims(operand.shape.dims, update.shape.dims)
    need = p.wanted(instr).to_replication(updated)
    if not _even(operand.shape, need) or not _even(update.shape, need):
        return False
    parts = [p.get(operand, need), p.get(update, need)]
    parts += [p.get(s, p.replicated(s.shape)) for s in starts]
    new = p.b.add("dynamic-update-slice", parts, p.local(instr.shape, need, instr))
    return _done(p, instr, new, need)


def handle_iota(p, instr: HloInstruction) -> bool:
    want = p.wanted(instr)
    if not _even(instr.shape, want):
        return False
    dim = instr.attrs["iota_dimension"]
    local = p.local(instr.shape, want, instr)
    new = p.b.add("iota", [], local, {"iota_dimension": dim})
    if want.tiles[dim] > 1:
        o = local.dims[dim]
        base = p.b.per_partition([int(c) * o for c in want.coords[:, dim]])
        scalar = local.with_dims(())
        if scalar.element_type != base.shape.element_type:
            base = p.b.add("convert", [base], scalar)
        new = p.b.add("add", [new, p.b.add("broadcast", [base], local, {"dimensions": ()})], local)
    return _done(p, instr, new, want)


def handle_rng(p, instr: HloInstruction) -> bool:
    """rng (XLA's HandleRng): split, every device draws its own tile from replicated operands;
    replicated, the draw is device 0's, broadcast to the others, so every device holds the same
    values (XLA assigns the draw to device 0 and reshards it to replicated)."""
    want = p.wanted(instr)
    if not instr.shape.is_array or not _even(instr.shape, want):
        return False
    parts = [p.get(o, p.replicated(o.shape)) for o in instr.operands]
    new = p.b.add("rng", parts, p.local(instr.shape, want, instr), dict(instr.attrs))
    if want.is_replicated and p.b.n > 1:
        everyone = ReplicaGroups(explicit=(tuple(range(p.b.n)),))
        new = p.b.add("collective-broadcast", [new], new.shape,
                      {"channel_id": p.b.channel(), "replica_groups": everyone})
    return _done(p, instr, new, want)


HANDLERS = {
    "slice": handle_slice, "pad": handle_pad, "concatenate": handle_concatenate,
    "dynamic-slice": handle_dynamic_slice, "dynamic-update-slice": handle_dynamic_update_slice,
    "iota": handle_iota, "rng": handle_rng,
}


def handle_reduce_window(p, instr: HloInstruction) -> bool:
    """reduce-window (pooling): tiled where the window is trivial (local), and along windowed
    dims each device reduces the input window under its output tile, fetched by the halo
    exchange and padded with the init value (XLA's HandleReduceWindow)."""
    if instr.shape.is_tuple or len(instr.operands) != 2:
        return False
    operand, init = instr.operands
    want = p.wanted(instr)
    dims = list(instr.attrs["window"].dims)
    if not _even(operand.shape, want) or not _even(instr.shape, want):
        return False
    if any(want.tiles[d] > 1 and w.base_dilation != 1 for d, w in enumerate(dims)):
        return False
    x = p.get(operand, want)
    value = p.get(init, p.replicated(init.shape))
    for d, w in enumerate(dims):
        trivial = (w.size, w.stride, w.padding_low, w.padding_high, w.window_dilation) == (1, 1, 0, 0, 1)
        if want.tiles[d] == 1 or trivial:
            continue
        o = instr.shape.dims[d] // want.tiles[d]
        span = (o - 1) * w.stride + (w.size - 1) * w.window_dilation + 1
        starts = [c * o * w.stride - w.padding_low for c in range(want.tiles[d])]
        x = window(p.b, x, want, d, operand.shape.dims[d], starts, span, value)
        dims[d] = replace(w, padding_low=0, padding_high=0)
    attrs = dict(instr.attrs)
    attrs["window"] = Window(tuple(dims))
    new = p.b.add("reduce-window", [x, value], p.local(instr.shape, want, instr), attrs)
    return _done(p, instr, new, want)


HANDLERS["reduce-window"] = handle_reduce_window


def handle_reverse(p, instr: HloInstruction) -> bool:
    want = p.wanted(instr)
    if not isinstance(want, Tiling) or not _even(instr.shape, want):
        return False
    dims = tuple(instr.attrs["dimensions"])
    need = Tiling.of(want.ids[tuple(slice(None, None, -1) if d in dims else slice(None)
                                    for d in range(want.rank))])
    operand = p.get(instr.operands[0], need)
    new = p.b.add("reverse", [operand], operand.shape, {"dimensions": dims})
    return _done(p, instr, new, want)


HANDLERS["reverse"] = handle_reverse
