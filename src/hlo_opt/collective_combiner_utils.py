"""Combining independent collectives of one kind into one tuple-shaped collective (what XLA's
xla/service/collective_combiner_utils.h does for the all-reduce, all-gather and reduce-scatter
combiners, passes/all_reduce_combiner.py and its two siblings).

In every computation that is not a fusion body, the candidates (synchronous collectives of the
pass's opcode with one array operand) are visited in post order and grouped by a key the pass
gives (its replica groups, channel kind, reduction, dimension, element type: what must be equal
for one collective to do the work of several). A group closes when the next candidate of its key
depends on one of its members (combining them would make a cycle), when it would pass the
threshold of operand bytes (XLA's default 30 MiB + 7, `xla/service/collective_utils.h`) or 256
members. Every group of two or more becomes one collective over all their operands, with a tuple
result read back by get-tuple-elements:

    a = f32[256,128] all-reduce(x), channel_id=1, replica_groups={{0,1}}, to_apply=add
    b = f32[512] all-reduce(y), channel_id=2, replica_groups={{0,1}}, to_apply=add
      =>  c = (f32[256,128], f32[512]) all-reduce(x, y), channel_id=1, ...;  a = gte(c, 0), b = gte(c, 1)
"""

from __future__ import annotations

from typing import Callable, Hashable

from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape

DEFAULT_THRESHOLD_BYTES = 30 * 1024 * 1024 + 7  # kDefault{AllReduce,AllGather,ReduceScatter}CombineThreshold
DEFAULT_THRESHOLD_COUNT = 256

KeyFn = Callable[[HloInstruction], Hashable | None]


def group_key(instr: HloInstruction) -> tuple:
    """What every combinable collective shares: replica groups, channel kind, global ids."""
    groups = instr.attrs.get("replica_groups")
    return (instr.opcode, str(groups) if groups is not None else "", instr.attrs.get("channel_id") is None,
            bool(instr.attrs.get("use_global_device_ids")))


def reduction_key(instr: HloInstruction) -> tuple | None:
    """The reducer as text without names (`add` of two f32 scalars), so two copies of one
    reduction region match."""
    comp = instr.attrs.get("to_apply")
    if comp is None:
        return None
    return tuple((i.opcode, i.shape.to_string(), tuple(comp.instructions.index(o) for o in i.operands))
                 for i in comp.instructions)


def reducing_key(instr: HloInstruction, with_dimension: bool) -> tuple | None:
    """The key of an all-reduce (and, `with_dimension`, of a reduce-scatter): the groups, the
    reducer, the element type (one region serves every operand) and the scattered dimension."""
    reduction = reduction_key(instr)
    if reduction is None:
        return None
    dims = (tuple(instr.attrs.get("dimensions") or ()),) if with_dimension else ()
    return group_key(instr) + (reduction, instr.shape.element_type.name) + dims


def combine_module(module: HloModule, opcode: str, key: KeyFn, threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
                   threshold_count: int = DEFAULT_THRESHOLD_COUNT) -> bool:
    changed = False
    for comp in non_fusion_computations(module):
        # one group at a time, the groups found again after each: two groups each independent
        # inside can depend on each other crosswise (a1 -> b2, b1 -> a2), and combining both
        # would close a cycle
        while True:
            groups = _groups(comp, opcode, key, threshold_bytes, threshold_count)
            if not groups:
                break
            _combine(comp, groups[0])
            changed = True
    return changed


def _candidate(instr: HloInstruction, opcode: str) -> bool:
    return (instr.opcode == opcode and len(instr.operands) == 1 and instr.shape.is_array
            and instr.operands[0].shape.is_array and not instr.control_predecessors
            and not instr.control_successors)


def _groups(comp: HloComputation, opcode: str, key: KeyFn, threshold_bytes: int,
            threshold_count: int) -> list[list[HloInstruction]]:
    """Groups of two or more independent candidates, in post order; each candidate's ancestors
    among the candidates are a bit mask (bit i: the i-th candidate seen)."""
    ancestors: dict[int, int] = {}
    bit: dict[int, int] = {}
    open_groups: dict[Hashable, tuple[list[HloInstruction], int, int]] = {}  # key -> (members, mask, bytes)
    done: list[list[HloInstruction]] = []
    for instr in comp.post_order():
        mask = 0
        for op in instr.operands:
            mask |= ancestors.get(id(op), 0) | bit.get(id(op), 0)
        ancestors[id(instr)] = mask
        if not _candidate(instr, opcode):
            continue
        k = key(instr)
        if k is None:
            continue
        bit[id(instr)] = 1 << len(bit)
        size = instr.operands[0].shape.byte_size()
        members, members_mask, total = open_groups.get(k, ([], 0, 0))
        if members and (mask & members_mask or total + size > threshold_bytes
                        or len(members) >= threshold_count):
            done.append(members)
            members, members_mask, total = [], 0, 0
        open_groups[k] = (members + [instr], members_mask | bit[id(instr)], total + size)
    done.extend(members for members, _, _ in open_groups.values())
    return [g for g in done if len(g) > 1]


def _combine(comp: HloComputation, group: list[HloInstruction]) -> None:
    """One collective over the group's operands (the first member's attributes, as XLA takes
    them), its tuple result read back where each member's was."""
    first = group[0]
    shape = Shape.tuple_of([i.shape for i in group])
    combined = comp.add_new_instruction(first.opcode, [i.operands[0] for i in group], shape,
                                        dict(first.attrs))
    for k, instr in enumerate(group):
        gte = comp.add_new_instruction("get-tuple-element", [combined], instr.shape, {"index": k})
        gte.sharding = instr.sharding
        comp.replace_instruction(instr, gte, remove_dead_operands=False)
