"""Elemental rules for the windowed and gathering ops: reduce-window, select-and-scatter, and
gather in its general form.

Where it sits: registered in hlo_codegen.elemental's `ELEMENTAL_RULES` when
hlo_codegen.emitters is imported, so the loop emitter emits these ops (fused with prologues and
epilogues) one output element at a time, as XLA's elemental emitter does for reduce-window.
Semantics are the interpreter's (hlo_common.interpreter.window / gather_scatter).

- reduce-window: a loop over the window offsets (row-major) whose map yields the input position
  `(out*stride + k*rhs_dilate - pad_lo) / lhs_dilate`, constrained to real input elements, so
  padding and holes are skipped exactly as the interpreter skips them; the reducer folds in.
- select-and-scatter, in "pull" form (no races, deterministic): output element `o` loops over
  the windows that contain it, in source row-major order; for each it redoes the window's
  selection (first valid element, replaced by a later one unless `select(selected, current)`)
  and, when `o` was selected, folds `scatter(acc, source[window])` into its value, starting from
  the init value. Each element thus sees its scatters in the interpreter's order.
- gather: any gather (batching dims, collapsed dims, index_vector_dim anywhere); starts are
  clamped so the slice stays inside the operand. Canonical gathers keep the elemental
  emitter's own rule.
"""

from __future__ import annotations

from hlo_codegen.elemental import ELEMENTAL_RULES
from hlo_codegen.elemental.convert import down, up
from hlo_codegen.elemental.emitter import ElementalError, FunctionContext, elemental
from hlo_codegen.indexing import IndexingMap, Variable, dim, sym
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.op_indexing import is_canonical_gather
from hlo_codegen.kernel_ir.ir import Value
from hlo_common.hlo.attributes import Window
from hlo_common.interpreter.reducers import classify_reducer
from hlo_common.hlo.ir import HloInstruction


def window_input_map(window: Window, out_sizes: list[int], kernel_sizes: list[int], in_sizes: list[int],
                     num_features: int = 0) -> IndexingMap:
    """(out...)[k..., c] -> (input..., c): the input element window offset k reads, constrained to
    real (not padding, not hole) input positions. Offsets are the outer symbols, row-major (the
    interpreter's order); `num_features` > 0 adds a feature symbol `c` last (convolution).
    Window reversal is the caller's business (it flips the kernel index, not the input's)."""
    results, constraints = [], []
    for i, wd in enumerate(window.dims):
        padded = dim(i) * wd.stride + sym(i) * wd.window_dilation - wd.padding_low
        bd = wd.base_dilation
        results.append(padded.floordiv(bd) if bd > 1 else padded)
        constraints.append((padded, Interval(0, (in_sizes[i] - 1) * bd)))
        if bd > 1:
            constraints.append((padded % bd, Interval(0, 0)))
    syms = [Variable(Interval(0, n - 1)) for n in kernel_sizes]
    if num_features:
        results.append(sym(len(kernel_sizes)))
        syms.append(Variable(Interval(0, num_features - 1)))
    return IndexingMap(results, [Variable(Interval(0, n - 1)) for n in out_sizes], syms, (), constraints)


def _window(instr: HloInstruction, rank: int) -> Window:
    window: Window = instr.attrs.get("window") or Window(())
    if len(window.dims) != rank:
        raise ElementalError(f"%{instr.name}: window has {len(window.dims)} dims for rank {rank}")
    return window


@elemental("reduce-window")
def _reduce_window(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> list[Value]:
    n = len(instr.operands) // 2
    in_shape = instr.operands[0].shape
    window = _window(instr, in_shape.rank)
    comp = instr.attrs["to_apply"]
    inits = [ctx.operand(instr, n + k, []) for k in range(n)]
    out_dims = list(instr.shape.tuple_shapes[0].dims if instr.shape.is_tuple else instr.shape.dims)
    m = window_input_map(window, out_dims, [wd.size for wd in window.dims], list(in_shape.dims))
    pt = in_shape.element_type
    kind = classify_reducer(comp) if n == 1 else None
    if kind in ("add", "multiply") and pt.is_low_precision_float:
        # Narrow-float sums and products accumulate in f32 and round once (the interpreter's,
        # and XLA:CPU's, way); per-step rounding drifts over large windows.
        op = "addf" if kind == "add" else "mulf"

        def wide_body(syms, positions, acc):
            return [ctx.b.binary(op, acc[0], up(ctx, ctx.operand(instr, 0, positions), pt))]

        acc = ctx.loop(m, idx, [up(ctx, inits[0], pt)], wide_body)
        return [down(ctx, acc[0], pt)]
    reducer = ctx.emitter.scalar_function(comp)

    def body(syms, positions, acc):
        vals = [ctx.operand(instr, k, positions) for k in range(n)]
        return ctx.b.call(reducer, list(acc) + vals)

    return ctx.loop(m, idx, inits, body)


_elemental_reduce = ELEMENTAL_RULES.get("reduce")


@elemental("reduce")
def _reduce(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> list[Value]:
    """A narrow-float sum or product accumulates in f32 (rounded once, as the interpreter does);
    any other reduce keeps the elemental emitter's own rule."""
    pt = instr.operands[0].shape.element_type
    kind = classify_reducer(instr.attrs["to_apply"]) if len(instr.operands) == 2 else None
    if kind not in ("add", "multiply") or not pt.is_low_precision_float or _elemental_reduce is None:
        return _elemental_reduce(ctx, instr, idx)
    in_shape = instr.operands[0].shape
    reduced = sorted(instr.attrs["dimensions"])
    sizes = [in_shape.dims[d] for d in reduced]
    m = IndexingMap([sym(k) for k in range(len(sizes))], (), [Variable(Interval(0, n - 1)) for n in sizes])
    op = "addf" if kind == "add" else "mulf"

    def body(syms, positions, acc):
        it = iter(idx)
        in_idx = [positions[reduced.index(d)] if d in reduced else next(it) for d in range(in_shape.rank)]
        return [ctx.b.binary(op, acc[0], up(ctx, ctx.operand(instr, 0, in_idx), pt))]

    acc = ctx.loop(m, [], [up(ctx, ctx.operand(instr, 1, []), pt)], body)
    return [down(ctx, acc[0], pt)]


# -- select-and-scatter ------------------------------------------------------------------------------
def covering_windows_map(window: Window, operand_sizes: list[int], source_sizes: list[int]) -> IndexingMap:
    """(o...)[s...] -> (w...): the windows containing operand element o, in row-major window order
    (window offset k = size-1-s, so w grows with s), constrained to existing windows."""
    results, constraints = [], []
    for i, wd in enumerate(window.dims):
        k = (wd.size - 1) - sym(i)
        padded = dim(i) * wd.base_dilation + wd.padding_low - k * wd.window_dilation
        results.append(padded.floordiv(wd.stride) if wd.stride > 1 else padded)
        constraints.append((padded, Interval(0, (source_sizes[i] - 1) * wd.stride)))
        if wd.stride > 1:
            constraints.append((padded % wd.stride, Interval(0, 0)))
    return IndexingMap(results, [Variable(Interval(0, n - 1)) for n in operand_sizes],
                       [Variable(Interval(0, wd.size - 1)) for wd in window.dims], (), constraints)


@elemental("select-and-scatter")
def _select_and_scatter(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    operand, source = instr.operands[0], instr.operands[1]
    shape = operand.shape
    window = _window(instr, shape.rank)
    select = ctx.emitter.scalar_function(instr.attrs["select"])
    scatter = ctx.emitter.scalar_function(instr.attrs["scatter"])
    b = ctx.b
    me = ctx.linear_index(shape, idx)
    sizes = [wd.size for wd in window.dims]
    outer = covering_windows_map(window, list(shape.dims), list(source.shape.dims))

    def selected_position(w: list[Value]) -> Value:
        inner = window_input_map(window, list(source.shape.dims), sizes, list(shape.dims))
        t = ctx.value(operand, idx).type
        init = [b.constant(0, "i1"), b.constant(0.0 if "f" in t else 0, t), b.index(-1)]

        def body(syms, positions, it):
            have, best, pos = it
            cur = ctx.value(operand, positions)
            keep = b.call(select, [best, cur])[0]
            take = b.binary("ori", b.binary("xori", have, b.constant(1, "i1")),
                            b.binary("xori", keep, b.constant(1, "i1")))
            return [b.constant(1, "i1"), b.select(take, cur, best),
                    b.select(take, ctx.linear_index(shape, positions), pos)]

        return ctx.loop(inner, w, init, body)[2]

    def body(syms, w, acc):
        chosen = b.cmpi("eq", selected_position(w), me)
        return ctx.if_(chosen, [acc[0].type], lambda: b.call(scatter, [acc[0], ctx.value(source, w)]),
                       lambda: [acc[0]])

    return ctx.loop(outer, idx, [ctx.operand(instr, 2, [])], body)[0]


# -- gather ------------------------------------------------------------------------------------------
_canonical_gather = ELEMENTAL_RULES.get("gather")


def _ints(instr: HloInstruction, key: str) -> list[int]:
    return [int(v) for v in (instr.attrs.get(key) or ())]


def _as_index(ctx: FunctionContext, v: Value, signed: bool) -> Value:
    return ctx.b.cast("index_cast" if signed else "index_castui", v, "index")


@elemental("gather")
def _gather(ctx: FunctionContext, instr: HloInstruction, idx: list[Value]) -> Value:
    if _canonical_gather is not None and is_canonical_gather(instr):
        return _canonical_gather(ctx, instr, idx)
    operand, indices = instr.operands
    offset_dims = _ints(instr, "offset_dims")
    collapsed = _ints(instr, "collapsed_slice_dims")
    start_index_map = _ints(instr, "start_index_map")
    operand_batching = _ints(instr, "operand_batching_dims")
    indices_batching = _ints(instr, "start_indices_batching_dims")
    sizes = _ints(instr, "slice_sizes")
    ivd = int(instr.attrs.get("index_vector_dim", indices.shape.rank))
    b = ctx.b
    batch_out = [d for d in range(instr.shape.rank) if d not in offset_dims]
    batch_in = [d for d in range(indices.shape.rank) if d != ivd]
    if len(batch_out) != len(batch_in) or len(sizes) != operand.shape.rank:
        raise ElementalError(f"%{instr.name}: gather dimensions do not match its shapes")
    position = dict(zip(batch_in, (idx[d] for d in batch_out)))
    signed = indices.shape.element_type.kind != "unsigned"
    window_dims = [d for d in range(operand.shape.rank) if d not in collapsed and d not in operand_batching]
    src = []
    for d in range(operand.shape.rank):
        if d in start_index_map:
            at = [position[k] if k != ivd else b.index(start_index_map.index(d))
                  for k in range(indices.shape.rank)]
            start = _as_index(ctx, ctx.value(indices, at), signed)
        elif d in operand_batching:
            start = position[indices_batching[operand_batching.index(d)]]
        else:
            start = None
        offset = idx[offset_dims[window_dims.index(d)]] if d in window_dims else None
        if start is not None:
            start = b.binary("minsi", b.binary("maxsi", start, b.index(0)),
                             b.index(max(operand.shape.dims[d] - sizes[d], 0)))
            offset = start if offset is None else b.binary("addi", start, offset)
        src.append(offset if offset is not None else b.index(0))
    return ctx.value(operand, src)
