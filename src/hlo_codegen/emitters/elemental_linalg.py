"""Elemental rules for `dot` and `convolution`: one output element as a loop over its inputs.

Where it sits: registered in hlo_codegen.elemental's `ELEMENTAL_RULES` when
hlo_codegen.emitters is imported, so the loop emitter (and every other emitter that evaluates
fused operands elementally) can emit fused dots - XLA's `__triton_gemm` fusions, dots cuBLAS
cannot take - and convolutions, with their prologues and epilogues. XLA's
`elemental_hlo_to_mlir.cc` (EmitDotLoop, EmitConvolution) plays the same role. These are the
simple, correct kernels the codegen issue asks for; tiled GEMM/convolution emitters replace them
later.

Semantics follow the interpreter (hlo_common.interpreter.linalg / convolution): operands are
converted to the result element type first, then products are accumulated - narrow floats in
f32 (rounded once at the end), integers wrapping in the result type (exact modulo 2^bits, so
the order does not matter), pred as OR of ANDs, complex as complex. The contracted elements are
visited in row-major order.

    out[b, m, n] = sum_k lhs[b, m, k] * rhs[b, k, n]      (dot: a loop over k)
    out[n, o, x] = sum_{c, k} in[n', g*I + c, (x*stride + k*rhs_dilate - pad_lo) / lhs_dilate]
                              * kernel[o, c, k]           (convolution: holes and padding skipped)

The convolution's input position is a loop-map result whose constraints (in bounds, divisible
by the base dilation) skip padding and holes exactly as the interpreter does.
"""

from __future__ import annotations

from hlo_codegen.elemental.convert import convert_value, down, up
from hlo_codegen.elemental.emitter import ElementalError, FunctionContext, elemental
from hlo_codegen.emitters.elemental_window import window_input_map
from hlo_codegen.indexing import IndexingMap, Variable, dim, sym
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.kernel_ir.ir import Value
from hlo_codegen.kernel_ir.types import ir_type
from hlo_common.hlo.attributes import ConvDimensionNumbers, Window
from hlo_common.hlo.dtypes import PrimitiveType
from hlo_common.hlo.ir import HloInstruction


# -- accumulation ------------------------------------------------------------------------------------
def accumulator_type(pt: PrimitiveType) -> str:
    """IR type in which sums of products of result type `pt` are accumulated."""
    if pt.is_low_precision_float:
        return "f32"
    return ir_type(pt.name)


def zero(ctx: FunctionContext, pt: PrimitiveType) -> Value:
    t = accumulator_type(pt)
    if pt.is_complex:
        return ctx.b.constant(complex(0, 0), t)
    return ctx.b.constant(0.0 if pt.is_float else 0, t)


def to_accumulator(ctx: FunctionContext, v: Value, src: PrimitiveType, result: PrimitiveType) -> Value:
    """An operand element converted to the result type (as XLA does first), then widened."""
    return up(ctx, convert_value(ctx, v, src, result), result)


def multiply_add(ctx: FunctionContext, acc: Value, a: Value, x: Value, pt: PrimitiveType) -> Value:
    b = ctx.b
    if pt.is_pred:
        return b.binary("ori", acc, b.binary("andi", a, x))
    if pt.is_complex:
        return b.op("complex.add", [acc, b.op("complex.mul", [a, x], [a.type]).result], [acc.type]).result
    if pt.is_float:
        return b.binary("addf", acc, b.binary("mulf", a, x))
    return b.binary("addi", acc, b.binary("muli", a, x))


def finish(ctx: FunctionContext, acc: Value, pt: PrimitiveType) -> Value:
    return down(ctx, acc, pt) if pt.is_float else acc


def _ints(instr: HloInstruction, key: str) -> list[int]:
    return [int(v) for v in (instr.attrs.get(key) or ())]


def symbol_loop_map(sizes: list[int], dim_sizes: list[int] = ()) -> IndexingMap:
    """(d...)[s...] -> (s...): a loop over `sizes` (row-major), given dims of `dim_sizes`."""
    return IndexingMap([sym(k) for k in range(len(sizes))],
                       [Variable(Interval(0, n - 1)) for n in dim_sizes],
                       [Variable(Interval(0, n - 1)) for n in sizes])


# -- dot ---------------------------------------------------------------------------------------------
class DotDims:
    """A dot's batch / contracting / free dimensions; output dims are batch, lhs free, rhs free.
    `rhs_skip` leaves rhs dims out of every group (ragged-dot's rhs group dim)."""

    def __init__(self, instr: HloInstruction, rhs_skip: tuple[int, ...] = ()):
        self.lb, self.rb = _ints(instr, "lhs_batch_dims"), _ints(instr, "rhs_batch_dims")
        self.lc, self.rc = _ints(instr, "lhs_contracting_dims"), _ints(instr, "rhs_contracting_dims")
        if len(self.lb) != len(self.rb) or len(self.lc) != len(self.rc):
            raise ElementalError(f"%{instr.name}: batch/contracting dimension counts differ")
        self.lhs_rank, self.rhs_rank = instr.operands[0].shape.rank, instr.operands[1].shape.rank
        self.lhs_free = [d for d in range(self.lhs_rank) if d not in self.lb and d not in self.lc]
        self.rhs_free = [d for d in range(self.rhs_rank)
                         if d not in self.rb and d not in self.rc and d not in rhs_skip]
        self.sizes = [instr.operands[0].shape.dims[d] for d in self.lc]

    def indices(self, idx: list[Value], k: list[Value]) -> tuple[list, list]:
        """(lhs index, rhs index) of output element `idx` and contracted position `k`."""
        li, ri = [None] * self.lhs_rank, [None] * self.rhs_rank
        nb, nl = len(self.lb), len(self.lhs_free)
        for j, (dl, dr) in enumerate(zip(self.lb, self.rb)):
            li[dl] = ri[dr] = idx[j]
        for j, d in enumerate(self.lhs_free):
            li[d] = idx[nb + j]
        for j, d in enumerate(self.rhs_free):
            ri[d] = idx[nb + nl + j]
        for j, (dl, dr) in enumerate(zip(self.lc, self.rc)):
            li[dl] = ri[dr] = k[j]
        return li, ri


@elemental("dot")
def _dot(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    lhs, rhs = instr.operands[0], instr.operands[1]
    dims = DotDims(instr)
    pt = instr.shape.element_type

    def body(syms, k, acc):
        li, ri = dims.indices(idx, list(k))
        a = to_accumulator(ctx, ctx.value(lhs, li), lhs.shape.element_type, pt)
        x = to_accumulator(ctx, ctx.value(rhs, ri), rhs.shape.element_type, pt)
        return [multiply_add(ctx, acc[0], a, x, pt)]

    acc = ctx.loop(symbol_loop_map(dims.sizes), [], [zero(ctx, pt)], body)[0]
    return finish(ctx, acc, pt)


# -- convolution -------------------------------------------------------------------------------------
@elemental("convolution")
def _convolution(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    dn = instr.attrs.get("dim_labels")
    if not isinstance(dn, ConvDimensionNumbers):
        raise ElementalError(f"%{instr.name}: convolution without dim_labels")
    window: Window = instr.attrs.get("window") or Window(())
    lhs, rhs = instr.operands[0], instr.operands[1]
    fg = int(instr.attrs.get("feature_group_count", 1) or 1)
    bg = int(instr.attrs.get("batch_group_count", 1) or 1)
    nsp = len(dn.input_spatial)
    if len(window.dims) != nsp:
        raise ElementalError(f"%{instr.name}: window has {len(window.dims)} dims for {nsp} spatial dims")
    in_features = rhs.shape.dims[dn.kernel_input_feature]
    out_features = instr.shape.dims[dn.output_feature]
    oq = out_features // (fg * bg)
    nb = lhs.shape.dims[dn.input_batch] // bg
    b = ctx.b
    of, ob = idx[dn.output_feature], idx[dn.output_batch]
    bgi = dim(0).floordiv(fg * oq)
    groups = IndexingMap([bgi, dim(0).floordiv(oq) % fg, dim(1) + bgi * nb],
                         [Variable(Interval(0, out_features - 1)), Variable(Interval(0, nb - 1))])
    _, g, n = b.apply_indexing(groups, [of, ob]) if (fg > 1 or bg > 1) else (None, b.index(0), ob)
    kernel_sizes = [rhs.shape.dims[d] for d in dn.kernel_spatial]
    m = window_input_map(window, [instr.shape.dims[d] for d in dn.output_spatial], kernel_sizes,
                       [lhs.shape.dims[d] for d in dn.input_spatial], in_features)
    pt = instr.shape.element_type
    feature_base = b.binary("muli", g, b.index(in_features)) if fg > 1 else None

    def body(syms, positions, acc):
        c = syms[nsp]
        li, ri = [None] * lhs.shape.rank, [None] * rhs.shape.rank
        li[dn.input_batch] = n
        li[dn.input_feature] = b.binary("addi", feature_base, c) if feature_base is not None else c
        ri[dn.kernel_input_feature], ri[dn.kernel_output_feature] = c, of
        for i in range(nsp):
            li[dn.input_spatial[i]] = positions[i]
            k = syms[i]
            if window.dims[i].window_reversal:
                k = b.binary("subi", b.index(kernel_sizes[i] - 1), k)
            ri[dn.kernel_spatial[i]] = k
        a = to_accumulator(ctx, ctx.value(lhs, li), lhs.shape.element_type, pt)
        x = to_accumulator(ctx, ctx.value(rhs, ri), rhs.shape.element_type, pt)
        return [multiply_add(ctx, acc[0], a, x, pt)]

    out_spatial = [idx[d] for d in dn.output_spatial]
    acc = ctx.loop(m, out_spatial, [zero(ctx, pt)], body)[0]
    return finish(ctx, acc, pt)
