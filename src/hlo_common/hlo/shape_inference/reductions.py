"""Shape rules of reductions, windows and sorting: reduce (variadic gives a tuple), reduce-window,
select-and-scatter, sort, topk, scan; and `verify_reducer`, the reducer-signature check that
scatter, all-reduce-like ops and these share (a reducer of N inputs takes 2·N scalars, returns N).
"""

from __future__ import annotations

from hlo_common.hlo.shape_inference._base import (
    S32, InferenceContext, attr, check_dim_list, computation_attr, describe, expect_array, fail,
    int_attr, ints_attr, like, make, one_dimension, operand_shape, rule, same_type_ignoring_fp, tuple_of,
    window_output_dims,
)


def verify_reducer(ctx: InferenceContext, comp, init_types, input_types, what: str = "to_apply") -> list:
    """Check that `comp` reduces len(input_types) values; returns its accumulator scalar shapes."""
    n = len(input_types)
    params, result = ctx.program_shape(comp)
    if len(params) != 2 * n:
        fail(f"{what} computation {comp.name} takes {len(params)} parameters, expected {2 * n}")
    if result.is_tuple:
        accs = list(result.tuple_shapes)
        if len(accs) != n:
            fail(f"{what} computation {comp.name} returns a tuple of {len(accs)}, expected {n} elements")
    elif result.is_array:
        if n != 1:
            fail(f"{what} computation {comp.name} returns {describe(result)}, expected a tuple of {n} "
                 "scalars")
        accs = [result]
    else:
        fail(f"{what} computation {comp.name} returns {describe(result)}, expected scalars")
    for i, acc in enumerate(accs):
        if acc.is_tuple or not acc.is_array or acc.rank:
            fail(f"{what} computation {comp.name} returns {describe(result)}, expected scalars")
        if not acc.compatible(params[i]):
            fail(f"{what} computation {comp.name}: parameter {i} is {describe(params[i])}, expected "
                 f"{describe(acc)} (its result type)")
        if not same_type_ignoring_fp(acc.element_type, init_types[i]):
            fail(f"{what} computation {comp.name} accumulates {acc.element_type.name}, but init value "
                 f"{i} is {init_types[i].name}; expected the same type")
        p = params[n + i]
        if p.is_tuple or p.rank or not same_type_ignoring_fp(p.element_type, input_types[i]):
            fail(f"{what} computation {comp.name}: parameter {n + i} is {describe(p)}, expected "
                 f"{input_types[i].name}[]")
    return accs


def _split_inputs(instr, what: str):
    ops = instr.operands
    if not ops or len(ops) % 2:
        fail(f"{what} has {len(ops)} operands, expected an even number (inputs then init values)")
    n = len(ops) // 2
    inputs = [operand_shape(instr, i, f"input {i} of {what}") for i in range(n)]
    inits = [operand_shape(instr, n + i, f"init value {i} of {what}") for i in range(n)]
    for i, s in enumerate(inputs[1:], 1):
        if s.dims != inputs[0].dims:
            fail(f"input {i} is {describe(s)}, expected the dimensions of input 0 {describe(inputs[0])}")
    for i, s in enumerate(inits):
        if s.rank:
            fail(f"init value {i} is {describe(s)}, expected a scalar")
    return inputs, inits


def _result(accs, dims, dynamic=None):
    shapes = [make(a.element_type, dims, dynamic) for a in accs]
    return shapes[0] if len(shapes) == 1 else tuple_of(shapes)


@rule("reduce")
def _reduce(instr, ctx):
    inputs, inits = _split_inputs(instr, "reduce")
    dims = ints_attr(instr, "dimensions")
    check_dim_list(dims, inputs[0].rank, "dimensions")
    accs = verify_reducer(ctx, computation_attr(instr, "to_apply"), [s.element_type for s in inits],
                          [s.element_type for s in inputs])
    s = inputs[0]
    kept = [k for k in range(s.rank) if k not in dims]
    dyn = [s.dynamic[k] for k in kept] if s.dynamic else None
    return _result(accs, [s.dims[k] for k in kept], dyn)


@rule("reduce-window")
def _reduce_window(instr, ctx):
    inputs, inits = _split_inputs(instr, "reduce-window")
    window = attr(instr, "window")
    verify_reducer(ctx, computation_attr(instr, "to_apply"), [s.element_type for s in inits],
                   [s.element_type for s in inputs])
    dims = window_output_dims(inputs[0].dims, window, "the input")
    return _result(inits, dims)  # XLA: each output takes its init value's element type


@rule("select-and-scatter")
def _select_and_scatter(instr, ctx):
    s = operand_shape(instr, 0, "the operand of select-and-scatter")
    src = operand_shape(instr, 1, "the source of select-and-scatter")
    init = operand_shape(instr, 2, "the init value of select-and-scatter")
    sel = computation_attr(instr, "select")
    params, result = ctx.program_shape(sel)
    if len(params) != 2:
        fail(f"select computation {sel.name} takes {len(params)} parameters, expected 2")
    if result.is_tuple or result.rank or not result.element_type.is_pred:
        fail(f"select computation {sel.name} returns {describe(result)}, expected pred[]")
    for i, p in enumerate(params):
        if p.is_tuple or p.rank or not same_type_ignoring_fp(p.element_type, s.element_type):
            fail(f"select computation {sel.name}: parameter {i} is {describe(p)}, "
                 f"expected {s.element_type.name}[]")
    verify_reducer(ctx, computation_attr(instr, "scatter"), [init.element_type], [src.element_type],
                   "scatter")
    dims = window_output_dims(s.dims, attr(instr, "window"), "the operand")
    if list(src.dims) != dims:
        fail(f"source is {describe(src)}, expected dimensions {dims} (the windowed operand)")
    return like(s)


@rule("sort")
def _sort(instr, ctx):
    if not instr.operands:
        fail("sort has no operands, expected at least one")
    shapes = [operand_shape(instr, i, f"operand {i} of sort") for i in range(len(instr.operands))]
    for i, s in enumerate(shapes[1:], 1):
        if s.dims != shapes[0].dims:
            fail(f"operand {i} is {describe(s)}, expected the dimensions of operand 0 {describe(shapes[0])}")
    d = one_dimension(instr)
    if not 0 <= d < max(shapes[0].rank, 1):
        fail(f"dimensions={{{d}}}, expected a dimension in [0, {shapes[0].rank})")
    comp = computation_attr(instr, "to_apply")
    params, result = ctx.program_shape(comp)
    if result.is_tuple or result.rank or not result.element_type.is_pred:
        fail(f"comparator {comp.name} returns {describe(result)}, expected pred[]")
    if len(params) != 2 * len(shapes):
        fail(f"comparator {comp.name} takes {len(params)} parameters, expected {2 * len(shapes)}")
    for k, p in enumerate(params):
        want = shapes[k // 2].element_type
        if p.is_tuple or p.rank or not same_type_ignoring_fp(p.element_type, want):
            fail(f"comparator {comp.name}: parameter {k} is {describe(p)}, expected {want.name}[]")
    return like(shapes[0]) if len(shapes) == 1 else tuple_of(shapes)


@rule("topk")
def _topk(instr, ctx):
    s = operand_shape(instr, 0, "the operand of topk")
    k = int_attr(instr, "k")
    if s.rank == 0:
        fail("operand is a scalar, expected rank >= 1")
    if not 0 <= k <= s.dims[-1]:
        fail(f"k={k}, expected at most the last dimension {s.dims[-1]}")
    dims = list(s.dims[:-1]) + [k]
    return tuple_of([make(s.element_type, dims), make(S32, dims)])


@rule("scan")
def _scan(instr, ctx):
    carries = int(str(instr.attrs.get("num_carries", 0)))
    n_in = len(instr.operands) - carries
    if n_in < 0:
        fail(f"num_carries={carries}, expected at most the {len(instr.operands)} operands")
    d = one_dimension(instr)
    inputs = [operand_shape(instr, i, f"input {i} of scan") for i in range(n_in)]
    inits = [operand_shape(instr, n_in + i) for i in range(carries)]
    length = inputs[0].dims[d] if inputs and d < inputs[0].rank else None
    for i, s in enumerate(inputs):
        if not 0 <= d < s.rank or s.dims[d] != length:
            fail(f"input {i} is {describe(s)}, expected dimension {d} of size {length}")
    comp = computation_attr(instr, "to_apply")
    params, result = ctx.program_shape(comp)
    outs = list(result.tuple_shapes) if result.is_tuple else [result]
    if len(params) != n_in + carries or len(outs) < carries:
        fail(f"to_apply {comp.name} takes {len(params)} parameters and returns {len(outs)} values, "
             f"expected {n_in + carries} parameters and at least {carries} results")
    for i, (p, c) in enumerate(zip(params[n_in:], inits)):
        if not p.compatible(c):
            fail(f"to_apply parameter {n_in + i} is {describe(p)}, expected the carry {describe(c)}")
    shapes = []
    for o in outs[: len(outs) - carries]:
        expect_array(o, f"a per-step result of {comp.name}")
        dims = list(o.dims)
        dims.insert(min(d, len(dims)), length if length is not None else 0)
        shapes.append(make(o.element_type, dims))
    return tuple_of(shapes + list(inits))

