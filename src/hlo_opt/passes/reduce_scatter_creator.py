"""ReduceScatterCreator ("reduce-scatter-creator"): an all-reduce whose one user keeps only this
device's slice of it becomes a reduce-scatter (xla/service/gpu/transforms/
reduce_scatter_creator.cc, on the pattern of xla/service/reduce_scatter_utils.cc).

Where it sits: in the `collective-optimizations` pipeline, after the SPMD partitioner, which
writes a sharded contraction whose result is wanted split as an all-reduce then a dynamic-slice
at offsets read by partition-id from a constant table:

    %ar = f32[16,6] all-reduce(%dot), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=%add
    %off = s32[] reshape(s32[1] dynamic-slice(s32[4] constant({0, 4, 8, 12}), %partition-id))
    %ds = f32[4,6] dynamic-slice(%ar, %off, %zero), dynamic_slice_sizes={4,6}
      =>  %ds = f32[4,6] reduce-scatter(%dot), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, ...

The offsets may be any constant expression of partition-id (algsimp rewrites the table as an
iota times the piece size before this pass runs). The slice must cut one dim into as many equal pieces as each group has members, every member
taking a different piece; the group is listed in the order of the pieces (the reduction is the
same in any order). Only modules of one replica, where partition-id is the global device id of
`use_global_device_ids`, are rewritten. The all-reduce goes when the slice was its only user.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.replica_groups import ReplicaGroups, device_groups
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


@register_pass
@dataclass
class ReduceScatterCreator(HloPass):
    """all-reduce + dynamic-slice by partition-id -> reduce-scatter."""

    name = "reduce-scatter-creator"

    def run(self, module: HloModule) -> bool:
        partitions = int(module.header_attr("num_partitions") or 1)
        if int(module.header_attr("replica_count") or 1) != 1 or partitions <= 1:
            return False
        changed = False
        for comp in module.computations:
            for instr in list(comp.instructions):
                if instr.opcode == "all-reduce" and instr.parent is comp:
                    changed |= _rewrite(instr, partitions)
        return changed


def _rewrite(ar: HloInstruction, n: int) -> bool:
    if len(ar.operands) != 1 or ar.shape.is_tuple or not ar.attrs.get("use_global_device_ids") \
            or len(ar.users) != 1:
        return False
    ds = ar.users[0]
    if ds.opcode != "dynamic-slice" or ds.operands[0] is not ar:
        return False
    cut = [d for d, (a, b) in enumerate(zip(ar.shape.dims, ds.shape.dims)) if a != b]
    if len(cut) != 1:
        return False
    dim = cut[0]
    offsets = [_per_partition(op, n) for op in ds.operands[1:]]
    if any(o is None for o in offsets) or any(np.any(o != 0) for d, o in enumerate(offsets) if d != dim):
        return False
    groups = _ordered_groups(ar, offsets[dim], ds.shape.dims[dim], ar.shape.dims[dim], n)
    if groups is None:
        return False
    comp = ar.parent
    attrs = {"channel_id": ar.attrs.get("channel_id"), "replica_groups": ReplicaGroups(explicit=groups),
             "dimensions": (dim,), "use_global_device_ids": True, "to_apply": ar.attrs["to_apply"]}
    rs = comp.add_new_instruction("reduce-scatter", [ar.operands[0]], ds.shape, attrs, name="reduce-scatter")
    comp.replace_instruction(ds, rs, remove_dead_operands=False)
    if not ar.users and ar is not comp.root:
        comp.remove_instruction(ar)
    return True


def _ordered_groups(ar, offsets: np.ndarray, chunk: int, size: int, n: int):
    """Each group of the all-reduce with its members in the order of their pieces, or None."""
    groups = device_groups(ar, 1, n)
    k = size // chunk
    out = []
    for group in groups:
        if len(group) != k:
            return None
        by_piece = sorted(group, key=lambda d: offsets[d])
        if [int(offsets[d]) for d in by_piece] != [p * chunk for p in range(k)]:
            return None
        out.append(tuple(by_piece))
    return tuple(out)


def _per_partition(index: HloInstruction, n: int) -> np.ndarray | None:
    """The value of a start index on each partition: a constant expression of partition-id (the
    partitioner's table read at partition-id, or what algsimp made of it), evaluated for every
    partition with the interpreter (`hlo_opt.hlo_evaluation`); None for anything else."""
    from hlo_opt.hlo_evaluation import try_evaluate

    ids = _partition_ids(index)
    if ids is None:
        return None
    values = []
    for p in range(n):
        value = try_evaluate(index, {id(i): np.uint32(p) for i in ids})
        if value is None:
            return None
        values.append(int(np.asarray(value).reshape(-1)[0]))
    return np.asarray(values, np.int64)


def _partition_ids(index: HloInstruction, limit: int = 64) -> list[HloInstruction] | None:
    """The partition-id instructions `index` reads (None past `limit` instructions)."""
    seen, stack, found = set(), [index], []
    while stack:
        instr = stack.pop()
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        if len(seen) > limit:
            return None
        if instr.opcode == "partition-id":
            found.append(instr)
        else:
            stack.extend(instr.operands)
    return found
