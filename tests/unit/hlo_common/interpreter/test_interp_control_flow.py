"""Control flow, async wrappers, custom calls and single-device collectives in the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.errors import InterpreterError
from hlo_common.interpreter import Evaluator, evaluate
from hlo_common.interpreter.custom_call import CUSTOM_CALL_TARGETS, register_custom_call
from hlo_common.hlo.parser import parse_module


def run(text: str, *args, **options):
    return evaluate(parse_module(text), list(args), **options)


def test_while_loop_sums_to_ten():
    out = run("""
    HloModule m
    cond { s = (s32[], f32[2]) parameter(0) i = s32[] get-tuple-element(s), index=0
           n = s32[] constant(10) ROOT lt = pred[] compare(i, n), direction=LT }
    body { s = (s32[], f32[2]) parameter(0) i = s32[] get-tuple-element(s), index=0
           v = f32[2] get-tuple-element(s), index=1 one = s32[] constant(1) i2 = s32[] add(i, one)
           f = f32[] convert(i) b = f32[2] broadcast(f), dimensions={} v2 = f32[2] add(v, b)
           ROOT t = (s32[], f32[2]) tuple(i2, v2) }
    ENTRY e { z = s32[] constant(0) v = f32[2] parameter(0) t = (s32[], f32[2]) tuple(z, v)
              ROOT w = (s32[], f32[2]) while(t), condition=cond, body=body }""", np.float32([0, 100]))
    assert out[0] == 10
    np.testing.assert_array_equal(out[1], [45, 145])


_BRANCHES = """
HloModule m
b0 { x = f32[] parameter(0) ROOT r = f32[] negate(x) }
b1 { x = f32[] parameter(0) ROOT r = f32[] add(x, x) }
b2 { x = f32[] parameter(0) ROOT r = f32[] multiply(x, x) }
ENTRY e { i = s32[] parameter(0) x = f32[] parameter(1)
          ROOT c = f32[] conditional(i, x, x, x), branch_computations={b0, b1, b2} }
"""


@pytest.mark.parametrize("index, expected", [(0, -3), (1, 6), (2, 9), (3, 9), (-1, 9), (99, 9)])
def test_conditional_index_form_out_of_range_runs_last_branch(index, expected):
    assert run(_BRANCHES, np.int32(index), np.float32(3)) == expected


def test_conditional_pred_form_passes_each_branch_its_operand():
    text = """
    HloModule m
    t { x = f32[] parameter(0) ROOT r = f32[] negate(x) }
    f { x = s32[] parameter(0) ROOT r = f32[] convert(x) }
    ENTRY e { p = pred[] parameter(0) a = f32[] constant(2) b = s32[] constant(5)
              ROOT c = f32[] conditional(p, a, b), true_computation=t, false_computation=f }"""
    assert run(text, np.bool_(True)) == -2
    assert run(text, np.bool_(False)) == 5


def test_fusion_call_opt_barrier_and_ordering_ops():
    out = run("""
    HloModule m
    fused { a = f32[4] parameter(0) b = f32[4] parameter(1) ROOT m = f32[4] multiply(a, b) }
    ENTRY e { p = f32[4] parameter(0) q = f32[4] parameter(1)
              f = f32[4] fusion(p, q), kind=kLoop, calls=fused
              o = (f32[4], f32[4]) opt-barrier((f32[4], f32[4]) tuple(f, p))
              g = f32[4] get-tuple-element(o), index=0
              tok = token[] after-all()
              ROOT d = f32[4] add-dependency(g, tok) }""", np.float32([1, 2, 3, 4]), np.float32([2, 2, 2, 2]))
    np.testing.assert_array_equal(out, [2, 4, 6, 8])


def test_large_elementwise_fusion_matches_whole_array_evaluation():
    import ml_dtypes

    text = """
    HloModule m
    fused { p = bf16[4,300,200] parameter(0) c = bf16[] constant(0.7978)
            b = bf16[4,300,200] broadcast(c), dimensions={} m = bf16[4,300,200] multiply(p, b)
            t = bf16[4,300,200] tanh(m) ROOT r = bf16[4,300,200] multiply(t, p) }
    ENTRY e { p = bf16[4,300,200] parameter(0)
              ROOT f = bf16[4,300,200] fusion(p), kind=kLoop, calls=fused }"""
    x = np.random.default_rng(0).standard_normal((4, 300, 200)).astype(ml_dtypes.bfloat16)
    module = parse_module(text)
    out = evaluate(module, [x])
    whole = Evaluator().run_elementwise(module.computation("fused"), [x])  # op by op, not chunked
    xf = x.astype(np.float32)
    m = (xf * np.float32(ml_dtypes.bfloat16(0.7978))).astype(ml_dtypes.bfloat16).astype(np.float32)
    want = (np.tanh(m).astype(ml_dtypes.bfloat16).astype(np.float32) * xf).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.view(np.uint16), whole.view(np.uint16))
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))


def test_async_start_done_with_wrapped_computation_and_sugar():
    out = run("""
    HloModule m
    wrapped { x = f32[4,2] parameter(0) ROOT n = f32[4,2] negate(x) }
    ENTRY e { p = f32[4,2] parameter(0)
              s = ((f32[4,2]), f32[4,2], s32[]) async-start(p), calls=wrapped
              u = ((f32[4,2]), f32[4,2], s32[]) async-update(s)
              ROOT d = f32[4,2] async-done(u) }""", np.ones((4, 2), np.float32))
    np.testing.assert_array_equal(out, -np.ones((4, 2)))


def test_custom_call_identities_and_unknown_target():
    out = run("""ENTRY e { p = f32[3] parameter(0)
        s = f32[3] custom-call(p), custom_call_target="Sharding", sharding={replicated}
        h = f32[3] custom-call(s), custom_call_target="MoveToHost"
        ROOT d = f32[3] custom-call(h), custom_call_target="MoveToDevice" }""", np.float32([1, 2, 3]))
    np.testing.assert_array_equal(out, [1, 2, 3])
    with pytest.raises(InterpreterError, match=r"%c \(custom-call\).*target 'my_kernel'"):
        run('ENTRY e { p = f32[3] parameter(0) '
            'ROOT c = f32[3] custom-call(p), custom_call_target="my_kernel" }', np.float32([1, 2, 3]))
    with pytest.raises(InterpreterError, match=r"%s \(custom-call Sharding\): takes exactly one operand, has 2"):
        run('ENTRY e { p = f32[3] parameter(0) '
            'ROOT s = f32[3] custom-call(p, p), custom_call_target="Sharding" }', np.float32([1, 2, 3]))


def test_register_custom_call_extends_the_table():
    @register_custom_call("test_double")
    def _double(instr, operands, ev):
        return operands[0] * 2

    try:
        out = run('ENTRY e { p = s32[2] parameter(0) '
                  'ROOT c = s32[2] custom-call(p), custom_call_target="test_double" }', np.int32([3, 4]))
        assert out.tolist() == [6, 8]
    finally:
        del CUSTOM_CALL_TARGETS["test_double"]


def test_single_device_collectives():
    out = run("""
    HloModule m
    add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
    ENTRY e { p = f32[4] parameter(0)
      ar = f32[4] all-reduce(p), replica_groups={}, to_apply=add
      ag = f32[4] all-gather(ar), dimensions={0}, replica_groups={{0}}
      rs = f32[4] reduce-scatter(ag), dimensions={0}, replica_groups={{0}}, to_apply=add
      a2a = f32[4] all-to-all(rs), dimensions={0}
      keep = f32[4] collective-permute(a2a), source_target_pairs={{0,0}}
      drop = f32[4] collective-permute(a2a), source_target_pairs={{0,1},{1,0}}
      rid = u32[] replica-id() pid = u32[] partition-id()
      ROOT t = (f32[4], f32[4], u32[], u32[]) tuple(keep, drop, rid, pid) }""", np.float32([1, 2, 3, 4]))
    np.testing.assert_array_equal(out[0], [1, 2, 3, 4])
    np.testing.assert_array_equal(out[1], [0, 0, 0, 0])
    assert out[2] == 0 and out[3] == 0


def test_collective_with_a_real_group_and_send_raise():
    with pytest.raises(InterpreterError, match="replica group of 2 devices"):
        run("""HloModule m
        add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
        ENTRY e { p = f32[4] parameter(0)
                  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add }""",
            np.zeros(4, np.float32))
    with pytest.raises(InterpreterError, match=r"%s \(send\)"):
        run("""ENTRY e { p = f32[4] parameter(0) tok = token[] after-all()
            s = (f32[4], u32[], token[]) send(p, tok), channel_id=1
            ROOT d = token[] send-done(s), channel_id=1 }""", np.zeros(4, np.float32))


def test_rng_is_deterministic_and_in_range():
    text = """ENTRY e { lo = f32[] constant(-2) hi = f32[] constant(3)
        u = f32[1000] rng(lo, hi), distribution=rng_uniform
        a = s32[] constant(5) b = s32[] constant(9)
        i = s32[1000] rng(a, b), distribution=rng_uniform
        z = f32[] constant(0) one = f32[] constant(1)
        n = f32[1000] rng(z, one), distribution=rng_normal
        ROOT t = (f32[1000], s32[1000], f32[1000]) tuple(u, i, n) }"""
    u, i, n = run(text)
    u2, i2, n2 = run(text)
    np.testing.assert_array_equal(u, u2)
    np.testing.assert_array_equal(i, i2)
    assert (u >= -2).all() and (u < 3).all() and set(i.tolist()) == {5, 6, 7, 8}
    assert abs(n.mean()) < 0.15 and 0.85 < n.std() < 1.15
    other = evaluate(parse_module(text), [], rng_seed=1)[0]
    assert not np.array_equal(u, other)


def test_rng_get_and_update_state_advances_by_delta():
    text = "ENTRY e { ROOT s = u64[2] rng-get-and-update-state(), delta=5 }"
    m = parse_module(text)
    ev = Evaluator()  # XLA's initial state is 0x7012395 (what a fresh XLA:CPU executable returns)
    assert ev.evaluate(m, []).tolist() == [0x7012395, 0]
    assert ev.evaluate(m, []).tolist() == [0x7012395 + 5, 0]
    wide = Evaluator(rng_state=(1 << 64) - 2)
    assert wide.evaluate(m, []).tolist() == [(1 << 64) - 2, 0]
    assert wide.evaluate(m, []).tolist() == [3, 1]  # the carry reaches the high word


def test_large_multi_output_loop_fusion():
    text = """
    HloModule m
    fused { p = f32[400,400] parameter(0) q = f32[] parameter(1)
            b = f32[400,400] broadcast(q), dimensions={} a = f32[400,400] add(p, b)
            e = f32[400,400] exponential(p) ROOT t = (f32[400,400], f32[400,400]) tuple(a, e) }
    ENTRY e { p = f32[400,400] parameter(0) q = f32[] parameter(1)
              ROOT f = (f32[400,400], f32[400,400]) fusion(p, q), kind=kLoop, calls=fused }"""
    x = np.random.default_rng(2).standard_normal((400, 400)).astype(np.float32)
    a, e = run(text, x, np.float32(1.5))
    np.testing.assert_array_equal(a, x + np.float32(1.5))
    np.testing.assert_array_equal(e, np.exp(x))


def test_library_math_custom_calls():
    x = np.float32([0.25, -0.5])
    for target, fn in [("Acos", np.arccos), ("Asinh", np.arcsinh), ("Atan", np.arctan), ("Cosh", np.cosh)]:
        out = run(f'ENTRY e {{ p = f32[2] parameter(0) '
                  f'ROOT c = f32[2] custom-call(p), custom_call_target="xla_builder.math.{target}" }}', x)
        np.testing.assert_allclose(out, fn(x), rtol=1e-6)
    nxt = run('ENTRY e { a = f32[2] parameter(0) b = f32[2] parameter(1) '
              'ROOT c = f32[2] custom-call(a, b), custom_call_target="xla_builder.math.NextAfter" }',
              np.float32([1, 0]), np.float32([2, -1]))
    assert nxt[0] == np.float32(1) + np.finfo(np.float32).eps and nxt[1] < 0 and nxt[1] > -1e-44


def test_mesh_replica_groups_count_their_axes():
    with pytest.raises(InterpreterError, match="replica group of 4 devices"):
        run("""ENTRY e { p = f32[4] parameter(0)
            ROOT g = f32[16] all-gather(p), channel_id=1, dimensions={0}, use_global_device_ids=true,
                     replica_groups=mesh['axis_0'=4,'axis_1'=2] {'axis_0'} }""", np.zeros(4, np.float32))
