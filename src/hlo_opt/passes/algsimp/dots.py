"""AlgebraicSimplifier rewrites of dot and convolution (XLA's HandleDot, HandleConvolution), in
XLA's order. None apply after layout assignment.

XLA:GPU strength-reduces only vector . vector dots here (GpuAlgebraicSimplifier); larger dots go to
cuBLAS or Triton. A dot without contracting dimensions is an outer product, i.e. a multiply of
broadcasts; size-1 dimensions are dropped from dots, and dot(transpose(a), transpose(b)) with one
permutation is computed untransposed.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.passes.algsimp.base import Rewriter, is_zero_element, rewrite, swapped_precision
from hlo_opt.passes.algsimp.reductions import make_reduce

_SUPPORTED_ALGORITHMS = (None, "dot_f32_f32_f32")


def _dnums(dot: HloInstruction) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(dot.attrs.get(k, ())) for k in (
        "lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims"))


def _supported_precision(dot: HloInstruction) -> bool:
    return dot.attrs.get("algorithm") in _SUPPORTED_ALGORITHMS


def _batch_major_contracting_minor(rw: Rewriter, x: HloInstruction, batch, contracting) -> HloInstruction:
    """XLA's NormalizeDotOperandToBatchMajorAndContractingMinor."""
    perm = list(batch) + [d for d in range(x.shape.rank) if d not in batch and d not in contracting]
    perm += list(contracting)
    if perm == sorted(perm):
        return x
    return rw.add("transpose", [x], None, {"dimensions": tuple(perm)})


def _as_type(rw: Rewriter, x: HloInstruction, etype) -> HloInstruction:
    if x.shape.element_type is etype:
        return x
    return rw.add("convert", [x], x.shape.with_element_type(etype))


def _make_dot(rw: Rewriter, operands, attrs, like: HloInstruction) -> HloInstruction:
    """XLA's MakeDotHlo with `like`'s element type as the preferred result type."""
    from hlo_common.hlo.shape_inference import infer_shape
    from hlo_common.hlo.ir import HloInstruction as Instr

    probe = Instr.create("dot", operands, None, attrs)
    shape = infer_shape(probe).with_element_type(like.shape.element_type)
    probe.set_operands([])
    return rw.add("dot", operands, shape, attrs)


@rewrite("dot")
def dot_of_zero_elements(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDot: a dot with an empty operand or result is a broadcast zero."""
    if rw.opts.is_layout_sensitive or not any(is_zero_element(s) for s in (
            instr.shape, instr.operands[0].shape, instr.operands[1].shape)):
        return False
    zero = rw.constant(0, instr.shape.element_type)
    return rw.replace(instr, rw.broadcast(zero, instr.shape, ()))


@rewrite("dot")
def dot_without_contraction_to_multiply(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDot (enable_dot_to_multiply_rewrite): a dot without contracting dimensions (an outer
    product) => multiply(broadcast(transpose(lhs)), broadcast(transpose(rhs)))."""
    lb, rb, lc, _rc = _dnums(instr)
    if rw.opts.is_layout_sensitive or not rw.opts.enable_dot_to_multiply_rewrite or lc \
            or not _supported_precision(instr):
        return False
    lhs, rhs = instr.operands
    et = instr.shape.element_type
    new_lhs = _as_type(rw, _batch_major_contracting_minor(rw, lhs, lb, ()), et)
    new_rhs = _as_type(rw, _batch_major_contracting_minor(rw, rhs, rb, ()), et)
    if instr.shape.rank != lhs.shape.rank:
        new_lhs = rw.broadcast(new_lhs, instr.shape, range(lhs.shape.rank))
    if instr.shape.rank != rhs.shape.rank:
        dims = list(range(len(lb))) + list(range(lhs.shape.rank, instr.shape.rank))
        new_rhs = rw.broadcast(new_rhs, instr.shape, dims)
    return rw.replace_with_new(instr, "multiply", [new_lhs, new_rhs])


@rewrite("dot")
def dot_strength_reduction(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDot (RewriteBatchPlusContractingAsReduce, GPU's ShouldStrengthReduceDotToReduce): a
    dot whose operands have only batch and contracting dimensions (vector . vector) =>
    reduce(multiply) summed in f32 (f64 for f64), converted back."""
    lb, rb, lc, rc = _dnums(instr)
    lhs, rhs = instr.operands
    if rw.opts.is_layout_sensitive or not rw.opts.enable_dot_strength_reduction \
            or not _supported_precision(instr) \
            or len(lb) + len(lc) != lhs.shape.rank or len(rb) + len(rc) != rhs.shape.rank:
        return False
    et = instr.shape.element_type
    new_lhs = _as_type(rw, _batch_major_contracting_minor(rw, lhs, lb, lc), et)
    new_rhs = _as_type(rw, _batch_major_contracting_minor(rw, rhs, rb, rc), et)
    product = rw.binary("multiply", new_lhs, new_rhs)
    from hlo_common.hlo.dtypes import PRIMITIVE_TYPES

    acc = PRIMITIVE_TYPES["f64" if et.name == "f64" else "f32"] if et.is_float else et
    product = _as_type(rw, product, acc)
    dims = range(len(lb), len(lb) + len(lc))
    total = make_reduce(rw, product, rw.constant(0, acc), dims, rw.scalar_add_computation(acc))
    return rw.replace(instr, _as_type(rw, total, et))


@rewrite("dot")
def dot_remove_degenerate_dims(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDot (RemoveDegenerateDimensionFromDot): size-1 dimensions of the operands are reshaped
    away (and dropped from the dimension numbers); the result is reshaped back if needed."""
    lhs, rhs = instr.operands
    if rw.opts.is_layout_sensitive or (1 not in lhs.shape.dims and 1 not in rhs.shape.dims):
        return False
    maps = []
    for x in (lhs, rhs):
        kept = [d for d in range(x.shape.rank) if x.shape.dims[d] != 1]
        maps.append({d: k for k, d in enumerate(kept)})
    attrs = dict(instr.attrs)
    for key, side in (("lhs_batch_dims", 0), ("rhs_batch_dims", 1), ("lhs_contracting_dims", 0),
                      ("rhs_contracting_dims", 1)):
        attrs.pop(key, None)
        kept = tuple(maps[side][d] for d in instr.attrs.get(key, ()) if d in maps[side])
        if kept:
            attrs[key] = kept
    operands = [rw.reshape(x, tuple(s for s in x.shape.dims if s != 1)) if 1 in x.shape.dims else x
                for x in (lhs, rhs)]
    dot = _make_dot(rw, operands, attrs, instr)
    if dot.shape.dims == instr.shape.dims:
        return rw.replace(instr, dot)
    return rw.replace(instr, rw.reshape(dot, instr.shape.dims, instr.shape))


@rewrite("dot")
def dot_of_transposes(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleDot (RemoveTransposesFromDotOperands): dot(transpose(a), transpose(b)) with one
    permutation on a canonical dot (batch dims first, one contracting dim each) =>
    transpose(dot(a, b)), or transpose(dot(b, a)) when the permutation swaps the matrix dims."""
    lhs, rhs = instr.operands
    lb, rb, lc, rc = _dnums(instr)
    rank = instr.shape.rank
    if rw.opts.is_layout_sensitive or lhs.opcode != "transpose" or rhs.opcode != "transpose" \
            or tuple(lhs.attrs["dimensions"]) != tuple(rhs.attrs["dimensions"]) or lb != rb \
            or lc != (rank - 1,) or rc != (rank - 2,) or rank != len(lb) + 2:
        return False
    perm = tuple(lhs.attrs["dimensions"])
    if perm[rank - 2:] == (rank - 2, rank - 1):
        operands, attrs = [lhs.operands[0], rhs.operands[0]], dict(instr.attrs)
    elif perm[rank - 2:] == (rank - 1, rank - 2):
        operands, attrs = [rhs.operands[0], lhs.operands[0]], swapped_precision(instr.attrs)
    else:
        return False
    inner = _make_dot(rw, operands, attrs, instr)
    result = rw.add("transpose", [inner], None, {"dimensions": perm})
    return result.shape.dims == instr.shape.dims and rw.replace(instr, result)


@rewrite("convolution")
def convolution_of_zero_elements(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConvolution: a convolution with an empty input or filter is all zeros."""
    if not (is_zero_element(instr.operands[0].shape) or is_zero_element(instr.operands[1].shape)):
        return False
    return rw.replace(instr, rw.scalar_like(instr, 0))
