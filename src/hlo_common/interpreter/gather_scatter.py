"""Interpreter handlers for gather and scatter (XLA's HloEvaluator::HandleGather / HandleScatter).

Both turn the start-indices array into one start position per "batch" position (every index dim
but `index_vector_dim`, which may be the implicit trailing dim) and then address whole windows
with numpy fancy indexing:

- gather clamps each start so the slice stays inside the operand, as XLA does;
- scatter skips an update window entirely when any part of it would fall outside the operand,
  and applies duplicates in order (scatter positions row-major, then window positions): numpy's
  `ufunc.at` for the common combiners, "rounds" of unique indices through `ev.map_computation`
  for any other combiner (`apply_updates`, also used by select-and-scatter).

Operand / start-indices batching dims pair an operand dim with an index dim: the start along the
operand dim is the position along the paired index dim.
"""

from __future__ import annotations

import math

import numpy as np

from hlo_common.interpreter.numeric import ints_attr, to_element_type, unsupported, wrap_integers
from hlo_common.interpreter.reducers import classify_reducer
from hlo_common.interpreter.registry import register
from hlo_common.hlo.ir import HloComputation, HloInstruction


def index_vectors(indices: np.ndarray, index_vector_dim: int) -> tuple[np.ndarray, dict[int, int]]:
    """Start indices as int64 [batch..., k], plus each original index dim's batch position."""
    idx = np.asarray(indices)
    if index_vector_dim >= idx.ndim:
        idx = idx[..., None]
    if idx.dtype == np.uint64:  # keep huge unsigned starts huge (they clamp high / are dropped)
        idx = np.minimum(idx, np.uint64(1 << 62))
    idx = np.moveaxis(idx.astype(np.int64), index_vector_dim, -1)
    batch_pos = {d: (d if d < index_vector_dim else d - 1) for d in range(idx.ndim) if d != index_vector_dim}
    return idx, batch_pos


def _starts(instr, rank: int, idx, batch_pos, index_map, operand_batching, indices_batching) -> np.ndarray:
    """The window start in the operand for every batch position: int64 [batch..., rank]."""
    batch_shape = idx.shape[:-1]
    if len(index_map) != idx.shape[-1]:
        raise unsupported(instr, f"index vector has {idx.shape[-1]} entries, the index map {len(index_map)}")
    starts = np.zeros(batch_shape + (rank,), np.int64)
    if index_map:
        starts[..., list(index_map)] = idx
    for od, idim in zip(operand_batching, indices_batching):
        pos = batch_pos[idim]
        shape = [1] * len(batch_shape)
        shape[pos] = batch_shape[pos]
        starts[..., od] = np.arange(batch_shape[pos], dtype=np.int64).reshape(shape)
    return starts


def _window_offsets(shape, window_dims, window_sizes) -> np.ndarray:
    """Linear (row-major) offsets of every window position from the window start, flattened."""
    strides = _strides(shape)
    offsets = np.zeros((), np.int64)
    for d, size in zip(window_dims, window_sizes):
        offsets = offsets[..., None] + np.arange(size, dtype=np.int64) * strides[d]
    return offsets.reshape(-1)


def _to_output_order(value: np.ndarray, nbatch: int, window_positions: tuple[int, ...]) -> np.ndarray:
    """[batch..., window...] -> the dims order where window dim i sits at window_positions[i]."""
    perm, b, w = [], 0, 0
    for pos in range(value.ndim):
        if w < len(window_positions) and pos == window_positions[w]:
            perm.append(nbatch + w)
            w += 1
        else:
            perm.append(b)
            b += 1
    return value.transpose(perm)


def _strides(shape) -> np.ndarray:
    """Row-major element strides (plain Python: these are tiny and computed per call)."""
    out, step = [], 1
    for size in reversed(shape):
        out.append(step)
        step *= size
    return np.array(out[::-1], dtype=np.int64)


@register("gather")
def _gather(instr: HloInstruction, operands, ev) -> np.ndarray:
    operand, indices = operands
    collapsed = ints_attr(instr, "collapsed_slice_dims")
    operand_batching = ints_attr(instr, "operand_batching_dims")
    slice_sizes = ints_attr(instr, "slice_sizes")
    if len(slice_sizes) != operand.ndim:
        raise unsupported(instr, f"slice_sizes has {len(slice_sizes)} entries for rank {operand.ndim}")
    idx, batch_pos = index_vectors(indices, int(instr.attrs.get("index_vector_dim", indices.ndim)))
    starts = _starts(instr, operand.ndim, idx, batch_pos, ints_attr(instr, "start_index_map"),
                     operand_batching, ints_attr(instr, "start_indices_batching_dims"))
    # Every start is clamped so that the whole slice stays inside the operand.
    starts = np.clip(starts, 0, np.maximum(np.array(operand.shape) - np.array(slice_sizes), 0))
    window_dims = [d for d in range(operand.ndim) if d not in collapsed and d not in operand_batching]
    window_sizes = [slice_sizes[d] for d in window_dims]
    offsets = _window_offsets(operand.shape, window_dims, window_sizes)
    lin = (starts @ _strides(operand.shape))[..., None] + offsets
    value = operand.reshape(-1)[lin].reshape(idx.shape[:-1] + tuple(window_sizes))
    return np.ascontiguousarray(_to_output_order(value, idx.ndim - 1, ints_attr(instr, "offset_dims")))


@register("scatter")
def _scatter(instr: HloInstruction, operands, ev):
    n = (len(operands) - 1) // 2
    targets, indices, updates = operands[:n], operands[n], operands[n + 1:]
    one = _scatter_one_window(instr, targets, indices, updates, ev)
    if one is not None:
        return one if n > 1 else one[0]
    shape = targets[0].shape
    update_window_dims = ints_attr(instr, "update_window_dims")
    inserted = ints_attr(instr, "inserted_window_dims")
    input_batching = ints_attr(instr, "input_batching_dims")
    idx, batch_pos = index_vectors(indices, int(instr.attrs.get("index_vector_dim", indices.ndim)))
    starts = _starts(instr, len(shape), idx, batch_pos, ints_attr(instr, "scatter_dims_to_operand_dims"),
                     input_batching, ints_attr(instr, "scatter_indices_batching_dims"))
    window_dims = [d for d in range(len(shape)) if d not in inserted and d not in input_batching]
    if len(window_dims) != len(update_window_dims):
        raise unsupported(instr, "update_window_dims do not match the operand's window dims")
    window_sizes = [updates[0].shape[d] for d in update_window_dims]
    sizes = np.ones(len(shape), np.int64)
    sizes[window_dims] = window_sizes
    # An update window is applied only if all of it lies inside the operand.
    valid = np.all((starts >= 0) & (starts <= np.array(shape, np.int64) - sizes), axis=-1).reshape(-1)
    lin = ((starts.reshape(-1, len(shape))[valid] @ _strides(shape))[:, None]
           + _window_offsets(shape, window_dims, window_sizes)).reshape(-1)
    perm = [d for d in range(updates[0].ndim) if d not in update_window_dims] + list(update_window_dims)
    nwin = int(np.prod(window_sizes, dtype=np.int64))
    upd = [u.transpose(perm).reshape(-1, nwin)[valid].reshape(-1) for u in updates]
    flat = [t.reshape(-1) if k == 0 and ev.owns(t) and t.flags.c_contiguous else t.reshape(-1).copy()
            for k, t in enumerate(targets)]
    apply_updates(flat, lin, upd, instr.attrs["to_apply"], ev, instr,
                  unique=instr.attrs.get("unique_indices") is True)
    out = tuple(f.reshape(shape) for f in flat)
    return out if n > 1 else out[0]


def _scatter_one_window(instr: HloInstruction, targets, indices, updates, ev) -> tuple | None:
    """Scatter with a single update window (`x.at[i].set(v)` in a loop body), in Python ints and
    one slice; None when there are several windows or batching dims (the general path)."""
    index_map = ints_attr(instr, "scatter_dims_to_operand_dims")
    ivd = int(instr.attrs.get("index_vector_dim", indices.ndim))
    batch = math.prod(n for d, n in enumerate(indices.shape) if d != ivd)
    if batch != 1 or indices.size != len(index_map) or "input_batching_dims" in instr.attrs:
        return None
    shape = targets[0].shape
    inserted = ints_attr(instr, "inserted_window_dims")
    window_sizes = [updates[0].shape[d] for d in ints_attr(instr, "update_window_dims")]
    window_dims = [d for d in range(len(shape)) if d not in inserted]
    if len(window_dims) != len(window_sizes):
        return None
    sizes = [1] * len(shape)
    for d, size in zip(window_dims, window_sizes):
        sizes[d] = size
    start = [0] * len(shape)
    for d, v in zip(index_map, indices.reshape(-1).tolist()):
        start[d] = v
    if any(s < 0 or s > dim - z for s, dim, z in zip(start, shape, sizes)):
        return tuple(targets)  # the window leaves the operand: nothing is applied
    region = tuple(slice(s, s + z) for s, z in zip(start, sizes))
    outs = [t if k == 0 and ev.owns(t) else t.copy() for k, t in enumerate(targets)]
    new = [u.reshape(sizes) for u in updates]
    comp = instr.attrs["to_apply"]
    root = comp.root
    picks = [root] if root.opcode == "parameter" else list(root.operands) if root.opcode == "tuple" else []
    if picks and all(p.opcode == "parameter" for p in picks):
        args = [o[region] for o in outs] + new
        results = [args[p.parameter_number] for p in picks]
    else:
        results = ev.map_computation(comp, [o[region] for o in outs] + new)
    for o, r in zip(outs, results):
        o[region] = r
    return tuple(outs)


_UFUNCS = {
    "add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
}


def apply_updates(flat: list[np.ndarray], lin: np.ndarray, upd: list[np.ndarray], comp: HloComputation,
                  ev, instr: HloInstruction, update_first: bool = False, unique: bool = False) -> None:
    """flat[i][lin[j]] = comp(flat..[lin[j]], upd..[j]) for j in order, in place.

    The combiner's parameters are (targets..., updates...), or (updates..., targets...) with
    `update_first` (select-and-scatter's scatter computation). Duplicated indices are combined in
    the order they appear. `unique` promises no duplicates (scatter's unique_indices; XLA leaves
    the result of a broken promise implementation-defined).
    """
    if lin.size == 0:
        return
    kind = classify_reducer(comp) if len(flat) == 1 else None
    if kind is not None:
        _apply_ufunc(kind, flat[0], lin, upd[0])
        return
    root = comp.root
    picks = [root] if root.opcode == "parameter" else list(root.operands) if root.opcode == "tuple" else []
    if picks and all(p.opcode == "parameter" for p in picks):
        _apply_parameter_root(flat, lin, upd, comp, update_first, unique)
        return
    for sel in ([np.arange(lin.size)] if unique else _rounds(lin)):
        where = lin[sel]
        cur = [f[where] for f in flat]
        new = [u[sel] for u in upd]
        res = ev.map_computation(comp, new + cur if update_first else cur + new)
        if len(res) != len(flat):
            raise unsupported(instr, f"combiner {comp.name} returns {len(res)} values, not {len(flat)}")
        for f, v in zip(flat, res):
            f[where] = v


def _rounds(lin: np.ndarray) -> list[np.ndarray]:
    """Update positions split into rounds: round r holds every index's r-th occurrence, so each
    round has no duplicate indices and rounds in order respect the order of the updates."""
    order = np.argsort(lin, kind="stable")
    sorted_lin = lin[order]
    first = np.r_[True, sorted_lin[1:] != sorted_lin[:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(lin.size), 0))
    rank = np.empty(lin.size, np.int64)
    rank[order] = np.arange(lin.size) - group_start
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.cumsum(np.bincount(rank))
    return np.split(by_rank, bounds[:-1])


def _apply_ufunc(kind: str, target: np.ndarray, lin: np.ndarray, values: np.ndarray) -> None:
    ptype = _ptype_of(target.dtype)
    if ptype.is_pred:
        ufunc = np.logical_and if kind == "and" else np.logical_or
        ufunc.at(target, lin, values)
    elif ptype.is_integer:  # wrap-around arithmetic: combine in 64 bits, wrap once
        ufunc = {"and": np.bitwise_and, "or": np.bitwise_or}.get(kind) or _UFUNCS[kind]
        wide_dt = np.uint64 if ptype.kind == "unsigned" and ptype.bits == 64 else np.int64
        wide = target.astype(wide_dt)
        ufunc.at(wide, lin, values.astype(wide_dt))
        target[...] = wrap_integers(wide, ptype)
    elif ptype.is_float and ptype.bits < 32:  # bf16, f16, f8: combine in f32, round once
        wide = target.astype(np.float32)
        _UFUNCS[kind].at(wide, lin, values.astype(np.float32))
        target[...] = to_element_type(wide, ptype)
    else:
        _UFUNCS[kind].at(target, lin, values)


def _ptype_of(dt: np.dtype):
    from hlo_common.hlo.dtypes import from_numpy_dtype

    return from_numpy_dtype(dt)


def _apply_parameter_root(flat, lin, upd, comp, update_first, unique) -> None:
    """Combiners that return parameters unchanged: per element the last update wins (or none)."""
    root = comp.root
    picks = [root] if root.opcode == "parameter" else list(root.operands)
    # Keep the last occurrence of every index.
    if unique:
        last = np.arange(lin.size)
    else:
        _, first_in_rev = np.unique(lin[::-1], return_index=True)
        last = lin.size - 1 - first_in_rev
    where = lin[last]
    cur = [f[where].copy() for f in flat]
    new = [u[last] for u in upd]
    args = new + cur if update_first else cur + new
    for i, p in enumerate(picks):
        flat[i][where] = args[p.parameter_number]
