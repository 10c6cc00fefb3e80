"""Elemental rule for `topk`: output element r of a row is the row's r-th element in stable
(value, then position) order - found by r+1 selection passes, each O(row length).

Where it sits: registered in hlo_codegen.elemental's `ELEMENTAL_RULES` when
hlo_codegen.emitters is imported, so a (wrapped or fused) topk is a loop fusion: one thread per
output element, no shared memory, no races. XLA runs a TopK custom kernel (or sort + slice);
this is the simple, correct form for k small next to the row length.

Order (the interpreter's): `largest=true` sorts descending by value, ties by ascending position;
floats compare by their total-order keys (XLA's TOTALORDER: -NaN < -inf < .. < -0 < +0 < .. <
+inf < +NaN), narrow floats through f32. Pass p picks the best element that sorts after the
pick of pass p-1 (a strict total order on (key, position), so every pass finds a new one).
"""

from __future__ import annotations

from hlo_codegen.elemental.emitter import ElementalError, FunctionContext, elemental
from hlo_codegen.indexing import IndexingMap, Variable, dim, sym
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.kernel_ir.ir import Value
from hlo_codegen.kernel_ir.types import ir_type
from hlo_common.hlo.dtypes import PrimitiveType
from hlo_common.hlo.ir import HloInstruction


def total_order_key(ctx: FunctionContext, v: Value, pt: PrimitiveType) -> tuple[Value, bool]:
    """(integer key, signed) ordered like XLA's total order of `pt` values."""
    b = ctx.b
    if not pt.is_float:
        return v, pt.kind == "signed"
    if pt.is_low_precision_float:
        v = b.cast("extf", v, "f32")
    it, mask = ("i64", 0x7FFFFFFFFFFFFFFF) if v.type == "f64" else ("i32", 0x7FFFFFFF)
    bits = b.cast("bitcast", v, it)
    negative = b.cmpi("slt", bits, b.constant(0, it))
    return b.select(negative, b.binary("xori", bits, b.constant(mask, it)), bits), True


def _better(ctx: FunctionContext, ka: Value, ia: Value, kb: Value, ib: Value, signed: bool,
            largest: bool) -> Value:
    """i1: (ka, ia) comes before (kb, ib) in the output order."""
    b = ctx.b
    pred = ("sgt" if signed else "ugt") if largest else ("slt" if signed else "ult")
    tie = b.binary("andi", b.cmpi("eq", ka, kb), b.cmpi("slt", ia, ib))
    return b.binary("ori", b.cmpi(pred, ka, kb), tie)


@elemental("topk")
def _topk(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> list[Value]:
    x = instr.operands[0]
    pt = x.shape.element_type
    if pt.is_complex or x.shape.rank == 0:
        raise ElementalError(f"%{instr.name}: topk of {x.shape} is not supported")
    k = int(instr.attrs.get("k", 0))
    largest = instr.attrs.get("largest", True) is not False
    n = x.shape.dims[-1]
    b = ctx.b
    rank = idx[:-1]
    true, false = b.constant(1, "i1"), b.constant(0, "i1")

    def key_at(i: Value) -> tuple[Value, bool]:
        return total_order_key(ctx, ctx.value(x, rank + [i]), pt)

    signed = pt.is_float or pt.kind == "signed"
    kt = ("i64" if pt.bits == 64 else "i32") if pt.is_float else ir_type(pt.name)
    passes = IndexingMap([], [Variable(Interval(0, k - 1))], [Variable(Interval(0, k - 1))], (),
                         [(dim(0) - sym(0), Interval(0, k - 1))])
    scan = IndexingMap([sym(0)], (), [Variable(Interval(0, n - 1))])

    def one_pass(_, __, prev):
        prev_key, prev_pos, started = prev

        def visit(syms, pos, best):
            best_key, best_pos, have = best
            key, _ = key_at(pos[0])
            eligible = b.binary("ori", b.binary("xori", started, true),
                                _better(ctx, prev_key, prev_pos, key, pos[0], signed, largest))
            better = b.binary("ori", b.binary("xori", have, true),
                              _better(ctx, key, pos[0], best_key, best_pos, signed, largest))
            take = b.binary("andi", eligible, better)
            return [b.select(take, key, best_key), b.select(take, pos[0], best_pos),
                    b.binary("ori", have, take)]

        best = ctx.loop(scan, [], [b.constant(0, kt), b.index(0), false], visit)
        return [best[0], best[1], true]

    picked = ctx.loop(passes, [idx[-1]], [b.constant(0, kt), b.index(0), false], one_pass)[1]
    value = ctx.value(x, rank + [picked])
    return [value, b.cast("index_cast", picked, "i32")]
