"""Shape rules of the data-movement opcodes: parameter, constant, iota, broadcast, reshape, transpose,
slices, concatenate, pad, reverse, tuples and dimension sizes. Gather and scatter live in
`gather_scatter.py`.

Opcodes whose result shape is not a function of their operands (parameter, constant, iota,
broadcast, reshape, bitcast, dynamic-reshape) take it from the written shape and check it.
"""

from __future__ import annotations

from hlo_common.hlo.shape import Shape
from hlo_common.hlo.shape_inference._base import (
    S32, U32, attr, check_dim_list, describe, expect_array, fail, higher_precision, int_attr, ints_attr, like,
    make, need_declared, np_shape, one_dimension, operand_shape, rule, same_type_ignoring_fp, tuple_of,
)


@rule("parameter")
def _parameter(instr, ctx):
    return like(need_declared(instr, "a parameter's shape is its declaration"))


@rule("constant")
def _constant(instr, ctx):
    shape = need_declared(instr, "a constant's shape is its declaration")
    if instr.literal is None:
        fail("constant has no literal value, expected one")
    if shape.is_array and not instr.literal_unknown and np_shape(instr.literal) != shape.dims:
        fail(f"literal has dimensions {list(np_shape(instr.literal))}, expected {describe(shape)}")
    return like(shape)


@rule("iota")
def _iota(instr, ctx):
    shape = need_declared(instr, "iota's dimensions come from the written shape")
    if not shape.is_array or shape.rank == 0:
        fail(f"iota produces {describe(shape)}, expected an array of rank >= 1")
    d = int_attr(instr, "iota_dimension")
    if not 0 <= d < shape.rank:
        fail(f"iota_dimension={d}, expected a dimension in [0, {shape.rank})")
    if shape.element_type.kind not in ("signed", "unsigned", "float", "complex"):
        fail(f"iota element type is {shape.element_type.name}, expected an integral, float or complex type")
    return like(shape)


@rule("broadcast")
def _broadcast(instr, ctx):
    s = operand_shape(instr, 0, "the operand of broadcast")
    dims = ints_attr(instr, "dimensions", () if s.rank == 0 else ints_attr(instr, "dimensions"))
    if instr.shape is None:
        # XLA's parser (InferBroadcastShape) reads `dimensions` as sizes to prepend: sensible only
        # for a scalar operand, where `broadcast(x)` is x's shape; the verifier rejects the rest.
        if any(d < 0 for d in dims):
            fail(f"dimensions={{{','.join(map(str, dims))}}}, expected non-negative sizes")
        return make(s.element_type, (*dims, *s.dims))
    out = instr.shape
    expect_array(out, "the result of broadcast")
    if len(dims) != s.rank:
        fail(f"dimensions={{{','.join(map(str, dims))}}} has {len(dims)} entries, "
             f"expected {s.rank} (the operand rank)")
    check_dim_list(dims, out.rank, "dimensions")
    for i, d in enumerate(dims):
        if out.dims[d] != s.dims[i]:
            fail(f"operand dimension {i} is {s.dims[i]} but output dimension {d} is {out.dims[d]}, "
                 "expected them equal")
    return make(s.element_type, out.dims, out.dynamic)


def _declared_same_size(instr, what: str) -> tuple[Shape, Shape]:
    s = operand_shape(instr, 0, f"the operand of {instr.opcode}")
    out = need_declared(instr, what)
    expect_array(out, f"the result of {instr.opcode}")
    if out.num_elements != s.num_elements:
        fail(f"operand {describe(s)} has {s.num_elements} elements, result {describe(out)} has "
             f"{out.num_elements}; expected equal counts")
    return s, out


@rule("reshape")
def _reshape(instr, ctx):
    s, out = _declared_same_size(instr, "reshape's dimensions come from the written shape")
    return make(s.element_type, out.dims, out.dynamic)


@rule("dynamic-reshape")
def _dynamic_reshape(instr, ctx):
    s, out = _declared_same_size(instr, "dynamic-reshape's bounds come from the written shape")
    if len(instr.operands) != out.rank + 1:
        fail(f"has {len(instr.operands) - 1} size operands, expected {out.rank} (one per result dimension)")
    for i, op in enumerate(instr.operands[1:], 1):
        if op.shape.is_tuple or op.shape.element_type is not S32 or op.shape.rank:
            fail(f"size operand {i} is {describe(op.shape)}, expected s32[]")
    return make(s.element_type, out.dims, out.dynamic)


@rule("bitcast")
def _bitcast(instr, ctx):
    s = operand_shape(instr, 0)
    out = need_declared(instr, "a bitcast's shape is its declaration")
    if s.is_array and out.is_array:
        bits_in = s.num_elements * s.element_type.bits
        bits_out = out.num_elements * out.element_type.bits
        if bits_in != bits_out:
            fail(f"operand {describe(s)} holds {bits_in} bits, result {describe(out)} holds {bits_out}; "
                 "expected equal sizes")
    return like(out)


@rule("transpose")
def _transpose(instr, ctx):
    s = operand_shape(instr, 0, "the operand of transpose")
    perm = ints_attr(instr, "dimensions")
    if sorted(perm) != list(range(s.rank)):
        fail(f"dimensions={{{','.join(map(str, perm))}}}, expected a permutation of 0..{s.rank - 1}")
    dynamic = [s.dynamic[p] for p in perm] if s.dynamic else None
    return make(s.element_type, [s.dims[p] for p in perm], dynamic)


@rule("reverse")
def _reverse(instr, ctx):
    s = operand_shape(instr, 0, "the operand of reverse")
    check_dim_list(ints_attr(instr, "dimensions"), s.rank, "dimensions")
    return like(s)


@rule("slice")
def _slice(instr, ctx):
    s = operand_shape(instr, 0, "the operand of slice")
    spec = attr(instr, "slice")
    if len(spec.dims) != s.rank:
        fail(f"slice has {len(spec.dims)} entries, expected {s.rank} (the operand rank)")
    sizes = []
    for i, (start, limit, stride) in enumerate(spec.dims):
        if start < 0 or limit > s.dims[i] or start > limit or stride <= 0:
            fail(f"slice [{start}:{limit}:{stride}] of dimension {i} (size {s.dims[i]}) is out of bounds, "
                 f"expected 0 <= start <= limit <= {s.dims[i]} and stride > 0")
        sizes.append((limit - start + stride - 1) // stride)
    return make(s.element_type, sizes)


def _scalar_indices(instr, first: int, rank: int, what: str) -> None:
    idx = instr.operands[first:]
    if len(idx) == 1 and idx[0].shape.is_array and idx[0].shape.rank == 1:
        i_shape = idx[0].shape  # the old form: one rank-1 index vector
        if i_shape.dims[0] != rank or not i_shape.element_type.is_integer:
            fail(f"start index vector is {describe(i_shape)}, expected an integral vector of {rank} elements")
        return
    if len(idx) != rank:
        fail(f"has {len(idx)} start indices, expected {rank} (the operand rank)")
    for k, op in enumerate(idx):
        s = op.shape
        if s.is_tuple or not s.is_array or s.rank or not s.element_type.is_integer:
            fail(f"start index {k} is {describe(s)}, expected an integral scalar")
        if s.element_type is not idx[0].shape.element_type:
            fail(f"start index {k} is {describe(s)}, expected the type of index 0 "
                 f"({idx[0].shape.element_type.name})")


@rule("dynamic-slice")
def _dynamic_slice(instr, ctx):
    s = operand_shape(instr, 0, "the operand of dynamic-slice")
    _scalar_indices(instr, 1, s.rank, "dynamic-slice")
    sizes = ints_attr(instr, "dynamic_slice_sizes")
    if len(sizes) != s.rank:
        fail(f"dynamic_slice_sizes has {len(sizes)} entries, expected {s.rank} (the operand rank)")
    for i, (n, d) in enumerate(zip(sizes, s.dims)):
        if not 0 <= n <= d:
            fail(f"slice size {n} of dimension {i}, expected 0..{d} (the operand dimension)")
    return make(s.element_type, sizes)


@rule("dynamic-update-slice")
def _dynamic_update_slice(instr, ctx):
    s = operand_shape(instr, 0, "the operand of dynamic-update-slice")
    u = operand_shape(instr, 1, "the update of dynamic-update-slice")
    _scalar_indices(instr, 2, s.rank, "dynamic-update-slice")
    if u.rank != s.rank:
        fail(f"update {describe(u)} has rank {u.rank}, expected {s.rank} like the operand {describe(s)}")
    if not same_type_ignoring_fp(s.element_type, u.element_type):
        fail(f"update has element type {u.element_type.name}, expected {s.element_type.name}")
    for i, (n, d) in enumerate(zip(u.dims, s.dims)):
        if n > d:
            fail(f"update dimension {i} is {n}, expected at most the operand dimension {d}")
    return like(s)


@rule("concatenate")
def _concatenate(instr, ctx):
    if not instr.operands:
        fail("concatenate has no operands, expected at least one")
    d = one_dimension(instr)
    first = operand_shape(instr, 0, "operand 0 of concatenate")
    if not 0 <= d < first.rank:
        fail(f"dimensions={{{d}}}, expected a dimension in [0, {first.rank})")
    total, etype = 0, first.element_type
    for i, op in enumerate(instr.operands):
        s = op.shape
        expect_array(s, f"operand {i} of concatenate")
        if s.rank != first.rank or any(a != b for k, (a, b) in enumerate(zip(s.dims, first.dims)) if k != d):
            fail(f"operand {i} is {describe(s)}, expected the dimensions of operand 0 {describe(first)} "
                 f"except dimension {d}")
        if not same_type_ignoring_fp(s.element_type, first.element_type):
            fail(f"operand {i} has element type {s.element_type.name}, expected {first.element_type.name}")
        total += s.dims[d]
        etype = higher_precision(etype, s.element_type)
    dims = list(first.dims)
    dims[d] = total
    return make(etype, dims)


@rule("pad")
def _pad(instr, ctx):
    s = operand_shape(instr, 0, "the operand of pad")
    v = operand_shape(instr, 1, "the padding value")
    if v.rank:
        fail(f"padding value is {describe(v)}, expected a scalar")
    if not same_type_ignoring_fp(s.element_type, v.element_type):
        fail(f"padding value has element type {v.element_type.name}, expected {s.element_type.name}")
    cfg = attr(instr, "padding")
    if len(cfg.dims) != s.rank:
        fail(f"padding has {len(cfg.dims)} dimensions, expected {s.rank} (the operand rank)")
    dims = []
    for i, ((lo, hi, interior), n) in enumerate(zip(cfg.dims, s.dims)):
        if interior < 0:
            fail(f"interior padding {interior} of dimension {i} is negative, expected >= 0")
        size = n + lo + hi + max(n - 1, 0) * interior
        if size < 0:
            fail(f"padding {lo}_{hi}_{interior} makes dimension {i} (size {n}) negative, expected >= 0")
        dims.append(size)
    return make(s.element_type, dims)


@rule("tuple")
def _tuple(instr, ctx):
    return tuple_of(op.shape for op in instr.operands)


@rule("get-tuple-element")
def _get_tuple_element(instr, ctx):
    s = operand_shape(instr, 0)
    index = int_attr(instr, "index")
    if not s.is_tuple:
        fail(f"operand is {describe(s)}, expected a tuple")
    if not 0 <= index < len(s.tuple_shapes):
        fail(f"index={index}, expected an index below {len(s.tuple_shapes)} (the tuple size)")
    return like(s.tuple_shapes[index])


def _dimension_of(instr, s: Shape) -> int:
    d = one_dimension(instr)
    if not 0 <= d < s.rank:
        fail(f"dimensions={{{d}}}, expected a dimension in [0, {s.rank})")
    return d


@rule("get-dimension-size")
def _get_dimension_size(instr, ctx):
    _dimension_of(instr, operand_shape(instr, 0, "the operand of get-dimension-size"))
    return make(S32, ())


@rule("set-dimension-size")
def _set_dimension_size(instr, ctx):
    s = operand_shape(instr, 0, "the operand of set-dimension-size")
    d = _dimension_of(instr, s)
    v = operand_shape(instr, 1, "the size operand")
    if v.rank or v.element_type is not S32:
        fail(f"size operand is {describe(v)}, expected s32[]")
    dyn = list(s.dynamic or ("",) * s.rank)
    dyn[d] = "<="
    return make(s.element_type, s.dims, dyn)


@rule("copy-start")
def _copy_start(instr, ctx):
    s = operand_shape(instr, 0)
    return tuple_of([s, s, make(U32, ())])


@rule("copy-done")
def _copy_done(instr, ctx):
    s = operand_shape(instr, 0)
    if not s.is_tuple or len(s.tuple_shapes) < 2:
        fail(f"operand is {describe(s)}, expected the (destination, source, context) tuple of copy-start")
    if not s.tuple_shapes[0].compatible(s.tuple_shapes[1]):
        fail(f"destination {describe(s.tuple_shapes[0])} and source {describe(s.tuple_shapes[1])} differ, "
             "expected the same shape")
    return like(s.tuple_shapes[0])
