"""Output-to-input indexing of single HLO instructions (XLA's `ComputeOutputToInputIndexing`).

Where it sits: fusion_indexing.py composes these through fused computations; emitters use them
for index-only ops (transpose, broadcast, slice, pad, ...) in elemental emission. One function
per opcode in `OUTPUT_TO_INPUT` (elementwise opcodes come from the opcode table); each returns,
for every operand, the maps from the instruction's output index to the operand indices it
reads. Ops without a map (unknown opcodes, non-canonical gathers, convolution for now) get
undefined maps, as in XLA; malformed attributes raise `IndexingError`.

    >>> from hlo_common.hlo.parser import parse_module
    >>> m = parse_module("ENTRY e { p = f32[20,40] parameter(0) "
    ...                  "ROOT t = f32[40,20] transpose(p), dimensions={1,0} }")
    >>> str(compute_output_to_input_indexing(m.entry.root).maps(0)[0])
    '(d0, d1) -> (d1, d0), domain: d0 in [0, 39], d1 in [0, 19]'
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from hlo_codegen.indexing.affine import AffineExpr, const, dim, sym
from hlo_codegen.indexing.indexing_map import (
    IndexingMap, Variable, compose_indexing_maps, vars_from_sizes,
)
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.operand_indexing import (
    HloInstructionIndexing, OperandIndexing, RuntimeVarIndexing,
)
from hlo_codegen.indexing.shape_indexing import bitcast_map, inverse_permutation, reshape_map
from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape


class IndexingError(HloError):
    """An instruction whose attributes do not allow computing its indexing (names it)."""


def output_shape(instr: HloInstruction, output_id: int = 0) -> Shape:
    return instr.shape.tuple_shapes[output_id] if instr.shape.is_tuple else instr.shape


def scalar_map(shape: Shape) -> IndexingMap:
    """`(d0, ..) -> ()`: every output element reads the one element of a scalar operand."""
    return IndexingMap.from_tensor_sizes((), shape.dims)


def _attr(instr: HloInstruction, key: str):
    value = instr.attrs.get(key)
    if value is None:
        raise IndexingError(f"%{instr.name} ({instr.opcode}) has no '{key}' attribute")
    return value


# -- elementwise and data movement -------------------------------------------------------------
def _elementwise(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    shape = output_shape(instr, output_id)
    identity = IndexingMap.identity(shape.dims)
    maps = [scalar_map(shape) if op.shape.rank == 0 and shape.rank > 0 else identity
            for op in instr.operands]
    return HloInstructionIndexing.from_maps(maps)


def _broadcast(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    # A scalar operand may omit `dimensions={}`.
    scalar = instr.operands[0].shape.rank == 0
    dims = instr.attrs.get("dimensions", ()) if scalar else _attr(instr, "dimensions")
    return HloInstructionIndexing.from_maps(
        [IndexingMap.from_tensor_sizes([dim(d) for d in dims], instr.shape.dims)])


def _transpose(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    inv = inverse_permutation(_attr(instr, "dimensions"))
    return HloInstructionIndexing.from_maps(
        [IndexingMap.from_tensor_sizes([dim(p) for p in inv], instr.shape.dims)])


def _reshape(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    return HloInstructionIndexing.from_maps(
        [reshape_map(instr.operands[0].shape.dims, instr.shape.dims)])


def _bitcast(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    return HloInstructionIndexing.from_maps([bitcast_map(instr.shape, instr.operands[0].shape)])


def _slice(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    spec = _attr(instr, "slice").dims
    exprs = [dim(i) * stride + start for i, (start, _, stride) in enumerate(spec)]
    return HloInstructionIndexing.from_maps([IndexingMap.from_tensor_sizes(exprs, instr.shape.dims)])


def _reverse(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    rev = set(_attr(instr, "dimensions"))
    exprs = [-dim(i) + (n - 1) if i in rev else dim(i) for i, n in enumerate(instr.shape.dims)]
    return HloInstructionIndexing.from_maps([IndexingMap.from_tensor_sizes(exprs, instr.shape.dims)])


def pad_map(output_dims, padding) -> IndexingMap:
    """Map of the padded operand: domain restricted to the non-padding region; interior padding
    by `(d - low) mod (interior + 1) in [0, 0]` (XLA's ComputePadIndexingMap)."""
    exprs, variables, constraints = [], [], []
    for i, (n, (low, high, interior)) in enumerate(zip(output_dims, padding)):
        variables.append(Variable(Interval(max(0, low), min(n - 1, n - 1 - high))))
        shifted = dim(i) - low
        if interior == 0:
            exprs.append(shifted)
        else:
            exprs.append(shifted.floordiv(interior + 1))
            constraints.append((shifted % (interior + 1), Interval(0, 0)))
    return IndexingMap(exprs, variables, (), (), constraints)


def _pad(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    padding = _attr(instr, "padding").dims
    return HloInstructionIndexing.from_maps(
        [pad_map(instr.shape.dims, padding), scalar_map(instr.shape)])


def _concatenate(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    axis = _attr(instr, "dimensions")[0]
    out = instr.shape.dims
    maps, offset = [], 0
    for op in instr.operands:
        size = op.shape.dims[axis]
        variables = list(vars_from_sizes(out))
        variables[axis] = Variable(Interval(offset, offset + size - 1))
        exprs = [dim(i) - offset if i == axis else dim(i) for i in range(len(out))]
        maps.append(IndexingMap(exprs, variables))
        offset += size
    return HloInstructionIndexing.from_maps(maps)


def _no_operands(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    return HloInstructionIndexing()


def _get_tuple_element(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    return HloInstructionIndexing.from_maps([IndexingMap.identity(instr.shape.dims)])


def _tuple(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    """Output `output_id` of a tuple is operand `output_id`; the other operands are not read."""
    if not 0 <= output_id < len(instr.operands):
        raise IndexingError(f"%{instr.name} (tuple) has no output {output_id}")
    groups = [[] for _ in instr.operands]
    groups[output_id] = [OperandIndexing(IndexingMap.identity(instr.operands[output_id].shape.dims))]
    return HloInstructionIndexing(groups)


# -- reductions and contractions -----------------------------------------------------------------
def reduce_input_map(input_dims, output_dims, reduced) -> IndexingMap:
    exprs, sizes, out_id = [], [], 0
    for i, n in enumerate(input_dims):
        if i in reduced:
            exprs.append(sym(len(sizes)))
            sizes.append(n)
        else:
            exprs.append(dim(out_id))
            out_id += 1
    return IndexingMap.from_tensor_sizes(exprs, output_dims, sizes)


def _reduce(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    n_inputs = len(instr.operands) // 2
    out = output_shape(instr, output_id)
    inputs = reduce_input_map(instr.operands[0].shape.dims, out.dims, set(_attr(instr, "dimensions")))
    return HloInstructionIndexing.from_maps([inputs] * n_inputs + [scalar_map(out)] * n_inputs)


def window_map(input_dims, output_dims, window) -> IndexingMap:
    """reduce-window input map: an unpadded window map composed with the pad map (XLA)."""
    exprs, padding, padded = [], [], []
    for i, w in enumerate(window.dims):
        exprs.append(sym(i) * w.window_dilation + dim(i) * w.stride)
        padding.append((w.padding_low, w.padding_high, w.base_dilation - 1))
        n = input_dims[i]
        padded.append(n + w.padding_low + w.padding_high + (n - 1) * (w.base_dilation - 1))
    no_padding = IndexingMap.from_tensor_sizes(exprs, output_dims, [w.size for w in window.dims])
    result = compose_indexing_maps(no_padding, pad_map(padded, padding))
    return result.simplify().remove_unused_symbols()


def _reduce_window(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    n_inputs = len(instr.operands) // 2
    out = output_shape(instr, output_id)
    inputs = window_map(instr.operands[0].shape.dims, out.dims, _attr(instr, "window"))
    return HloInstructionIndexing.from_maps([inputs] * n_inputs + [scalar_map(out)] * n_inputs)


def dot_operand_maps(lhs_dims, rhs_dims, out_dims, lhs_batch, rhs_batch, lhs_contracting,
                     rhs_contracting) -> tuple[IndexingMap, IndexingMap]:
    lhs: list[AffineExpr | None] = [None] * len(lhs_dims)
    rhs: list[AffineExpr | None] = [None] * len(rhs_dims)
    out_id = 0
    for lb, rb in zip(lhs_batch, rhs_batch):
        lhs[lb] = rhs[rb] = dim(out_id)
        out_id += 1
    for exprs, dims, batch, contracting in ((lhs, lhs_dims, lhs_batch, lhs_contracting),
                                            (rhs, rhs_dims, rhs_batch, rhs_contracting)):
        for i in range(len(dims)):
            if i not in batch and i not in contracting:
                exprs[i] = dim(out_id)
                out_id += 1
    sizes = []
    for k, (lc, rc) in enumerate(zip(lhs_contracting, rhs_contracting)):
        lhs[lc] = rhs[rc] = sym(k)
        sizes.append(lhs_dims[lc])
    return (IndexingMap.from_tensor_sizes(lhs, out_dims, sizes),
            IndexingMap.from_tensor_sizes(rhs, out_dims, sizes))


def _dot(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    a = instr.attrs
    maps = dot_operand_maps(
        instr.operands[0].shape.dims, instr.operands[1].shape.dims, instr.shape.dims,
        a.get("lhs_batch_dims", ()), a.get("rhs_batch_dims", ()),
        a.get("lhs_contracting_dims", ()), a.get("rhs_contracting_dims", ()))
    return HloInstructionIndexing.from_maps(maps)


# -- runtime offsets -----------------------------------------------------------------------------
def fold_runtime_value(hlo: HloInstruction, rt_map: IndexingMap, bounds: Interval) -> AffineExpr | None:
    """A constant (clamped into `bounds`, as the op clamps) or in-bounds iota offset as an expression."""
    if hlo.opcode == "constant" and hlo.literal is not None and not rt_map.results:
        value = int(np.asarray(hlo.literal).reshape(()))
        return const(min(max(value, bounds.lower), bounds.upper))
    if hlo.opcode == "constant" and hlo.literal is not None and all(
            e.is_constant for e in rt_map.results):
        value = int(np.asarray(hlo.literal)[tuple(e.value for e in rt_map.results)])
        return const(min(max(value, bounds.lower), bounds.upper))
    if hlo.opcode == "iota" and rt_map.results:
        expr = rt_map.results[hlo.attrs.get("iota_dimension", 0)]
        if bounds.contains(rt_map.range_evaluator().range(expr)):
            return expr
    return None


def operand_with_rt_vars(exprs, out_dims, sources, constraints=()) -> OperandIndexing:
    """Build a map over `out_dims` whose k-th symbol is runtime variable `sources[k]`
    (= (hlo, map from output index to hlo index, feasible bounds)); foldable ones become values."""
    values, rt_vars, rts = [], [], []
    for hlo, rt_map, bounds in sources:
        folded = fold_runtime_value(hlo, rt_map, bounds)
        if folded is None:
            values.append(sym(len(rt_vars)))
            rt_vars.append(Variable(bounds))
            rts.append(RuntimeVarIndexing(hlo, rt_map))
        else:
            values.append(folded)
    m = IndexingMap([e.replace(None, values) for e in exprs], vars_from_sizes(out_dims), (), rt_vars,
                    [(e.replace(None, values), r) for e, r in constraints])
    return OperandIndexing(m, tuple(rts)).remove_unused_symbols()


def _dynamic_slice(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    out, operand = instr.shape, instr.operands[0].shape
    starts = instr.operands[1:]
    if any(s.shape.rank != 0 for s in starts) or len(starts) != out.rank:
        return HloInstructionIndexing.from_maps([IndexingMap.undefined()] * len(instr.operands))
    sources = [(s, scalar_map(out), Interval(0, operand.dims[i] - out.dims[i]))
               for i, s in enumerate(starts)]
    data = operand_with_rt_vars([dim(i) + sym(i) for i in range(out.rank)], out.dims, sources)
    return HloInstructionIndexing([[data]] + [[OperandIndexing(scalar_map(out))]] * len(starts))


def _dynamic_update_slice(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    out, update = instr.shape, instr.operands[1].shape
    starts = instr.operands[2:]
    sources = [(s, scalar_map(out), Interval(0, out.dims[i] - update.dims[i]))
               for i, s in enumerate(starts)]
    # Unlike XLA, the update's domain is the window it is written to (`d - rt in [0, size - 1]`),
    # so the map says exactly which output elements read the update.
    offsets = [dim(i) - sym(i) for i in range(out.rank)]
    window = [(e, Interval(0, n - 1)) for e, n, total in zip(offsets, update.dims, out.dims) if n < total]
    upd = operand_with_rt_vars(offsets, out.dims, sources, window)
    return HloInstructionIndexing([[OperandIndexing(IndexingMap.identity(out.dims))], [upd]]
                                  + [[OperandIndexing(scalar_map(out))]] * len(starts))


def is_canonical_gather(instr: HloInstruction) -> bool:
    """XLA's GatherSimplifier::IsSimplifiedGather: s32[N, k] indices, offset dims 1..rank-1."""
    a = instr.attrs
    indices = instr.operands[1].shape
    offset_dims = tuple(a.get("offset_dims", ()))
    sim = tuple(a.get("start_index_map", ()))
    return (indices.rank == 2 and a.get("index_vector_dim") == 1 and list(sim) == sorted(sim)
            and not a.get("collapsed_slice_dims") and not a.get("operand_batching_dims")
            and offset_dims == tuple(range(1, len(offset_dims) + 1)))


def _gather(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    if not is_canonical_gather(instr):
        return HloInstructionIndexing.from_maps([IndexingMap.undefined()] * 2)
    operand, indices, out = instr.operands[0], instr.operands[1], instr.shape
    k = indices.shape.dims[1]
    index_map = IndexingMap(
        (dim(0), sym(0)), vars_from_sizes(out.dims), (Variable(Interval(0, k - 1)),))
    start_index_map = list(_attr(instr, "start_index_map"))
    exprs, sources = [], []
    for op_dim, size in enumerate(_attr(instr, "slice_sizes")):
        e = dim(_attr(instr, "offset_dims")[op_dim])
        if op_dim in start_index_map:
            rt_map = IndexingMap.from_tensor_sizes((dim(0), const(start_index_map.index(op_dim))), out.dims)
            e = e + sym(len(sources))
            sources.append((indices, rt_map, Interval(0, operand.shape.dims[op_dim] - size)))
        exprs.append(e)
    data = operand_with_rt_vars(exprs, out.dims, sources)
    return HloInstructionIndexing([[data], [OperandIndexing(index_map)]])


def _fusion(instr: HloInstruction, output_id: int) -> HloInstructionIndexing:
    from hlo_codegen.indexing.fusion_indexing import fusion_output_to_input_indexing

    return fusion_output_to_input_indexing(instr, output_id)


IndexingFn = Callable[[HloInstruction, int], HloInstructionIndexing]

OUTPUT_TO_INPUT: dict[str, IndexingFn] = {
    "map": _elementwise, "broadcast": _broadcast, "transpose": _transpose, "reshape": _reshape,
    "bitcast": _bitcast, "slice": _slice, "reverse": _reverse, "pad": _pad,
    "concatenate": _concatenate, "iota": _no_operands, "constant": _no_operands,
    "parameter": _no_operands, "get-tuple-element": _get_tuple_element, "tuple": _tuple,
    "reduce": _reduce, "reduce-window": _reduce_window, "dot": _dot,
    "dynamic-slice": _dynamic_slice, "dynamic-update-slice": _dynamic_update_slice,
    "gather": _gather, "fusion": _fusion,
}


def compute_output_to_input_indexing(instr: HloInstruction, output_id: int = 0) -> HloInstructionIndexing:
    """For each operand of `instr`, the maps from output `output_id`'s index to operand indices."""
    fn = OUTPUT_TO_INPUT.get(instr.opcode)
    if fn is None and is_elementwise(instr.opcode):
        fn = _elementwise
    if fn is None:
        return HloInstructionIndexing.from_maps([IndexingMap.undefined()] * len(instr.operands))
    try:
        return fn(instr, output_id)
    except (IndexError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise IndexingError(f"cannot compute indexing of %{instr.name} ({instr.opcode}): {err}") from err
