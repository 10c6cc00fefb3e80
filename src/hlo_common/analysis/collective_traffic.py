"""What a per-device program's collectives cost: how many of each kind, and the bytes each device
sends (issue 17 item 6: ours against XLA's partitioned program, `bench/spmd_vs_xla.py`).

Bytes per device follow the usual algorithms for a group of k devices and an operand of B bytes:
all-reduce 2B(k-1)/k (reduce-scatter then all-gather, as NCCL's ring), all-gather B(k-1) (the
operand to every other member), reduce-scatter and all-to-all B(k-1)/k, collective-permute B
(from each device that is a source). Async `-start` forms count as their op; `-done` is free.
"""

from __future__ import annotations

from hlo_common.hlo.replica_groups import device_groups

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


def _bytes(shape) -> int:
    if shape.is_tuple:
        return sum(_bytes(s) for s in shape.tuple_shapes)
    if not shape.is_array:
        return 0
    count = 1
    for d in shape.dims:
        count *= d
    return count * shape.element_type.byte_size


def _group_size(instr, replicas: int, partitions: int) -> int:
    groups = device_groups(instr, replicas, partitions)
    return max((len(g) for g in groups), default=1)


def collective_traffic(module, replicas: int, partitions: int) -> tuple[dict[str, int], float]:
    """(count of each collective kind present, bytes one device sends in all of them; the most
    any device sends for collective-permutes, where devices differ)."""
    counts: dict[str, int] = {}
    sent = 0.0
    for comp in module.computations:
        for instr in comp.instructions:
            kind = instr.opcode.removesuffix("-start")
            if kind not in KINDS:
                continue
            counts[kind] = counts.get(kind, 0) + 1
            operand = sum(_bytes(op.shape) for op in instr.operands)
            if kind == "collective-permute":
                sent += operand
                continue
            k = _group_size(instr, replicas, partitions)
            sent += {"all-reduce": 2 * operand * (k - 1) / k, "all-gather": operand * (k - 1),
                     "reduce-scatter": operand * (k - 1) / k, "all-to-all": operand * (k - 1) / k}[kind]
    return counts, sent
