"""Elemental rules for the dot variants: `scaled-dot` (block-scaled operands) and `ragged-dot`
(an lhs dimension cut into groups), one output element as a loop over its contraction.

Where it sits: registered in hlo_codegen.elemental's `ELEMENTAL_RULES` when hlo_codegen.emitters
is imported, next to the plain dot of elemental_linalg.py (whose `DotDims` they share). XLA
lowers these through Triton or decompositions; these are the simple, correct kernels.

Semantics are the interpreter's (hlo_common.interpreter.linalg / ragged_dot):

- scaled-dot: `dot(lhs * lhs_scale, rhs * rhs_scale)`, a scale element covering a block of its
  operand (each scale dim divides the operand dim; a scalar scale covers everything); products
  with the scales are taken in the accumulation type (f32 for narrow floats), then accumulated.
- ragged-dot, by where `lhs_ragged_dims` lies: a non-contracting dim (each position uses the rhs
  slice of each group containing it; positions past the last group give 0), a contracting dim (the
  result gets a leading group dim; group g contracts only its positions) or a batch dim (a plain
  dot). Group g spans [sum of sizes before g, that + size g) along the ragged dim; the group-size
  row is picked by the batch dims and the same-kind dims before the ragged one.
"""

from __future__ import annotations

from hlo_codegen.elemental.convert import convert_value, up
from hlo_codegen.elemental.emitter import ElementalError, FunctionContext, elemental
from hlo_codegen.emitters.elemental_linalg import (
    DotDims, finish, multiply_add, symbol_loop_map, to_accumulator, zero,
)
from hlo_codegen.kernel_ir.ir import Value
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.hlo.ir import HloInstruction


def _widened(ctx: FunctionContext, v: Value, src: PrimitiveType, result: PrimitiveType) -> Value:
    """A scaled-dot operand or scale in the accumulation type (f32 / f64 for float results; the
    interpreter does not round it to the result type first, unlike dot)."""
    if result.is_float:
        wide = PRIMITIVE_TYPES["f64" if result.bits == 64 else "f32"]
        return up(ctx, convert_value(ctx, v, src, wide), result)
    return to_accumulator(ctx, v, src, result)


def _scaled(ctx: FunctionContext, instr: HloInstruction, k: int, idx: list[Value]) -> Value:
    """Operand k (0 lhs, 1 rhs) at idx times its block scale, in the accumulation type."""
    pt = instr.shape.element_type
    x = instr.operands[k]
    v = _widened(ctx, ctx.value(x, idx), x.shape.element_type, pt)
    if len(instr.operands) <= 2 + k:
        return v
    scale = instr.operands[2 + k]
    b = ctx.b
    at = [i if s == n else b.binary("divsi", i, b.index(n // s))
          for i, s, n in zip(idx, scale.shape.dims, x.shape.dims)] if scale.shape.rank else []
    s = _widened(ctx, ctx.value(scale, at), scale.shape.element_type, pt)
    return b.binary("mulf", v, s) if pt.is_float else b.binary("muli", v, s)


@elemental("scaled-dot")
def _scaled_dot(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    dims = DotDims(instr)
    pt = instr.shape.element_type

    def body(syms, k, acc):
        li, ri = dims.indices(idx, list(k))
        return [multiply_add(ctx, acc[0], _scaled(ctx, instr, 0, li), _scaled(ctx, instr, 1, ri), pt)]

    acc = ctx.loop(symbol_loop_map(dims.sizes), [], [zero(ctx, pt)], body)[0]
    return finish(ctx, acc, pt)


# -- ragged-dot --------------------------------------------------------------------------------------
def _ragged_mode(instr: HloInstruction) -> tuple[str, int, list[int]]:
    """(mode, ragged lhs dim, lhs dims that pick the group-size row)."""
    ragged = [int(d) for d in instr.attrs.get("lhs_ragged_dims") or ()]
    if len(ragged) != 1:
        raise ElementalError(f"%{instr.name}: ragged-dot needs exactly one lhs ragged dimension")
    r = ragged[0]
    lb = [int(d) for d in instr.attrs.get("lhs_batch_dims") or ()]
    lc = [int(d) for d in instr.attrs.get("lhs_contracting_dims") or ()]
    if r in lc:
        return "contracting", r, lb + [d for d in lc if d < r]
    if r in lb:
        return "batch", r, [d for d in lb if d < r]
    free = [d for d in range(instr.operands[0].shape.rank) if d not in lb and d not in lc]
    return "non-contracting", r, lb + [d for d in free if d < r]


def _group_size(ctx: FunctionContext, sizes_op: HloInstruction, row: list[Value], g: Value) -> Value:
    """group_sizes[row..., g] as i64."""
    size = ctx.value(sizes_op, (row if sizes_op.shape.rank > 1 else []) + [g])
    if size.type != "i64":
        size = ctx.b.cast("extsi" if sizes_op.shape.element_type.kind == "signed" else "extui", size, "i64")
    return size


def _in_group(ctx: FunctionContext, sizes_op: HloInstruction, row: list[Value], pos: Value,
              group: Value) -> Value:
    """i1: pos lies in [start, end) of `group` (start the sum of the sizes before it)."""
    b = ctx.b

    def body(syms, g, state):
        end, inside = state
        new_end = b.binary("addi", end, _group_size(ctx, sizes_op, row, g[0]))
        here = b.binary("andi", b.cmpi("sge", pos, end), b.cmpi("slt", pos, new_end))
        return [new_end, b.binary("ori", inside, b.binary("andi", here, b.cmpi("eq", g[0], group)))]

    init = [b.constant(0, "i64"), b.constant(0, "i1")]
    return ctx.loop(symbol_loop_map([sizes_op.shape.dims[-1]]), [], init, body)[1]


def _ragged_non_contracting(ctx: FunctionContext, instr: HloInstruction, dims: DotDims, idx: list[Value],
                            row_dims: list[int], r: int, gdim: int) -> Value:
    """Sum over the groups whose [start, end) holds the output's ragged position of its dot with that
    group's rhs slice. With valid sizes one group at most holds it; with negative sizes groups may
    overlap, and each one that holds it adds its product (the interpreter's and jax's masks)."""
    lhs, rhs, sizes_op = instr.operands
    pt = instr.shape.element_type
    b = ctx.b
    li0, _ = dims.indices(idx, [b.index(0)] * len(dims.lc))
    row = [li0[d] for d in row_dims]
    pos = b.cast("index_cast", li0[r], "i64")
    last = b.index(rhs.shape.dims[gdim] - 1)

    def group_body(syms, g, state):
        end, acc = state
        new_end = b.binary("addi", end, _group_size(ctx, sizes_op, row, g[0]))
        inside = b.binary("andi", b.cmpi("sge", pos, end), b.cmpi("slt", pos, new_end))

        def dot_body(syms2, k, dot_acc):
            li, ri = dims.indices(idx, list(k))
            ri[gdim] = b.binary("minsi", g[0], last)
            a = to_accumulator(ctx, ctx.value(lhs, li), lhs.shape.element_type, pt)
            x = to_accumulator(ctx, ctx.value(rhs, ri), rhs.shape.element_type, pt)
            return [multiply_add(ctx, dot_acc[0], a, x, pt)]

        part = ctx.loop(symbol_loop_map(dims.sizes), [], [acc], dot_body)[0]
        return [new_end, b.select(inside, part, acc)]

    init = [b.constant(0, "i64"), zero(ctx, pt)]
    return ctx.loop(symbol_loop_map([sizes_op.shape.dims[-1]]), [], init, group_body)[1]


@elemental("ragged-dot")
def _ragged_dot(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    lhs, rhs, sizes_op = instr.operands[0], instr.operands[1], instr.operands[2]
    mode, r, row_dims = _ragged_mode(instr)
    gdims = [int(d) for d in instr.attrs.get("rhs_group_dims") or ()]
    pt = instr.shape.element_type
    b = ctx.b
    if mode == "non-contracting" and len(gdims) != 1:
        raise ElementalError(f"%{instr.name}: the ragged non-contracting mode needs one rhs group dim")
    dims = DotDims(instr, tuple(gdims))
    if mode == "non-contracting":
        return finish(ctx, _ragged_non_contracting(ctx, instr, dims, idx, row_dims, r, gdims[0]), pt)
    group = idx[0] if mode == "contracting" else None
    out_idx = idx[1:] if mode == "contracting" else idx

    def body(syms, k, acc):
        li, ri = dims.indices(out_idx, list(k))
        a = to_accumulator(ctx, ctx.value(lhs, li), lhs.shape.element_type, pt)
        x = to_accumulator(ctx, ctx.value(rhs, ri), rhs.shape.element_type, pt)
        new = multiply_add(ctx, acc[0], a, x, pt)
        if mode == "contracting":
            pos = b.cast("index_cast", li[r], "i64")
            inside = _in_group(ctx, sizes_op, [li[d] for d in row_dims], pos, group)
            new = b.select(inside, new, acc[0])
        return [new]

    acc = ctx.loop(symbol_loop_map(dims.sizes), [], [zero(ctx, pt)], body)[0]
    return finish(ctx, acc, pt)
