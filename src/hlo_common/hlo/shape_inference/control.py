"""Shape rules of calls and control flow (call, while, conditional, fusion, async-*), custom-call,
tokens (after-all, add-dependency), host I/O (infeed, outfeed, send, recv) and the RNG opcodes.

A call-like result is the called computation's root shape, after checking that the operands fit
its parameters.
"""

from __future__ import annotations

from hlo_common.hlo.shape_inference._base import (
    PRED, S32, U32, U64, attr, computation_attr, describe, expect_array, expect_token, fail, like, make,
    need_declared, operand_shape, rule, token, tuple_of, word_attr,
)


def _check_call_args(ctx, comp, shapes, what: str, allow_fewer_params: bool = False) -> None:
    params, _root = ctx.program_shape(comp)
    if len(params) != len(shapes) and not (allow_fewer_params and len(params) < len(shapes)):
        fail(f"{what} computation {comp.name} takes {len(params)} parameters, expected {len(shapes)} "
             "(one per operand)")
    for i, (p, s) in enumerate(zip(params, shapes)):
        if not p.compatible(s):
            fail(f"operand {i} is {describe(s)} but parameter {i} of {comp.name} is {describe(p)}; "
                 "expected the same shape")


@rule("call")
def _call(instr, ctx):
    comp = computation_attr(instr, "to_apply")
    _check_call_args(ctx, comp, [op.shape for op in instr.operands], "to_apply")
    return like(ctx.program_shape(comp)[1])


@rule("fusion")
def _fusion(instr, ctx):
    comp = computation_attr(instr, "calls")
    # XLA allows a fusion to pass operands its fused computation does not read, never fewer.
    _check_call_args(ctx, comp, [op.shape for op in instr.operands], "fused", allow_fewer_params=True)
    return like(ctx.program_shape(comp)[1])


@rule("while")
def _while(instr, ctx):
    init = operand_shape(instr, 0)
    cond, body = computation_attr(instr, "condition"), computation_attr(instr, "body")
    for what, comp in (("condition", cond), ("body", body)):
        params, _ = ctx.program_shape(comp)
        if len(params) != 1:
            fail(f"{what} computation {comp.name} takes {len(params)} parameters, expected 1")
        if not params[0].compatible(init):
            fail(f"{what} computation {comp.name} takes {describe(params[0])}, expected the loop state "
                 f"{describe(init)}")
    result = ctx.program_shape(cond)[1]
    if result.is_tuple or result.rank or not result.element_type.is_pred:
        fail(f"condition computation {cond.name} returns {describe(result)}, expected pred[]")
    root = ctx.program_shape(body)[1]
    if not root.compatible(init):
        fail(f"body computation {body.name} returns {describe(root)}, expected the loop state "
             f"{describe(init)}")
    return like(root)


def branch_computations(instr) -> list:
    if "branch_computations" in instr.attrs:
        comps = attr(instr, "branch_computations")
        return comps if isinstance(comps, list) else [comps]
    return [computation_attr(instr, "true_computation"), computation_attr(instr, "false_computation")]


@rule("conditional")
def _conditional(instr, ctx):
    index = operand_shape(instr, 0)
    if index.is_tuple or not index.is_array or index.rank or index.element_type not in (PRED, S32):
        fail(f"branch index is {describe(index)}, expected pred[] or s32[]")
    branches = branch_computations(instr)
    if index.element_type is PRED and len(branches) != 2:
        fail(f"found {len(branches)} branches for a pred branch index, expected 2")
    if not branches:
        fail("found no branch computations, expected at least one")
    if len(instr.operands) != len(branches) + 1:
        fail(f"{len(instr.operands)} operands for {len(branches)} branches, expected {len(branches) + 1}")
    result = None
    for j, comp in enumerate(branches):
        _check_call_args(ctx, comp, [instr.operands[j + 1].shape], f"branch {j}")
        root = ctx.program_shape(comp)[1]
        if result is None:
            result = root
        elif not root.compatible(result):
            fail(f"branch {j} ({comp.name}) returns {describe(root)}, expected {describe(result)} "
                 "like branch 0")
    return like(result)


def _declared_extras(instr, start: int) -> list:
    """Elements `start:` of a written tuple shape (async contexts the operands do not determine)."""
    if instr.shape is not None and instr.shape.is_tuple:
        return list(instr.shape.tuple_shapes[start:])
    return []


@rule("async-start")
def _async_start(instr, ctx):
    args = tuple_of(op.shape for op in instr.operands)
    comp = instr.attrs.get("calls")
    if comp is None or isinstance(comp, list):
        declared = need_declared(instr, "an async op without calls= has no wrapped computation")
        if not declared.is_tuple or len(declared.tuple_shapes) < 2:
            fail(f"result is {describe(declared)}, expected a tuple of at least (operands, result)")
        return tuple_of([args, *declared.tuple_shapes[1:]])
    _check_call_args(ctx, comp, [op.shape for op in instr.operands], "wrapped")
    return tuple_of([args, ctx.program_shape(comp)[1], *_declared_extras(instr, 2)])


def _async_operand(instr):
    s = operand_shape(instr, 0)
    if not s.is_tuple or len(s.tuple_shapes) < 2:
        fail(f"operand is {describe(s)}, expected the (operands, result, ...) tuple of an async op")
    return s


@rule("async-update")
def _async_update(instr, ctx):
    return like(_async_operand(instr))


@rule("async-done")
def _async_done(instr, ctx):
    return like(_async_operand(instr).tuple_shapes[1])


@rule("custom-call")
def _custom_call(instr, ctx):
    declared = need_declared(instr, "a custom-call's shape is its declaration")
    constraints = instr.attrs.get("operand_layout_constraints")
    if constraints is not None:
        if len(constraints) != len(instr.operands):
            fail(f"operand_layout_constraints has {len(constraints)} shapes, expected {len(instr.operands)} "
                 "(one per operand)")
        for i, (c, op) in enumerate(zip(constraints, instr.operands)):
            if not c.compatible(op.shape):
                fail(f"operand {i} is {describe(op.shape)}, expected {describe(c)} as its layout "
                     "constraint says")
    return like(declared)


@rule("after-all")
def _after_all(instr, ctx):
    for i, op in enumerate(instr.operands):
        expect_token(op.shape, f"operand {i} of after-all")
    return token()


@rule("add-dependency")
def _add_dependency(instr, ctx):
    expect_token(operand_shape(instr, 1), "operand 1 of add-dependency")
    return like(operand_shape(instr, 0))


@rule("rng")
def _rng(instr, ctx):
    a = operand_shape(instr, 0, "operand 0 of rng")
    b = operand_shape(instr, 1, "operand 1 of rng")
    out = need_declared(instr, "rng's dimensions come from the written shape")
    expect_array(out, "the result of rng")
    if a.rank or b.rank:
        fail(f"operands are {describe(a)} and {describe(b)}, expected scalars")
    if a.element_type is not b.element_type:
        fail(f"operands have element types {a.element_type.name} and {b.element_type.name}, expected equal")
    dist = word_attr(instr, "distribution")
    et = a.element_type
    if dist == "rng_normal" and not et.is_float:
        fail(f"rng_normal on {et.name}, expected a floating-point type")
    if dist not in ("rng_normal", "rng_uniform"):
        fail(f"distribution={dist}, expected rng_uniform or rng_normal")
    if dist == "rng_uniform" and et.kind not in ("float", "signed", "unsigned", "pred"):
        fail(f"rng_uniform on {et.name}, expected a float, integral or pred type")
    return make(et, out.dims)


@rule("rng-bit-generator")
def _rng_bit_generator(instr, ctx):
    state = operand_shape(instr, 0, "the state of rng-bit-generator")
    out = need_declared(instr, "rng-bit-generator's output dimensions come from the written shape")
    if out.is_tuple:
        if len(out.tuple_shapes) != 2:
            fail(f"result is {describe(out)}, expected a tuple of (state, values)")
        if not out.tuple_shapes[0].compatible(state):
            fail(f"result state is {describe(out.tuple_shapes[0])}, expected the input state "
                 f"{describe(state)}")
    return like(out)


@rule("rng-get-and-update-state")
def _rng_state(instr, ctx):
    return make(U64, (2,))


@rule("infeed")
def _infeed(instr, ctx):
    expect_token(operand_shape(instr, 0), "the operand of infeed")
    out = need_declared(instr, "infeed's data shape comes from the written shape")
    if not out.is_tuple or len(out.tuple_shapes) != 2 or not out.tuple_shapes[1].is_token:
        fail(f"result is {describe(out)}, expected a tuple of (data, token[])")
    return like(out)


@rule("outfeed")
def _outfeed(instr, ctx):
    operand_shape(instr, 0)
    expect_token(operand_shape(instr, 1), "operand 1 of outfeed")
    return token()


@rule("send")
def _send(instr, ctx):
    data = operand_shape(instr, 0)
    expect_token(operand_shape(instr, 1), "operand 1 of send")
    return tuple_of([data, make(U32, ()), token()])


@rule("recv")
def _recv(instr, ctx):
    expect_token(operand_shape(instr, 0), "the operand of recv")
    out = need_declared(instr, "recv's data shape comes from the written shape")
    if not out.is_tuple or len(out.tuple_shapes) != 3:
        fail(f"result is {describe(out)}, expected a tuple of (data, u32[], token[])")
    return tuple_of([out.tuple_shapes[0], make(U32, ()), token()])


@rule("send-done")
def _send_done(instr, ctx):
    s = operand_shape(instr, 0)
    if not s.is_tuple:
        fail(f"operand is {describe(s)}, expected the tuple of a send")
    return token()


@rule("recv-done")
def _recv_done(instr, ctx):
    s = operand_shape(instr, 0)
    if not s.is_tuple or not s.tuple_shapes:
        fail(f"operand is {describe(s)}, expected the tuple of a recv")
    return tuple_of([s.tuple_shapes[0], token()])
