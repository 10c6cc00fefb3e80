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

import numpy as np

from hlo_common.interpreter.numeric import ints_attr, to_element_type, unsupported, wrap_integers
from hlo_common.interpreter.reducers import classify_reducer
from hlo_common.interpreter.registry import register
from hlo_common.ir import HloComputation, HloInstruction


def index_vectors(indices: np.ndarray, index_vector_dim: int) -> tuple[np.ndarray, list[int]]:
    """Start indices as int64 [batch..., k], plus each original index dim's batch position."""
    idx = np.asarray(indices)
    if index_vector_dim >= idx.ndim:
        idx = idx[..., None]
    if idx.dtype.kind == "u":
        idx = np.minimum(idx, np.uint64(1 << 62)) if idx.dtype.itemsize == 8 else idx
    idx = np.moveaxis(idx.astype(np.int64), index_vector_dim, -1)
    batch_pos = {}
    for d in range(idx.ndim):  # original dims (excluding the vector dim) in order
        if d != index_vector_dim:
            batch_pos[d] = d if d < index_vector_dim else d - 1
    return idx, batch_pos


def _starts(instr, operand_shape, idx, batch_pos, index_map, operand_batching, indices_batching):
    """One int64 array (batch-shaped) per operand dim: the window's start along it."""
    batch_shape = idx.shape[:-1]
    starts = [np.zeros(batch_shape, np.int64) for _ in operand_shape]
    if len(index_map) != idx.shape[-1]:
        raise unsupported(instr, f"index vector has {idx.shape[-1]} entries, the index map {len(index_map)}")
    for k, d in enumerate(index_map):
        starts[d] = idx[..., k]
    for od, idim in zip(operand_batching, indices_batching):
        pos = batch_pos[idim]
        shape = [1] * len(batch_shape)
        shape[pos] = batch_shape[pos]
        starts[od] = np.broadcast_to(np.arange(batch_shape[pos], dtype=np.int64).reshape(shape), batch_shape)
    return starts


def _window_indices(starts, window_dims, window_sizes, nbatch):
    """Broadcastable index arrays [batch..., window...] for every operand dim."""
    nwin = len(window_dims)
    out = []
    for d, s in enumerate(starts):
        s = s.reshape(s.shape + (1,) * nwin)
        if d in window_dims:
            w = window_dims.index(d)
            shape = [1] * (nbatch + nwin)
            shape[nbatch + w] = window_sizes[w]
            s = s + np.arange(window_sizes[w], dtype=np.int64).reshape(shape)
        out.append(s)
    return out


def _to_output_order(value: np.ndarray, nbatch: int, window_positions: tuple[int, ...]) -> np.ndarray:
    """[batch..., window...] -> the dims order where window dim i sits at window_positions[i]."""
    rank = value.ndim
    perm, b, w = [], 0, 0
    for pos in range(rank):
        if w < len(window_positions) and pos == window_positions[w]:
            perm.append(nbatch + w)
            w += 1
        else:
            perm.append(b)
            b += 1
    return value.transpose(perm)


@register("gather")
def _gather(instr: HloInstruction, operands, ev) -> np.ndarray:
    operand, indices = operands
    collapsed = ints_attr(instr, "collapsed_slice_dims")
    operand_batching = ints_attr(instr, "operand_batching_dims")
    slice_sizes = ints_attr(instr, "slice_sizes")
    if len(slice_sizes) != operand.ndim:
        raise unsupported(instr, f"slice_sizes has {len(slice_sizes)} entries for rank {operand.ndim}")
    idx, batch_pos = index_vectors(indices, int(instr.attrs.get("index_vector_dim", indices.ndim)))
    starts = _starts(instr, operand.shape, idx, batch_pos, ints_attr(instr, "start_index_map"),
                     operand_batching, ints_attr(instr, "start_indices_batching_dims"))
    for d in ints_attr(instr, "start_index_map"):
        starts[d] = np.clip(starts[d], 0, max(operand.shape[d] - slice_sizes[d], 0))
    window_dims = [d for d in range(operand.ndim) if d not in collapsed and d not in operand_batching]
    window_sizes = [slice_sizes[d] for d in window_dims]
    nbatch = idx.ndim - 1
    full = _window_indices(starts, window_dims, window_sizes, nbatch)
    value = operand[tuple(full)] if operand.ndim else np.broadcast_to(operand, idx.shape[:-1])
    value = np.broadcast_to(value, idx.shape[:-1] + tuple(window_sizes))
    return np.ascontiguousarray(_to_output_order(value, nbatch, ints_attr(instr, "offset_dims")))


@register("scatter")
def _scatter(instr: HloInstruction, operands, ev):
    n = (len(operands) - 1) // 2
    targets, indices, updates = operands[:n], operands[n], operands[n + 1:]
    shape = targets[0].shape
    update_window_dims = ints_attr(instr, "update_window_dims")
    inserted = ints_attr(instr, "inserted_window_dims")
    input_batching = ints_attr(instr, "input_batching_dims")
    idx, batch_pos = index_vectors(indices, int(instr.attrs.get("index_vector_dim", indices.ndim)))
    starts = _starts(instr, shape, idx, batch_pos, ints_attr(instr, "scatter_dims_to_operand_dims"),
                     input_batching, ints_attr(instr, "scatter_indices_batching_dims"))
    window_dims = [d for d in range(len(shape)) if d not in inserted and d not in input_batching]
    if len(window_dims) != len(update_window_dims):
        raise unsupported(instr, "update_window_dims do not match the operand's window dims")
    window_sizes = [updates[0].shape[d] for d in update_window_dims]
    nbatch = idx.ndim - 1
    # An update window is applied only if all of it lies inside the operand.
    valid = np.ones(idx.shape[:-1], dtype=bool)
    for d, s in enumerate(starts):
        size = window_sizes[window_dims.index(d)] if d in window_dims else 1
        valid &= (s >= 0) & (s <= shape[d] - size)
    full = _window_indices(starts, window_dims, window_sizes, nbatch)
    full_shape = idx.shape[:-1] + tuple(window_sizes)
    lin = np.ravel_multi_index(tuple(np.broadcast_to(np.where(
        valid.reshape(valid.shape + (1,) * len(window_sizes)), f, 0), full_shape) for f in full), shape) \
        if len(shape) else np.zeros(full_shape, np.int64)
    scatter_dims = [d for d in range(updates[0].ndim) if d not in update_window_dims]
    perm = scatter_dims + list(update_window_dims)
    keep = np.broadcast_to(valid.reshape(valid.shape + (1,) * len(window_sizes)), full_shape).reshape(-1)
    lin = lin.reshape(-1)[keep]
    upd = [u.transpose(perm).reshape(-1)[keep] for u in updates]
    flat = [t.reshape(-1).copy() for t in targets]
    apply_updates(flat, lin, upd, instr.attrs["to_apply"], ev, instr)
    out = tuple(f.reshape(shape) for f in flat)
    return out if n > 1 else out[0]


_UFUNCS = {
    "add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
}


def apply_updates(flat: list[np.ndarray], lin: np.ndarray, upd: list[np.ndarray], comp: HloComputation,
                  ev, instr: HloInstruction, update_first: bool = False) -> None:
    """flat[i][lin[j]] = comp(flat..[lin[j]], upd..[j]) for j in order, in place.

    The combiner's parameters are (targets..., updates...), or (updates..., targets...) with
    `update_first` (select-and-scatter's scatter computation). Duplicated indices are combined in
    the order they appear.
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
        _apply_parameter_root(flat, lin, upd, comp, update_first)
        return
    for sel in _rounds(lin):
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
    from hlo_common.dtypes import from_numpy_dtype

    return from_numpy_dtype(dt)


def _apply_parameter_root(flat, lin, upd, comp, update_first) -> None:
    """Combiners that return parameters unchanged: per element the last update wins (or none)."""
    root = comp.root
    picks = [root] if root.opcode == "parameter" else list(root.operands)
    # Keep the last occurrence of every index.
    rev = lin[::-1]
    _, first_in_rev = np.unique(rev, return_index=True)
    last = lin.size - 1 - first_in_rev
    where = lin[last]
    cur = [f[where].copy() for f in flat]
    new = [u[last] for u in upd]
    args = new + cur if update_first else cur + new
    for i, p in enumerate(picks):
        flat[i][where] = args[p.parameter_number]
