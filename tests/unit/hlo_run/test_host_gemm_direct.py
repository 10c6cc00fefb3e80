"""GEMM fusions run directly on the host (hlo_run.host_gemm_direct) against their interpreter
evaluation: the same bits, the result written into the output buffer, the fusions without a plan
named.

Each module below is a fusion computation as XLA:GPU's gemm-fusion pass writes them (the bench
set's MLP and transformer layer: a bias epilogue in f32 and bf16, a split-K batch, a scaled
attention product with transposed operands, a layer norm's scale and shift in the prologue, a
convert to bf16 after the bias). `run_gemm_fusion(..., direct=False)` evaluates the same
computation with the interpreter, its dot through the same host GEMM, so the two must agree bit
for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.hlo.parser import parse_module
from hlo_run.host_blas import sgemm_batched
from hlo_run.host_gemm_direct import direct_plan
from hlo_run.host_gemm_fusion import run_gemm_fusion

BIAS_F32 = """HloModule f
ENTRY e {
  p0 = f32[200,96]{1,0} parameter(0)
  p1 = f32[96,130]{1,0} parameter(1)
  d = f32[200,130]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  p2 = f32[130]{0} parameter(2)
  b = f32[200,130]{1,0} broadcast(p2), dimensions={1}
  ROOT a = f32[200,130]{1,0} add(d, b)
}"""
BIAS_BF16 = BIAS_F32.replace("f32", "bf16")
SPLIT_K = """HloModule f
ENTRY e {
  p0 = bf16[150,2,300]{2,1,0} parameter(0)
  p1 = bf16[2,300,70]{2,1,0} parameter(1)
  ROOT d = f32[2,150,70]{2,1,0} dot(p0, p1), lhs_batch_dims={1}, lhs_contracting_dims={2}, """ \
    """rhs_batch_dims={0}, rhs_contracting_dims={1}
}"""
SCALED_ATTENTION = """HloModule f
ENTRY e {
  p0 = f32[2,40,3,16]{3,2,1,0} parameter(0)
  t0 = f32[2,3,40,16]{3,2,1,0} transpose(p0), dimensions={0,2,1,3}
  p1 = f32[2,40,3,16]{3,2,1,0} parameter(1)
  t1 = f32[2,3,40,16]{3,2,1,0} transpose(p1), dimensions={0,2,1,3}
  d = f32[2,3,40,40]{3,2,1,0} dot(t0, t1), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, """ \
    """rhs_batch_dims={0,1}, rhs_contracting_dims={3}
  c = f32[] constant(0.125)
  b = f32[2,3,40,40]{3,2,1,0} broadcast(c), dimensions={}
  ROOT m = f32[2,3,40,40]{3,2,1,0} multiply(d, b)
}"""
NORM_PROLOGUE = """HloModule f
ENTRY e {
  p0 = f32[100,64]{1,0} parameter(0)
  p1 = f32[64]{0} parameter(1)
  b1 = f32[100,64]{1,0} broadcast(p1), dimensions={1}
  m = f32[100,64]{1,0} multiply(p0, b1)
  p2 = f32[64]{0} parameter(2)
  b2 = f32[100,64]{1,0} broadcast(p2), dimensions={1}
  x = f32[100,64]{1,0} add(m, b2)
  p3 = f32[64,300]{1,0} parameter(3)
  ROOT d = f32[100,300]{1,0} dot(x, p3), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
BIAS_CONVERT = """HloModule f
ENTRY e {
  p0 = f32[64,500]{1,0} parameter(0)
  p1 = f32[500,48]{1,0} parameter(1)
  d = f32[64,48]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  p2 = f32[64]{0} parameter(2)
  b = f32[64,48]{1,0} broadcast(p2), dimensions={0}
  a = f32[64,48]{1,0} add(d, b)
  t = f32[64,48]{1,0} tanh(a)
  ROOT c = bf16[64,48]{1,0} convert(t)
}"""
SCALE_BIAS = """HloModule f
ENTRY e {
  p0 = f32[3,50,600]{2,1,0} parameter(0)
  p1 = f32[3,600,70]{2,1,0} parameter(1)
  d = f32[3,50,70]{2,1,0} dot(p0, p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, """ \
    """rhs_batch_dims={0}, rhs_contracting_dims={1}
  c = f32[] constant(0.3)
  s = f32[3,50,70]{2,1,0} broadcast(c), dimensions={}
  m = f32[3,50,70]{2,1,0} multiply(s, d)
  p2 = f32[70]{0} parameter(2)
  b = f32[3,50,70]{2,1,0} broadcast(p2), dimensions={2}
  ROOT a = f32[3,50,70]{2,1,0} add(m, b)
}"""
ATTENTION_VALUES = """HloModule f
ENTRY e {
  p0 = f32[2,3,40,40]{3,2,1,0} parameter(0)
  p1 = f32[2,40,3,16]{3,2,1,0} parameter(1)
  t1 = f32[2,3,40,16]{3,2,1,0} transpose(p1), dimensions={0,2,1,3}
  d = f32[2,3,40,16]{3,2,1,0} dot(p0, t1), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, """ \
    """rhs_batch_dims={0,1}, rhs_contracting_dims={2}
  ROOT t = f32[2,40,3,16]{3,2,1,0} transpose(d), dimensions={0,2,1,3}
}"""
TRANSPOSED_ROOT = """HloModule f
ENTRY e {
  p0 = f32[30,20]{1,0} parameter(0)
  p1 = f32[20,10]{1,0} parameter(1)
  d = f32[30,10]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[10,30]{1,0} transpose(d), dimensions={1,0}
}"""
CONVERT_ROOT = """HloModule f
ENTRY e {
  p0 = f32[2,2,128,32]{3,2,1,0} parameter(0)
  c = f32[] constant(0.353553385)
  b = f32[2,2,128,32]{3,2,1,0} broadcast(c), dimensions={}
  m = f32[2,2,128,32]{3,2,1,0} multiply(p0, b)
  p1 = bf16[2,32,2,4,8]{4,3,2,1,0} parameter(1)
  t = bf16[2,2,32,4,8]{4,3,2,1,0} transpose(p1), dimensions={0,2,1,3,4}
  r = bf16[2,2,128,8]{3,2,1,0} bitcast(t)
  v = f32[2,2,128,8]{3,2,1,0} convert(r)
  d = f32[2,2,32,8]{3,2,1,0} dot(m, v), lhs_batch_dims={0,1}, lhs_contracting_dims={2}, """ \
    """rhs_batch_dims={0,1}, rhs_contracting_dims={2}
  ROOT o = bf16[2,2,32,8]{3,2,1,0} convert(d)
}"""  # nnx_llama_bf16_grad's attention gradient (a unary epilogue op, a transposed lhs)
DOT_READ_TWICE = """HloModule f
ENTRY e {
  p0 = f32[50,40]{1,0} parameter(0)
  p1 = f32[40,30]{1,0} parameter(1)
  d = f32[50,30]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  p2 = f32[30]{0} parameter(2)
  b = f32[50,30]{1,0} broadcast(p2), dimensions={1}
  a = f32[50,30]{1,0} add(d, b)
  ROOT m = f32[50,30]{1,0} multiply(a, d)
}"""  # the bias add is not the dot's only user: the store must keep the plain sums
DIRECT = {"bias_f32": BIAS_F32, "bias_bf16": BIAS_BF16, "split_k": SPLIT_K,
          "scaled_attention": SCALED_ATTENTION, "norm_prologue": NORM_PROLOGUE, "bias_convert": BIAS_CONVERT,
          "scale_bias": SCALE_BIAS, "attention_values": ATTENTION_VALUES, "convert_root": CONVERT_ROOT,
          "dot_read_twice": DOT_READ_TWICE}
# What the GEMM's store applies (the rest runs per block of rows): (alpha, bias) parameter names
FOLDED = {"bias_f32": (None, "p2"), "scaled_attention": ("c", None), "scale_bias": ("c", "p2"),
          "bias_bf16": (None, None), "bias_convert": (None, None), "dot_read_twice": (None, None)}


def _args(text: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    params = parse_module(text, "t").entry.parameters
    return [rng.standard_normal(p.shape.dims).astype(p.shape.element_type.np_dtype) * 4 for p in params]


@pytest.mark.parametrize("name", sorted(DIRECT))
def test_direct_fusion_equals_the_interpreter_and_writes_the_output_buffer(name):
    text = DIRECT[name]
    module = parse_module(text, name)
    assert direct_plan(module) is not None
    args = _args(text)
    want = run_gemm_fusion(text, name, args, direct=False)
    root = module.entry.root.shape
    out = np.full(root.dims, np.nan, root.element_type.np_dtype)
    got = run_gemm_fusion(text, name, args, out=out)
    assert got is out
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))
    fresh = run_gemm_fusion(text, name, args)  # no output buffer given: a new array, same bits
    assert np.array_equal(fresh.view(np.uint8), got.view(np.uint8))


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_a_scale_and_a_column_bias_run_in_the_gemm_store(name):
    plan = direct_plan(parse_module(DIRECT[name], name))
    assert tuple(x and x.name for x in (plan.alpha, plan.bias)) == FOLDED[name]


def test_the_store_keeps_a_negative_zero_when_there_is_no_bias():
    """A bias of -0.0 stands for none: 0 * -1 stays -0.0 (an added +0.0 would make it +0.0)."""
    a, b = np.full((1, 5, 3), -1, np.float32), np.zeros((1, 3, 40), np.float32)
    out = np.ones((1, 5, 40), np.float32)
    sgemm_batched(a, b, out, alpha=-1.0)
    assert np.all(out == 0) and np.all(np.signbit(out))
    sgemm_batched(a, b, out, alpha=-1.0, bias=np.arange(40, dtype=np.float32))
    assert np.array_equal(out[0, 0], np.arange(40, dtype=np.float32)) and not np.signbit(out[0, 0, 0])


def test_fusions_without_a_plan_are_evaluated_by_the_interpreter():
    """A transposed root that moves the last dim: the GEMM could not write rows of it."""
    assert direct_plan(parse_module(TRANSPOSED_ROOT, "t")) is None
    args = _args(TRANSPOSED_ROOT)
    got = run_gemm_fusion(TRANSPOSED_ROOT, "t", args, out=np.empty((10, 30), np.float32))
    np.testing.assert_allclose(got, (args[0] @ args[1]).T, rtol=1e-5, atol=1e-4)


def test_an_output_view_that_does_not_fit_gets_a_new_array():
    args = _args(BIAS_F32)
    strided = np.empty((130, 200), np.float32).T  # the logical view of a column-major buffer
    got = run_gemm_fusion(BIAS_F32, "b", args, out=strided)
    assert got is not strided
    assert np.array_equal(got, run_gemm_fusion(BIAS_F32, "b", args, direct=False))


RESIDUAL = """HloModule f
ENTRY e {
  p0 = f32[100,64]{1,0} parameter(0)
  p1 = f32[64,48]{1,0} parameter(1)
  d = f32[100,48]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  p2 = f32[100,48]{1,0} parameter(2)
  ROOT a = f32[100,48]{1,0} add(d, p2)
}"""


def test_an_output_buffer_shared_with_an_epilogue_operand_is_not_written_early():
    """Buffer assignment may give the fusion's output the buffer of a residual it adds (an
    elementwise epilogue operand, as a model under lax.scan gets): the GEMM must not write its
    product there before the epilogue has read the residual (eqx_gru_scan_grad was off by 1.6)."""
    args = _args(RESIDUAL)
    want = run_gemm_fusion(RESIDUAL, "r", [a.copy() for a in args], direct=False)
    got = run_gemm_fusion(RESIDUAL, "r", args, out=args[2])  # the output is the residual's buffer
    assert direct_plan(parse_module(RESIDUAL, "r")) is not None
    assert np.array_equal(got, want)


# Epilogues that compile into one loop (hlo_run.host_gemm_epilogue): their ops, by module.
COMPILED = {"bias_bf16": ("convert", "add"), "convert_root": ("convert",),
            "dot_read_twice": ("add", "multiply")}


@pytest.mark.parametrize("name", sorted(DIRECT))
def test_epilogues_of_region_ops_compile_and_give_the_handlers_bits(name):
    """The compiled loop runs every block (the handlers are made to fail) and its bits are the
    interpreter's; an epilogue with an op region_jit does not compile (tanh) keeps the handlers."""
    text = DIRECT[name]
    plan = direct_plan(parse_module(text, name))
    assert (plan.compiled and tuple(op[0] for op in plan.compiled.ops)) == COMPILED.get(name, None)
    if plan.compiled is None:
        return
    _handlers_fail(plan)
    args = _args(text)
    got = plan.run(args, None)
    want = run_gemm_fusion(text, name, args, direct=False)
    assert np.array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))


def _handlers_fail(plan) -> None:
    def fail(*_):
        raise AssertionError("a handler ran")

    plan.handlers = {key: fail for key in plan.handlers}


def test_a_compiled_bf16_epilogue_keeps_special_values():
    """Infinities, signed zeros and NaNs in the bias and the operands: the same values as the
    interpreter's (a NaN stays a NaN; which NaN is not compared)."""
    args = _args(BIAS_BF16, seed=3)
    specials = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 3e38], np.float32)
    args[2][:len(specials)] = specials.astype(args[2].dtype)  # the bias
    args[0][5, :3] = specials[:3].astype(args[0].dtype)  # a row of inf and NaN sums
    plan = direct_plan(parse_module(BIAS_BF16, "b"))
    _handlers_fail(plan)
    got = plan.run(args, None).astype(np.float32)
    want = run_gemm_fusion(BIAS_BF16, "b", args, direct=False).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(want)
    assert np.array_equal(got[keep].view(np.uint32), want[keep].view(np.uint32))


def test_with_an_epilogue_the_gemm_leaves_the_output_alone_and_hands_each_block_of_sums():
    """With an epilogue the GEMM writes no row of `out`; each block the epilogue gets holds the
    sums of its rows (all rows covered once)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 250, 70)).astype(np.float32)
    b = rng.standard_normal((2, 70, 90)).astype(np.float32)
    out = np.full((2, 250, 90), np.nan, np.float32)
    seen = np.full(out.shape, np.nan, np.float32)
    want = np.empty_like(out)
    sgemm_batched(a, b, want)

    def block(i, r0, r1, rows):
        seen[i, r0:r1] = rows

    sgemm_batched(a, b, out, epilogue=block)
    assert np.all(np.isnan(out))
    assert np.array_equal(seen, want)


@pytest.mark.parametrize("rows", [100, 40000])
def test_a_prologue_of_region_ops_runs_as_one_compiled_loop_over_row_blocks(rows, monkeypatch):
    """A layer norm's scale and shift of the dot's lhs: one compiled chain (40000 rows: three row
    blocks, on two threads), no handler evaluating its members, the interpreter's bits."""
    text = NORM_PROLOGUE.replace("[100,", f"[{rows},")
    plan = direct_plan(parse_module(text, "n"))
    [(compiled, chain)] = plan.chains.values()
    assert [m.name for m in chain] == ["m", "x"]
    evaluate = plan.ev.evaluate_instruction

    def only_outside(instr, ops):
        assert instr.name not in ("m", "x"), "a chain member ran through its handler"
        return evaluate(instr, ops)

    monkeypatch.setattr(plan.ev, "evaluate_instruction", only_outside)
    args = _args(text)
    got = plan.run(args, None)
    want = run_gemm_fusion(text, "n", args, direct=False)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
