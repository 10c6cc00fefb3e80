"""AlgebraicSimplifier rewrites of bitcast, copy, reverse, iota and constant (XLA's HandleBitcast,
HandleCopy, HandleReverse, HandleIota, HandleConstant), in XLA's order.

Copies that change nothing go (layout-insensitive: every copy; layout-sensitive: same layout
only); copies and reshapes that move no element become bitcasts after layout assignment. Splat
constants become broadcasts of a scalar and 0, s, 2s, ... constants become iotas.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape
from hlo_opt.passes.algsimp.base import Rewriter, known_constant, rewrite
from hlo_opt.passes.algsimp.shape_ops import bitcasting_source, dims_of, merely_inserts_or_deletes_1s
from hlo_opt.passes.algsimp.shapes import reshape_is_bitcast


# -- bitcast / copy --------------------------------------------------------------------------------
@rewrite("bitcast")
def bitcast_of_bitcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBitcast: bitcast(bitcast(x)) => bitcast(x)."""
    operand = instr.operands[0]
    return operand.opcode == "bitcast" and rw.replace_with_new(instr, "bitcast", [operand.operands[0]])


@rewrite("bitcast")
def bitcast_is_noop(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleBitcast: a bitcast to the operand's own shape (SameShape, same element type) is removed."""
    operand = instr.operands[0]
    return operand.shape.element_type is instr.shape.element_type and rw.replace_if_compatible(instr, operand)


@rewrite("copy")
def copy_of_copy(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleCopy: copy(copy(x)) => x when x has the copy's shape and layout, else copy(x)."""
    inner = instr.operands[0]
    if inner.opcode != "copy":
        return False
    x = inner.operands[0]
    if x.shape == instr.shape:
        return rw.replace(instr, x)
    return rw.replace_with_new(instr, "copy", [x])


@rewrite("copy")
def copy_is_noop(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleCopy: a copy to the same shape (same layout when layout sensitive) is removed, except a
    sharded root copy of the entry computation."""
    comp = instr.parent
    if instr.sharding is not None and comp.parent is not None and comp.parent.entry is comp and instr.is_root:
        return False
    return rw.replace_if_compatible(instr, instr.operands[0])


@rewrite("copy")
def copy_to_bitcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleCopy (layout sensitive): a copy (through copies and reshapes) that moves no element
    becomes a bitcast, unless it changes memory space."""
    operand = instr.operands[0]
    if operand.shape.layout is not None and instr.shape.layout is not None \
            and operand.shape.layout.memory_space != instr.shape.layout.memory_space:
        return False
    source = bitcasting_source(instr, rw)
    return source is not None and rw.replace_with_new(instr, "bitcast", [source])


@rewrite("copy")
def copy_of_bitcast_reshape(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleCopy: copy(reshape(x)) => reshape(x) into the copy's layout, when the reshape has one
    user and the reshape to that layout is a bitcast of the reshape's own result."""
    reshape = instr.operands[0]
    if reshape.opcode != "reshape" or len(reshape.users) != 1 \
            or not reshape_is_bitcast(reshape.shape, instr.shape):
        return False
    return rw.replace(instr, rw.clone(reshape, [reshape.operands[0]], instr.shape))


# -- reverse ---------------------------------------------------------------------------------------
@rewrite("reverse")
def reverse_of_degenerate_dims(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReverse: reversing only size-1 dimensions does nothing."""
    return all(instr.shape.dims[d] == 1 for d in dims_of(instr)) and rw.replace(instr, instr.operands[0])


@rewrite("reverse")
def reverse_of_reverse(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReverse (layout insensitive): reverse(reverse(x)) => x, or one reverse of the dimensions
    reversed an odd number of times."""
    inner = instr.operands[0]
    if rw.opts.is_layout_sensitive or inner.opcode != "reverse":
        return False
    odd = sorted(set(dims_of(instr)) ^ set(dims_of(inner)))
    if not odd:
        return rw.replace(instr, inner.operands[0])
    return rw.replace(instr, rw.add("reverse", [inner.operands[0]], instr.shape, {"dimensions": tuple(odd)}))


def _scalar_broadcast(instr: HloInstruction) -> bool:
    return instr.opcode == "broadcast" and not dims_of(instr) and instr.operands[0].shape.rank == 0


@rewrite("reverse")
def reverse_of_elementwise_with_scalar(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReverse (layout insensitive): reverse(op(x, broadcast(s))) => op(reverse(x), broadcast(s))
    for an elementwise binary op other than compare."""
    inner = instr.operands[0]
    if rw.opts.is_layout_sensitive or not is_elementwise(inner.opcode) or len(inner.operands) != 2 \
            or inner.opcode == "compare":
        return False
    a, b = inner.operands
    attrs = {"dimensions": dims_of(instr)}
    if _scalar_broadcast(a):
        return rw.replace_with_new(instr, inner.opcode, [a, rw.add("reverse", [b], b.shape, attrs)],
                                   shape=inner.shape)
    if _scalar_broadcast(b):
        return rw.replace_with_new(instr, inner.opcode, [rw.add("reverse", [a], a.shape, attrs), b],
                                   shape=inner.shape)
    return False


@rewrite("reverse")
def reverse_of_degenerate_reshape(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleReverse (layout insensitive): reverse(reshape(x)) where the reshape only inserts size-1
    dimensions => reshape(reverse(x))."""
    inner = instr.operands[0]
    degenerate = merely_inserts_or_deletes_1s(inner)
    if rw.opts.is_layout_sensitive or degenerate is None or degenerate[0]:
        return False
    inserted = degenerate[1]
    dims = tuple(d - sum(1 for k in inserted if k < d) for d in dims_of(instr) if inner.shape.dims[d] != 1)
    x = inner.operands[0]
    reversed_x = rw.add("reverse", [x], x.shape, {"dimensions": dims})
    return rw.replace(instr, rw.reshape(reversed_x, inner.shape.dims, inner.shape))


# -- iota / constant -------------------------------------------------------------------------------
@rewrite("iota")
def iota_of_degenerate_dim(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleIota: an iota along a dimension of size <= 1 is all zeros."""
    if instr.shape.dims[instr.attrs["iota_dimension"]] > 1:
        return False
    return rw.replace(instr, rw.scalar_like(instr, 0))


@rewrite("constant")
def constant_tuple_to_tuple(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConstant: a tuple constant becomes a tuple of array constants."""
    if not instr.shape.is_tuple or instr.literal_unknown:
        return False
    return rw.replace(instr, _tuple_of_constants(rw, instr.shape, instr.literal))


def _tuple_of_constants(rw: Rewriter, shape: Shape, value) -> HloInstruction:
    if not shape.is_tuple:
        return rw.add("constant", [], shape, literal=value)
    parts = [_tuple_of_constants(rw, s, v) for s, v in zip(shape.tuple_shapes, value)]
    return rw.add("tuple", parts, shape)


@rewrite("constant")
def constant_splat_to_broadcast(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConstant: a constant of more than one element, all equal, becomes a broadcast scalar."""
    if not known_constant(instr) or instr.shape.num_elements <= 1:
        return False
    lit = np.asarray(instr.literal)
    first = lit.flat[0]
    splat = bool(lit.strides) and all(st == 0 for st in lit.strides)
    if not (splat or bool(np.all(lit == first))):
        return False
    scalar = rw.add("constant", [], Shape.array(instr.shape.element_type, ()), literal=np.array(first))
    return rw.replace(instr, rw.broadcast(scalar, instr.shape, ()))


def _strided_iota_stride(instr: HloInstruction) -> int | None:
    """The stride s when a rank-1 constant reads 0, s, 2s, ... (XLA's IsR1Iota / IsR1StridedIota)."""
    if not known_constant(instr) or instr.shape.rank != 1 or instr.shape.num_elements <= 1:
        return None
    flat = np.asarray(instr.literal)
    et = instr.shape.element_type
    if flat.flat[0] != 0:
        return None
    if et.is_integer:
        values = flat.astype(np.int64)
        stride = int(values[1])
        return stride if stride != 0 and np.array_equal(values, np.arange(len(values)) * stride) else None
    if et.is_float and np.array_equal(flat.astype(np.float64), np.arange(len(flat), dtype=np.float64)):
        return 1
    return None


@rewrite("constant")
def constant_iota(instr: HloInstruction, rw: Rewriter) -> bool:
    """HandleConstant: a rank-1 constant 0, 1, 2, ... becomes an iota; 0, s, 2s, ... (integers)
    becomes iota * s."""
    stride = _strided_iota_stride(instr)
    if stride is None:
        return False
    iota = rw.add("iota", [], instr.shape, {"iota_dimension": 0})
    if stride == 1:
        return rw.replace(instr, iota)
    return rw.replace_with_new(instr, "multiply", [iota, rw.scalar_like(instr, stride)])
