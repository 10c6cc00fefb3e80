"""Shape rules of gather and scatter, including operand/index batching dimensions.

The start indices are implicitly extended with a trailing dimension of size 1 when
`index_vector_dim` equals their rank, as in XLA.
"""

from __future__ import annotations

from hlo_common.hlo.shape_inference._base import (
    check_dim_list, computation_attr, describe, fail, int_attr, ints_attr, like, make, operand_shape, rule,
    tuple_of,
)
from hlo_common.hlo.shape_inference.reductions import verify_reducer


def _expanded_indices(indices, index_vector_dim: int, what: str) -> list[int]:
    if not indices.element_type.is_integer:
        fail(f"{what} indices are {describe(indices)}, expected an integral array")
    if not 0 <= index_vector_dim <= indices.rank:
        fail(f"index_vector_dim={index_vector_dim}, expected a value in [0, {indices.rank}]")
    dims = list(indices.dims)
    if index_vector_dim == len(dims):
        dims.append(1)
    return dims


def _check_batching(operand_dims, index_dims, operand_rank: int, indices_dims: list[int], ivd: int,
                    names: tuple[str, str]) -> None:
    check_dim_list(operand_dims, operand_rank, names[0], ascending=True)
    check_dim_list(index_dims, len(indices_dims), names[1])
    if len(operand_dims) != len(index_dims):
        fail(f"{names[0]} has {len(operand_dims)} entries, {names[1]} has {len(index_dims)}; expected equal")
    if ivd in index_dims:
        fail(f"{names[1]} contains index_vector_dim={ivd}, expected other dimensions")


def _check_index_map(index_map, count: int, operand_rank: int, name: str, exclusive) -> None:
    if len(index_map) != count:
        fail(f"{name} has {len(index_map)} entries, expected {count} (the index vector size)")
    check_dim_list(index_map, operand_rank, name)
    for d in index_map:
        if d in exclusive:
            fail(f"{name} maps to dimension {d}, a batching dimension; expected non-batching dimensions")


@rule("gather")
def _gather(instr, ctx):
    operand = operand_shape(instr, 0, "the operand of gather")
    indices = operand_shape(instr, 1, "the start indices of gather")
    ivd = int_attr(instr, "index_vector_dim")
    idx = _expanded_indices(indices, ivd, "gather")
    offset = ints_attr(instr, "offset_dims")
    collapsed = ints_attr(instr, "collapsed_slice_dims", ())
    obatch = ints_attr(instr, "operand_batching_dims", ())
    ibatch = ints_attr(instr, "start_indices_batching_dims", ())
    sizes = ints_attr(instr, "slice_sizes")
    rank = operand.rank
    out_rank = len(offset) + len(idx) - 1
    check_dim_list(offset, out_rank, "offset_dims", ascending=True)
    check_dim_list(collapsed, rank, "collapsed_slice_dims", ascending=True)
    _check_batching(obatch, ibatch, rank, idx, ivd, ("operand_batching_dims", "start_indices_batching_dims"))
    if set(collapsed) & set(obatch):
        fail("collapsed_slice_dims and operand_batching_dims overlap, expected disjoint sets")
    _check_index_map(ints_attr(instr, "start_index_map"), idx[ivd], rank, "start_index_map", set(obatch))
    if len(sizes) != rank:
        fail(f"slice_sizes has {len(sizes)} entries, expected {rank} (the operand rank)")
    if len(offset) + len(collapsed) + len(obatch) != rank:
        fail(f"{len(offset)} offset_dims + {len(collapsed)} collapsed_slice_dims + {len(obatch)} "
             f"operand_batching_dims, expected {rank} (the operand rank)")
    for i, (n, d) in enumerate(zip(sizes, operand.dims)):
        if not 0 <= n <= d:
            fail(f"slice size {n} of dimension {i} is out of range, expected 0..{d}")
    for d in (*collapsed, *obatch):
        if sizes[d] > 1:
            fail(f"slice size of collapsed or batching dimension {d} is {sizes[d]}, expected at most 1")
    window = [sizes[d] for d in range(rank) if d not in collapsed and d not in obatch]
    batch = [n for k, n in enumerate(idx) if k != ivd]
    wi = bi = 0
    out = []
    for i in range(out_rank):
        if i in offset:
            out.append(window[wi])
            wi += 1
        else:
            out.append(batch[bi])
            bi += 1
    return make(operand.element_type, out)


@rule("scatter")
def _scatter(instr, ctx):
    ops = instr.operands
    n = len(ops) // 2
    if not ops or 2 * n + 1 != len(ops):
        fail(f"scatter has {len(ops)} operands, expected an odd number (N operands, indices, N updates)")
    operands = [operand_shape(instr, i, f"operand {i} of scatter") for i in range(n)]
    indices = operand_shape(instr, n, "the scatter indices")
    updates = [operand_shape(instr, n + 1 + i, f"update {i} of scatter") for i in range(n)]
    ivd = int_attr(instr, "index_vector_dim")
    idx = _expanded_indices(indices, ivd, "scatter")
    window_dims = ints_attr(instr, "update_window_dims")
    inserted = ints_attr(instr, "inserted_window_dims", ())
    obatch = ints_attr(instr, "input_batching_dims", ())
    ibatch = ints_attr(instr, "scatter_indices_batching_dims", ())
    rank = operands[0].rank
    check_dim_list(inserted, rank, "inserted_window_dims", ascending=True)
    _check_batching(obatch, ibatch, rank, idx, ivd, ("input_batching_dims", "scatter_indices_batching_dims"))
    if set(inserted) & set(obatch):
        fail("inserted_window_dims and input_batching_dims overlap, expected disjoint sets")
    if len(window_dims) + len(inserted) + len(obatch) != rank:
        fail(f"{len(window_dims)} update_window_dims + {len(inserted)} inserted_window_dims + {len(obatch)} "
             f"input_batching_dims, expected {rank} (the operand rank)")
    _check_index_map(ints_attr(instr, "scatter_dims_to_operand_dims"), idx[ivd], rank,
                     "scatter_dims_to_operand_dims", set(obatch))
    for i in range(n):
        if operands[i].dims != operands[0].dims or updates[i].dims != updates[0].dims:
            fail(f"operand {i} / update {i} are {describe(operands[i])} / {describe(updates[i])}, expected "
                 f"the dimensions of operand 0 / update 0")
        _check_update(operands[i], updates[i], i, window_dims, set(inserted) | set(obatch), idx, ivd)
    verify_reducer(ctx, computation_attr(instr, "to_apply"), [s.element_type for s in operands],
                   [s.element_type for s in updates])
    return like(operands[0]) if n == 1 else tuple_of(operands)


def _check_update(operand, update, i: int, window_dims, not_window: set, idx, ivd: int) -> None:
    want_rank = len(idx) - 1 + len(window_dims)
    if update.rank != want_rank:
        fail(f"update {i} is {describe(update)}, expected rank {want_rank}")
    check_dim_list(window_dims, update.rank, "update_window_dims", ascending=True)
    bounds = [operand.dims[d] for d in range(operand.rank) if d not in not_window]
    for k, wd in enumerate(window_dims):
        if update.dims[wd] > bounds[k]:
            fail(f"update {i} window dimension {wd} is {update.dims[wd]}, expected at most the operand's "
                 f"{bounds[k]}")
    scatter_sizes = [n for k, n in enumerate(idx) if k != ivd]
    s = 0
    for k in range(update.rank):
        if k in window_dims:
            continue
        if update.dims[k] != scatter_sizes[s]:
            fail(f"update {i} scatter dimension {k} is {update.dims[k]}, expected {scatter_sizes[s]} "
                 "(the matching indices dimension)")
        s += 1
