"""Which dimensions of a gather's or scatter's operand, indices and result (updates) correspond,
and how a tiling moves between them (XLA's hlo_sharding_util.cc:
GatherOutputShardingFromOperandOperandPassthroughDimensions, ...FromIndexIndexPassthroughDimensions
and their scatter counterparts).

- passthrough operand dims: taken whole by every slice (slice or window size = the dim), so a
  tiling of them carries to the result's (updates') matching offset (window) dim;
- index passthrough dims: the indices' dims other than the index vector dim, matched in order
  with the result's batch (updates' scatter) dims;
- trivially sliced operand dims: indexed with slices of size 1 (XLA's
  PartitionGatherTrivialSlicedOperandDimensions): each device looks up only the rows it holds.
None of these apply with operand batching dims (then the op runs whole).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.spmd.tiling import Tiling


@dataclass(frozen=True)
class Dims:
    operand_to_out: dict  # passthrough operand dim -> result (updates) dim
    indices_to_out: dict  # indices dim -> result (updates) batch dim
    trivial: tuple  # trivially sliced operand dims
    index_component: dict  # operand dim -> its position in the index vector


def dims_of(instr: HloInstruction) -> Dims | None:
    a = instr.attrs
    if a.get("operand_batching_dims") or a.get("input_batching_dims"):
        return None
    if instr.opcode == "gather":
        operand, indices, out_rank = instr.operands[0], instr.operands[1], instr.shape.rank
        window_out, removed, index_map = a["offset_dims"], a["collapsed_slice_dims"], a["start_index_map"]
        sizes = list(a["slice_sizes"])
    else:
        operand, indices, out_rank = instr.operands[0], instr.operands[1], instr.operands[2].shape.rank
        window_out, removed = a["update_window_dims"], a["inserted_window_dims"]
        index_map = a["scatter_dims_to_operand_dims"]
        window = iter(instr.operands[2].shape.dims[d] for d in window_out)
        sizes = [1 if d in removed else next(window) for d in range(operand.shape.rank)]
    window_out = list(window_out)
    kept = [d for d in range(operand.shape.rank) if d not in removed]
    operand_to_out = {d: o for d, o in zip(kept, window_out) if sizes[d] == operand.shape.dims[d]}
    batch_out = [d for d in range(out_rank) if d not in window_out]
    ivd = a["index_vector_dim"]
    index_dims = [d for d in range(indices.shape.rank) if d != ivd]
    trivial = tuple(d for d in index_map if sizes[d] == 1 and operand.shape.dims[d] > 1)
    return Dims(operand_to_out, dict(zip(index_dims, batch_out)), trivial,
                {d: k for k, d in enumerate(index_map)})


def project(t: Tiling, mapping: dict, rank: int) -> Tiling:
    """The tiling of a rank-`rank` array whose dim mapping[d] is tiled as `t`'s dim d (the dims
    of `t` not in `mapping` become replication)."""
    kept = [d for d in range(t.rank) if d in mapping and t.tiles[d] > 1]
    folded = t.to_replication([d for d in range(t.rank) if d not in kept and t.tiles[d] > 1])
    ids = folded.ids.reshape([t.tiles[d] for d in kept] + [folded.ids.shape[-1]])
    order = sorted(range(len(kept)), key=lambda k: mapping[kept[k]])
    ids = ids.transpose(order + [len(kept)])
    shape = [1] * rank + [ids.shape[-1]]
    for k in order:
        shape[mapping[kept[k]]] = t.tiles[kept[k]]
    return Tiling.of(np.asarray(ids).reshape(shape))


def inverse(mapping: dict) -> dict:
    return {v: k for k, v in mapping.items()}


def forward(instr: HloInstruction, index: int, t: Tiling) -> Tiling | None:
    """The result's tiling from operand `index`'s (sharding propagation, forward)."""
    dims = dims_of(instr)
    if dims is None or instr.shape.is_tuple:
        return None
    rank = instr.shape.rank
    if instr.opcode == "gather":
        mapping = {0: dims.operand_to_out, 1: dims.indices_to_out}.get(index)
        return None if mapping is None else project(t, mapping, rank)
    if index == 0:
        return project(t, {d: d for d in set(dims.operand_to_out) | set(dims.trivial)}, rank)
    if index == 2:
        return project(t, inverse(dims.operand_to_out), rank)
    return None


def backward(instr: HloInstruction, index: int, t: Tiling) -> Tiling | None:
    """What operand `index` should hold for the result's tiling `t` (propagation, backward)."""
    dims = dims_of(instr)
    if dims is None or instr.shape.is_tuple:
        return None
    operand = instr.operands[index]
    if instr.opcode == "gather":
        mapping = {0: dims.operand_to_out, 1: dims.indices_to_out}.get(index)
        return None if mapping is None else project(t, inverse(mapping), operand.shape.rank)
    if index == 0:
        return project(t, {d: d for d in set(dims.operand_to_out) | set(dims.trivial)}, operand.shape.rank)
    if index == 2:
        return project(t, dims.operand_to_out, operand.shape.rank)
    return None
