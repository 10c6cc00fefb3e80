"""Shape rules of the collectives: all-reduce, all-gather, reduce-scatter, all-to-all,
collective-permute, collective-broadcast, ragged-all-to-all, their start/done halves, and the
replica/partition ids.

Where a result depends on the size of a replica group (all-gather, reduce-scatter, all-to-all),
the size comes from `replica_groups` (explicit `{{0,1},{2,3}}` or iota `[2,2]<=[4]` form) or, when
the groups are empty, from the module's replica_count / num_partitions, following XLA's group
modes; a written shape is also accepted when it is consistent with the operands.
"""

from __future__ import annotations

import re

from hlo_common.hlo.shape_inference._base import (
    U32, InferenceContext, expect_array, fail, describe, like, make, need_declared, one_dimension,
    operand_shape, rule, tuple_of,
)

_IOTA_RE = re.compile(r"\[(\d+),(\d+)\]<=")


def group_sizes(instr) -> list[int]:
    """The size of every replica group ([] when the groups are empty, meaning one big group).

    Accepts the typed `ReplicaGroups` value (its `groups()`) and, for IR built from raw text, the
    explicit `{{0,1},{2,3}}` and iota `[G,S]<=[...]` spellings.
    """
    raw = instr.attrs.get("replica_groups")
    if raw is None:
        return []
    if callable(getattr(raw, "groups", None)):
        return [len(g) for g in raw.groups()]
    text = str(raw).strip()
    m = _IOTA_RE.match(text)
    if m:
        return [int(m.group(2))] * int(m.group(1))
    if not text.startswith("{"):
        fail(f"replica_groups={text}, expected {{{{...}},...}} or [groups,size]<=[...]")
    return [len([x for x in g.split(",") if x.strip()]) for g in re.findall(r"\{([^{}]*)\}", text[1:-1])]


def group_size(instr, ctx: InferenceContext, flattened_allowed: bool = True) -> int:
    """Participants per group, as XLA's GetSubgroupSize (1 when the module does not say)."""
    sizes = group_sizes(instr)
    if sizes:
        return sizes[0]
    if "channel_id" not in instr.attrs:
        return ctx.replica_count
    if instr.attrs.get("use_global_device_ids") is None and not flattened_allowed:
        return ctx.num_partitions
    return ctx.replica_count * ctx.num_partitions


def _arrays(instr, what: str) -> list:
    if not instr.operands:
        fail(f"{what} has no operands, expected at least one")
    return [operand_shape(instr, i, f"operand {i} of {what}") for i in range(len(instr.operands))]


def _single_or_tuple(shapes):
    return like(shapes[0]) if len(shapes) == 1 else tuple_of(shapes)


@rule("all-reduce", "all-reduce-start", "collective-broadcast")
def _all_reduce(instr, ctx):
    return _single_or_tuple(_arrays(instr, instr.opcode))


@rule("all-reduce-done")
def _all_reduce_done(instr, ctx):
    return like(operand_shape(instr, 0))


def _declared_output(instr, index: int):
    """Array `index` of the written all-gather / reduce-scatter result, when written."""
    out = instr.shape
    if out is None:
        return None
    if instr.opcode == "all-gather-start":
        out = out.tuple_shapes[1] if out.is_tuple and len(out.tuple_shapes) > 1 else None
    if out is not None and out.is_tuple:
        out = out.tuple_shapes[index] if index < len(out.tuple_shapes) else None
    return out if out is not None and out.is_array else None


def _shard_count(instr, ctx, shapes, d: int, gather: bool) -> int:
    size = group_size(instr, ctx)
    declared = _declared_output(instr, 0)
    if declared is None or d >= declared.rank:
        if size == 1 and declared is None and instr.shape is None:
            need_declared(instr, "the replica group size is unknown")
        return size
    num, den = (declared.dims[d], shapes[0].dims[d]) if gather else (shapes[0].dims[d], declared.dims[d])
    shards = -(-num // den) if den else 1
    if size != 1 and shards != size:
        fail(f"result dimension {d} implies {shards} shards, expected the replica group size {size}")
    return shards


@rule("all-gather", "all-gather-start")
def _all_gather(instr, ctx):
    shapes = _arrays(instr, instr.opcode)
    d = one_dimension(instr)
    for i, s in enumerate(shapes):
        if not 0 <= d < s.rank:
            fail(f"dimensions={{{d}}} is out of range for operand {i} {describe(s)}, expected [0, {s.rank})")
    shards = _shard_count(instr, ctx, shapes, d, gather=True)
    outs = [make(s.element_type, [n * shards if k == d else n for k, n in enumerate(s.dims)]) for s in shapes]
    result = _single_or_tuple(outs)
    if instr.opcode == "all-gather-start":
        return tuple_of([_single_or_tuple(shapes), result])
    return result


@rule("all-gather-done", "collective-permute-done")
def _second_of_start(instr, ctx):
    s = operand_shape(instr, 0)
    if not s.is_tuple or len(s.tuple_shapes) < 2:
        fail(f"operand is {describe(s)}, expected the (input, output) tuple of the start op")
    return like(s.tuple_shapes[1])


@rule("reduce-scatter")
def _reduce_scatter(instr, ctx):
    shapes = _arrays(instr, "reduce-scatter")
    d = one_dimension(instr)
    for i, s in enumerate(shapes):
        if not 0 <= d < s.rank:
            fail(f"dimensions={{{d}}} is out of range for operand {i} {describe(s)}, expected [0, {s.rank})")
    shards = _shard_count(instr, ctx, shapes, d, gather=False)
    outs = []
    for i, s in enumerate(shapes):
        if s.dims[d] % shards:
            fail(f"operand {i} dimension {d} is {s.dims[d]}, expected a multiple of the {shards} shards")
        outs.append(make(s.element_type, [n // shards if k == d else n for k, n in enumerate(s.dims)]))
    return _single_or_tuple(outs)


@rule("all-to-all")
def _all_to_all(instr, ctx):
    shapes = _arrays(instr, "all-to-all")
    dims = instr.attrs.get("dimensions")
    sizes = group_sizes(instr)
    if dims is not None:
        if len(shapes) != 1:
            fail(f"an array all-to-all (dimensions=...) has {len(shapes)} operands, expected 1")
        d = one_dimension(instr)
        s = shapes[0]
        if not 0 <= d < s.rank:
            fail(f"dimensions={{{d}}} is out of range for {describe(s)}, expected [0, {s.rank})")
        split = group_size(instr, ctx, flattened_allowed=False)
        if split and s.dims[d] % split:
            fail(f"split dimension {d} is {s.dims[d]}, expected a multiple of the group size {split}")
        return like(s)
    if sizes and len(shapes) != sizes[0]:
        fail(f"a tuple all-to-all has {len(shapes)} operands, expected {sizes[0]} (the group size)")
    for i, s in enumerate(shapes):
        if not s.compatible(shapes[0]):
            fail(f"operand {i} is {describe(s)}, expected {describe(shapes[0])} like operand 0")
    return tuple_of(shapes)


def _permute_shapes(instr):
    ops = [op.shape for op in instr.operands]
    if not ops:
        fail(f"{instr.opcode} has no operands, expected at least one")
    inplace = len(ops) == 4 and ops[2].is_tuple
    return ops, inplace


@rule("collective-permute")
def _collective_permute(instr, ctx):
    ops, inplace = _permute_shapes(instr)
    if inplace:
        return like(ops[1])
    for i, s in enumerate(ops):
        expect_array(s, f"operand {i} of collective-permute")
    return _single_or_tuple(ops)


@rule("collective-permute-start")
def _collective_permute_start(instr, ctx):
    ops, inplace = _permute_shapes(instr)
    src, dst = (ops[0], ops[1]) if inplace else (_single_or_tuple(ops),) * 2
    extras = []
    if instr.shape is not None and instr.shape.is_tuple:
        extras = list(instr.shape.tuple_shapes[2:])
    return tuple_of([src, dst, *extras])


@rule("ragged-all-to-all")
def _ragged_all_to_all(instr, ctx):
    if len(instr.operands) != 6:
        fail(f"ragged-all-to-all has {len(instr.operands)} operands, expected 6")
    data = operand_shape(instr, 0, "the input of ragged-all-to-all")
    out = operand_shape(instr, 1, "the output buffer of ragged-all-to-all")
    if data.element_type is not out.element_type or data.dims[1:] != out.dims[1:]:
        fail(f"input {describe(data)} and output buffer {describe(out)} differ beyond their first dimension, "
             "expected the same element type and minor dimensions")
    for i in range(2, 6):
        s = operand_shape(instr, i, f"offset/size operand {i}")
        if not s.element_type.is_integer:
            fail(f"operand {i} is {describe(s)}, expected an integral array")
    return like(out)


@rule("replica-id", "partition-id")
def _device_id(instr, ctx):
    return make(U32, ())
