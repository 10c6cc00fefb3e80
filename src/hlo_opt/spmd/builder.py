"""The partitioner's instruction builder: adds per-device instructions to the new entry
computation and the collectives between devices (XLA's SpmdBuilder and the collective creators
of xla/service/spmd/spmd_partitioner.cc).

Collectives use global device ids (`channel_id` and `use_global_device_ids=true` where the op
has it), replica_groups listing each group's partitions in the order the data is laid out, as
XLA's partitioner writes them. Per-device offsets come from `partition-id` indexing a constant
table, as XLA's MakePartitionOffsets does.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.attributes import SourceTargetPairs
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.hlo.hlo_creation_utils import make_constant, scalar_computation
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.replica_groups import ReplicaGroups
from hlo_common.hlo.shape import Shape

S32 = PRIMITIVE_TYPES["s32"]
U32 = PRIMITIVE_TYPES["u32"]


class SpmdBuilder:
    """Builds into `comp` for `n` partitions; one partition-id and one channel counter."""

    def __init__(self, module: HloModule, comp: HloComputation, n: int):
        self.module, self.comp, self.n = module, comp, n
        self._partition_id: HloInstruction | None = None
        self._zero: HloInstruction | None = None
        self._channel = _max_channel_id(module)
        self._reducers: dict[tuple[str, str], HloComputation] = {}

    def add(self, opcode: str, operands, shape: Shape | None = None, attrs=None, name=None) -> HloInstruction:
        return self.comp.add_new_instruction(opcode, list(operands), shape, attrs or {}, name=name)

    def partition_id(self) -> HloInstruction:
        if self._partition_id is None:
            self._partition_id = self.add("partition-id", [], Shape.array(U32, ()))
        return self._partition_id

    def zero(self) -> HloInstruction:
        if self._zero is None:
            self._zero = make_constant(self.comp, 0, S32)
        return self._zero

    def per_partition(self, values: list[int]) -> HloInstruction:
        """An s32 scalar holding values[partition-id] on each partition (a constant where all agree)."""
        if all(v == values[0] for v in values):
            return self.zero() if values[0] == 0 else make_constant(self.comp, values[0], S32)
        table = make_constant(self.comp, np.asarray(values, np.int32), S32)
        one = self.add("dynamic-slice", [table, self.partition_id()], Shape.array(S32, (1,)),
                       {"dynamic_slice_sizes": (1,)})
        return self.add("reshape", [one], Shape.array(S32, ()))

    def channel(self) -> int:
        self._channel += 1
        return self._channel

    def reducer(self, opcode: str, etype) -> HloComputation:
        key = (opcode, etype.name)
        if key not in self._reducers:
            self._reducers[key] = scalar_computation(self.module, opcode, etype, before=self.comp)
        return self._reducers[key]

    def all_gather(self, x: HloInstruction, groups: list[list[int]], dim: int) -> HloInstruction:
        dims = list(x.shape.dims)
        dims[dim] *= len(groups[0])
        return self.add("all-gather", [x], x.shape.with_dims(tuple(dims)), {
            "channel_id": self.channel(), "replica_groups": _groups(groups),
            "dimensions": (dim,), "use_global_device_ids": True})

    def all_reduce(self, x: HloInstruction, groups: list[list[int]], reducer: HloComputation) -> HloInstruction:
        return self.add("all-reduce", [x], x.shape, {
            "channel_id": self.channel(), "replica_groups": _groups(groups),
            "use_global_device_ids": True, "to_apply": reducer})

    def reduce_scatter(self, x: HloInstruction, groups: list[list[int]], dim: int,
                       reducer: HloComputation) -> HloInstruction:
        dims = list(x.shape.dims)
        dims[dim] //= len(groups[0])
        return self.add("reduce-scatter", [x], x.shape.with_dims(tuple(dims)), {
            "channel_id": self.channel(), "replica_groups": _groups(groups), "dimensions": (dim,),
            "use_global_device_ids": True, "to_apply": reducer})

    def collective_permute(self, x: HloInstruction, pairs) -> HloInstruction:
        return self.add("collective-permute", [x], x.shape, {
            "channel_id": self.channel(), "source_target_pairs": SourceTargetPairs(tuple(pairs))})


def _groups(groups: list[list[int]]) -> ReplicaGroups:
    return ReplicaGroups(explicit=tuple(tuple(g) for g in groups))


def _max_channel_id(module: HloModule) -> int:
    ids = [i.attrs.get("channel_id") for c in module.computations for i in c.instructions]
    return max([int(i) for i in ids if isinstance(i, int)], default=0)
