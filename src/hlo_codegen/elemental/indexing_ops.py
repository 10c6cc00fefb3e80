"""Elemental rules for index-only and data-movement opcodes, constants and elemental reductions.

Broadcast, reshape, bitcast, transpose, slice and reverse read their operand at the indices
given by their output-to-input indexing map (hlo_codegen.indexing); pad and concatenate add an
in-bounds test (`if`); dynamic-slice / dynamic-update-slice / gather add runtime start indices,
clamped into bounds as the ops define; iota converts its index; constants are inline scalars or
module globals read at their linear index. A `reduce` outside a reduction hero is a loop over
the reduced dimensions calling the reducer function (XLA's loop emitter does the same).
"""

from __future__ import annotations

import numpy as np

from hlo_codegen.elemental.convert import convert_value, scalar_literal
from hlo_codegen.elemental.emitter import ElementalError, FunctionContext, elemental, leaf_shapes, value_type
from hlo_codegen.indexing import (
    IndexingMap, Variable, compute_output_to_input_indexing, dim, sym,
)
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.op_indexing import is_canonical_gather
from hlo_codegen.kernel_ir.ir import Buffer, Value
from hlo_common.hlo.dtypes import S64
from hlo_common.hlo.ir import HloInstruction


def operand_map(instr: HloInstruction, operand: int = 0) -> IndexingMap:
    maps = compute_output_to_input_indexing(instr).maps(operand)
    if not maps or maps[0].is_undefined:
        raise ElementalError(f"%{instr.name} ({instr.opcode}) has no output-to-input indexing")
    return maps[0]


@elemental("broadcast", "reshape", "transpose", "slice", "reverse", "bitcast")
def _index_only(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    src = instr.operands[0].shape.element_type
    value = ctx.operand(instr, 0, ctx.apply(operand_map(instr), idx))
    dst = instr.shape.element_type
    if src is not dst:  # a bitcast that also reinterprets the element type
        if src.bits != dst.bits:
            raise ElementalError(f"%{instr.name}: bitcast between {src.name} and {dst.name}")
        return ctx.b.cast("bitcast", value, value_type(instr.shape))
    return value


def domain_condition(ctx: FunctionContext, m: IndexingMap, out_dims, idx: list[Value]) -> Value | None:
    """i1: the indices lie in `m`'s domain (bounds narrower than the output, and constraints)."""
    b = ctx.b
    conds = []
    for i, (var, n) in enumerate(zip(m.dim_vars, out_dims)):
        if var.bounds.lower > 0:
            conds.append(b.cmpi("sge", idx[i], b.index(var.bounds.lower)))
        if var.bounds.upper < n - 1:
            conds.append(b.cmpi("sle", idx[i], b.index(var.bounds.upper)))
    for expr, interval in sorted(m.constraints.items(), key=lambda kv: str(kv[0])):
        value = b.apply_indexing(IndexingMap([expr], m.dim_vars), idx)[0]
        conds.append(b.cmpi("sge", value, b.index(interval.lower)))
        conds.append(b.cmpi("sle", value, b.index(interval.upper)))
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = b.binary("andi", out, c)
    return out


@elemental("pad")
def _pad(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    m = operand_map(instr, 0)
    pad_value = ctx.operand(instr, 1, [])
    if m.is_known_empty:
        return pad_value
    cond = domain_condition(ctx, m, instr.shape.dims, idx)
    inner = IndexingMap(m.results, [Variable(Interval(0, n - 1)) for n in instr.shape.dims])
    if cond is None:
        return ctx.operand(instr, 0, ctx.apply(inner, idx))
    return ctx.if_(cond, [pad_value.type], lambda: [ctx.operand(instr, 0, ctx.apply(inner, idx))],
                   lambda: [pad_value])[0]


@elemental("concatenate")
def _concatenate(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    axis = instr.attrs["dimensions"][0]
    b = ctx.b
    t = value_type(instr.shape)
    offsets, offset = [], 0
    for op in instr.operands:
        offsets.append(offset)
        offset += op.shape.dims[axis]

    def part(k: int) -> list[Value]:
        shifted = list(idx)
        if offsets[k]:
            domain = [Variable(Interval(0, n - 1)) for n in instr.shape.dims]
            shift = IndexingMap([dim(axis) - offsets[k]], domain)
            shifted[axis] = b.apply_indexing(shift, idx)[0]
        if k == len(instr.operands) - 1:
            return [ctx.operand(instr, k, shifted)]
        cond = b.cmpi("slt", idx[axis], b.index(offsets[k + 1]))
        return ctx.if_(cond, [t], lambda: [ctx.operand(instr, k, shifted)], lambda: part(k + 1))

    return part(0)[0]


@elemental("iota")
def _iota(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    d = int(instr.attrs.get("iota_dimension", 0))
    i = ctx.b.cast("index_cast", idx[d], "i64")
    return convert_value(ctx, i, S64, instr.shape.element_type)


@elemental("constant")
def _constant(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    lit = instr.literal
    if lit is None or instr.literal_unknown:
        raise ElementalError(f"constant %{instr.name} has no values")
    t = value_type(instr.shape)
    arr = np.asarray(lit)
    if arr.size == 1 or instr.shape.rank == 0:
        return ctx.b.constant(scalar_literal(instr, arr.reshape(-1)[0]), t)
    name = _constant_buffer(ctx, instr, arr)
    return ctx.b.load(name, ctx.linear_index(instr.shape, idx), t)


def _constant_buffer(ctx: FunctionContext, instr: HloInstruction, arr: np.ndarray) -> str:
    kernel = ctx.kernel
    cache = kernel.__dict__.setdefault("_constant_buffers", {})
    name = cache.get(id(instr))
    if name is None:
        phys = np.transpose(arr, list(reversed(instr.shape.minor_to_major))) if arr.ndim > 1 else arr
        name = f"cst{len(cache)}"
        kernel.buffers.append(Buffer(name, "global", instr.shape.element_type.name, arr.size,
                                     data=np.ascontiguousarray(phys).reshape(-1)))
        cache[id(instr)] = name
    return name


def _start_index(ctx: FunctionContext, instr: HloInstruction, operand: int, upper: int) -> Value:
    """A runtime start index clamped into [0, upper], as an index value."""
    b = ctx.b
    raw = ctx.operand(instr, operand, [])
    pt = instr.operands[operand].shape.element_type
    i = b.cast("index_cast" if pt.kind == "signed" else "index_castui", raw, "index")
    return b.binary("minsi", b.binary("maxsi", i, b.index(0)), b.index(max(upper, 0)))


@elemental("dynamic-slice")
def _dynamic_slice(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    operand = instr.operands[0].shape
    if len(instr.operands) - 1 != operand.rank or any(o.shape.rank for o in instr.operands[1:]):
        raise ElementalError(f"%{instr.name}: dynamic-slice needs one scalar start index per dimension")
    b = ctx.b
    src = [b.binary("addi", i, _start_index(ctx, instr, 1 + k, operand.dims[k] - instr.shape.dims[k]))
           for k, i in enumerate(idx)]
    return ctx.operand(instr, 0, src)


@elemental("dynamic-update-slice")
def _dynamic_update_slice(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    out, upd = instr.shape, instr.operands[1].shape
    b = ctx.b
    starts = [_start_index(ctx, instr, 2 + k, out.dims[k] - upd.dims[k]) for k in range(out.rank)]
    inside, shifted = None, []
    for k, (i, s) in enumerate(zip(idx, starts)):
        rel = b.binary("subi", i, s)
        shifted.append(rel)
        if upd.dims[k] == out.dims[k]:
            continue
        ok = b.binary("andi", b.cmpi("sge", rel, b.index(0)), b.cmpi("slt", rel, b.index(upd.dims[k])))
        inside = ok if inside is None else b.binary("andi", inside, ok)
    if inside is None:
        return ctx.operand(instr, 1, shifted)
    t = value_type(out)
    return ctx.if_(inside, [t], lambda: [ctx.operand(instr, 1, shifted)],
                   lambda: [ctx.operand(instr, 0, idx)])[0]


def _is_simplified_gather(instr: HloInstruction) -> bool:
    """GatherSimplifier's form: s*[N, k] indices on dim 1, no collapsed or batching dims, offset
    dims 1..rank (start_index_map may be in any order)."""
    a = instr.attrs
    return (instr.operands[1].shape.rank == 2 and a.get("index_vector_dim") == 1
            and not a.get("collapsed_slice_dims") and not a.get("operand_batching_dims")
            and tuple(a.get("offset_dims", ())) == tuple(range(1, instr.operands[0].shape.rank + 1)))


@elemental("gather")
def _gather(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    if not (is_canonical_gather(instr) or _is_simplified_gather(instr)):
        raise ElementalError(f"%{instr.name}: only canonical gathers are supported (run gather-simplifier)")
    operand, indices = instr.operands[0].shape, instr.operands[1]
    start_index_map = list(instr.attrs["start_index_map"])
    sizes = list(instr.attrs["slice_sizes"])
    b = ctx.b
    src = []
    for j in range(operand.rank):
        offset = idx[1 + j]
        if j in start_index_map:
            raw = ctx.value(indices, [idx[0], b.index(start_index_map.index(j))])
            pt = indices.shape.element_type
            start = b.cast("index_cast" if pt.kind == "signed" else "index_castui", raw, "index")
            upper = b.index(operand.dims[j] - sizes[j])
            start = b.binary("minsi", b.binary("maxsi", start, b.index(0)), upper)
            offset = b.binary("addi", offset, start)
        src.append(offset)
    return ctx.operand(instr, 0, src)


@elemental("tuple")
def _tuple(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> list[Value]:
    if instr is not instr.parent.root:
        raise ElementalError(f"%{instr.name}: tuples are only supported as the fusion root")
    first = leaf_shapes(instr.shape)[0]
    out: list[Value] = []
    for op in instr.operands:
        if op.opcode == "tuple":
            raise ElementalError(f"%{instr.name}: nested tuple instructions are not supported")
        if leaf_shapes(op.shape)[0].num_elements != first.num_elements:  # no bitcast between them
            raise ElementalError(f"%{instr.name}: %{op.name} has {leaf_shapes(op.shape)[0]}, not the "
                                 f"{first.num_elements} elements of the first output, so no index reaches it")
        out.extend(ctx.emit(op, ctx.reindex(first, leaf_shapes(op.shape)[0], idx)))
    return out


@elemental("get-tuple-element")
def _get_tuple_element(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    values = ctx.emit(instr.operands[0], idx)
    return values[int(instr.attrs["index"])]


@elemental("reduce")
def _reduce(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> list[Value]:
    n = len(instr.operands) // 2
    in_shape = instr.operands[0].shape
    reduced = sorted(instr.attrs["dimensions"])
    reducer = ctx.emitter.scalar_function(instr.attrs["to_apply"])
    inits = [ctx.operand(instr, n + k, []) for k in range(n)]
    sizes = [in_shape.dims[d] for d in reduced]
    window = IndexingMap([sym(k) for k in range(len(sizes))], (),
                         [Variable(Interval(0, s - 1)) for s in sizes])

    def body(syms, positions, acc):
        it = iter(idx)
        in_idx = [positions[reduced.index(d)] if d in reduced else next(it) for d in range(in_shape.rank)]
        vals = [ctx.operand(instr, k, in_idx) for k in range(n)]
        return ctx.b.call(reducer, list(acc) + vals)

    return ctx.loop(window, [], inits, body)
