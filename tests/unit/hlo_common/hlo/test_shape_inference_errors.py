"""Shape inference, negative cases: incompatible operands or attributes give a ShapeInferenceError
(a VerificationError) naming the computation and instruction and saying what was expected."""

from __future__ import annotations

import re

import pytest

from hlo_common.errors import HloParseError, VerificationError
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.shape_inference import ShapeInferenceError, infer_shape
from hlo_common.hlo.verifier import verify_module

PRELUDE = (
    "add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }\n"
    "add3 { a = f32[] parameter(0)  b = f32[] parameter(1)  c = f32[] parameter(2)\n"
    "  ROOT s = f32[] add(a, b) }\n"
    "vec { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[2] broadcast(a) }\n"
    "fcmp { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }\n"
    "scond { s = f32[4] parameter(0)  ROOT c = s32[] constant(0) }\n"
    "sbody { s = f32[4] parameter(0)  ROOT n = f32[4] negate(s) }\n"
    "b2 { x = f32[4] parameter(0)  y = f32[4] parameter(1)  ROOT n = f32[4] negate(x) }\n"
    "b1 { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) }\n"
    "fused { x = f32[3] parameter(0)  ROOT n = f32[3] negate(x) }\n"
)

CASES = [
    # elementwise
    ("a = f32[2] parameter(0)\n b = f32[3] parameter(1)\n ROOT r = f32[2] add(a, b)", "identical dimensions"),
    ("a = f32[2] parameter(0)\n b = s32[2] parameter(1)\n ROOT r = f32[2] add(a, b)",
     "element types f32 and s32"),
    ("a = pred[2] parameter(0)\n ROOT r = pred[2] subtract(a, a)", "arithmetic type"),
    ("a = f32[2] parameter(0)\n ROOT r = f32[2] and(a, a)", "pred or an integral type"),
    ("a = f32[2] parameter(0)\n ROOT r = pred[2] compare(a, a), direction=XX",
     "unknown compare direction 'XX'"),
    ("a = f32[2] parameter(0)\n ROOT r = pred[2] compare(a, a), direction=LT, type=SIGNED",
     "expected FLOAT or TOTALORDER"),
    ("a = s32[2] parameter(0)\n ROOT r = s32[2] floor(a)", "expected float"),
    ("p = pred[3] parameter(0)\n a = f32[2] parameter(1)\n ROOT r = f32[2] select(p, a, a)",
     "expected those of the operands"),
    ("a = c64[2] parameter(0)\n ROOT r = f32[2] bitcast-convert(a)", "expected both complex or both real"),
    ("a = f32[2] parameter(0)\n ROOT r = f32[2] map(a, a), dimensions={0}, to_apply=vec",
     "expected a scalar"),
    # data movement
    ("a = f32[2] parameter(0)\n ROOT r = f32[2,2] broadcast(a), dimensions={2}",
     "expected dimensions in [0, 2)"),
    ("a = f32[2] parameter(0)\n ROOT r = f32[3,2] broadcast(a), dimensions={0}", "expected them equal"),
    ("a = f32[2,3] parameter(0)\n ROOT r = f32[5] reshape(a)", "expected equal counts"),
    ("a = f32[2,3] parameter(0)\n ROOT r = f32[2,2] transpose(a), dimensions={0,0}",
     "expected a permutation"),
    ("a = f32[4] parameter(0)\n ROOT r = f32[2] slice(a), slice={[3:5]}", "out of bounds"),
    ("a = f32[4] parameter(0)\n i = s32[] parameter(1)\n ROOT r = f32[5] dynamic-slice(a, i), "
     "dynamic_slice_sizes={5}", "expected 0..4 (the operand dimension)"),
    ("a = f32[4] parameter(0)\n u = f32[6] parameter(1)\n i = s32[] parameter(2)\n"
     " ROOT r = f32[4] dynamic-update-slice(a, u, i)", "expected at most the operand dimension 4"),
    ("a = f32[2,3] parameter(0)\n b = f32[3,3] parameter(1)\n ROOT r = f32[2,6] concatenate(a, b), "
     "dimensions={1}", "except dimension 1"),
    ("a = f32[4] parameter(0)\n z = f32[] parameter(1)\n ROOT r = f32[4] pad(a, z), padding=0_0_-1",
     "expected >= 0"),
    ("a = f32[4] parameter(0)\n ROOT r = f32[4] reverse(a), dimensions={1}", "expected dimensions in [0, 1)"),
    ("ROOT r = s32[4] iota(), iota_dimension=1", "expected a dimension in [0, 1)"),
    ("a = (f32[2]) parameter(0)\n ROOT r = f32[2] get-tuple-element(a), index=1",
     "expected an index below 1 (the tuple size)"),
    ("a = f32[3,4] parameter(0)\n i = s32[2,1] parameter(1)\n ROOT r = f32[2,5] gather(a, i), "
     "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,5}",
     "out of range, expected 0..4"),
    ("a = f32[3,4] parameter(0)\n i = s32[2,2] parameter(1)\n ROOT r = f32[2,4] gather(a, i), "
     "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}",
     "expected 2 (the index vector size)"),
    ("a = f32[5,4] parameter(0)\n i = s32[3,1] parameter(1)\n u = f32[3,6] parameter(2)\n"
     " ROOT r = f32[5,4] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, "
     "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
     "expected at most the operand's 4"),
    # reductions
    ("a = f32[2,3] parameter(0)\n z = f32[] parameter(1)\n ROOT r = f32[3] reduce(a, z), dimensions={0,0}, "
     "to_apply=add", "repeats a dimension"),
    ("a = f32[2,3] parameter(0)\n z = f32[] parameter(1)\n ROOT r = f32[3] reduce(a, z), dimensions={0}, "
     "to_apply=add3", "takes 3 parameters, expected 2"),
    ("a = f32[2,3] parameter(0)\n z = f32[] parameter(1)\n ROOT r = f32[3] reduce(a, z), dimensions={0}, "
     "to_apply=vec", "expected scalars"),
    ("a = f32[4] parameter(0)\n z = f32[] parameter(1)\n ROOT r = f32[2] reduce-window(a, z), "
     "window={size=2x2}, to_apply=add", "window has 2 dimensions, expected 1 like the input"),
    ("a = f32[4] parameter(0)\n ROOT r = f32[4] sort(a), dimensions={0}, to_apply=fcmp", "expected pred[]"),
    ("a = f32[4] parameter(0)\n ROOT r = (f32[5], s32[5]) topk(a), k=5",
     "expected at most the last dimension 4"),
    ("a = f32[4,6] parameter(0)\n s = f32[3,3] parameter(1)\n z = f32[] parameter(2)\n"
     " ROOT r = f32[4,6] select-and-scatter(a, s, z), window={size=2x2 stride=2x2}, select=fcmp, scatter=add",
     "expected pred[]"),
    # linear algebra
    ("a = f32[2,3] parameter(0)\n b = f32[4,5] parameter(1)\n ROOT r = f32[2,5] dot(a, b), "
     "lhs_contracting_dims={1}, rhs_contracting_dims={0}", "contracting dimension sizes differ"),
    ("a = f32[2,3] parameter(0)\n b = f32[2,3] parameter(1)\n ROOT r = f32[3,3] dot(a, b), "
     "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_contracting_dims={1}", "expected equal counts"),
    ("a = s32[2,3] parameter(0)\n b = s32[3,2] parameter(1)\n ROOT r = s8[2,2] dot(a, b), "
     "lhs_contracting_dims={1}, rhs_contracting_dims={0}", "narrower than the operand type s32"),
    ("x = f32[1,5,3] parameter(0)\n k = f32[3,2,4] parameter(1)\n ROOT r = f32[1,3,4] convolution(x, k), "
     "window={size=3}, dim_labels=b0f_0io->b0f", "expected them to equal the kernel input features 2"),
    ("x = f32[1,5,2] parameter(0)\n k = f32[3,2,4] parameter(1)\n ROOT r = f32[1,4,4] convolution(x, k), "
     "window={size=2}, dim_labels=b0f_0io->b0f", "expected the kernel's spatial dimensions 3"),
    ("a = c64[8] parameter(0)\n ROOT r = c64[5] fft(a), fft_type=RFFT, fft_length={8}",
     "expected f32 or f64"),
    ("a = f32[4,4] parameter(0)\n b = f32[3,3] parameter(1)\n ROOT r = f32[3,3] triangular-solve(a, b), "
     "left_side=true, lower=true, transpose_a=NO_TRANSPOSE", "the shared dimension differs"),
    ("x = f32[2,3] parameter(0)\n s = f32[3] parameter(1)\n"
     " ROOT r = f32[2,3] batch-norm-inference(x, s, s, s, s), "
     "epsilon=0.001, feature_index=2", "expected a dimension in [0, 2)"),
    # calls and control flow
    ("a = f32[] parameter(0)\n ROOT r = f32[] call(a), to_apply=add", "takes 2 parameters, expected 1"),
    ("a = f32[4] parameter(0)\n ROOT r = f32[4] while(a), condition=scond, body=sbody", "expected pred[]"),
    ("i = s32[] parameter(0)\n a = f32[4] parameter(1)\n ROOT r = f32[4] conditional(i, a, a), "
     "branch_computations={b1, b2}", "takes 2 parameters, expected 1"),
    ("a = f32[4] parameter(0)\n ROOT r = f32[3] fusion(a), kind=kLoop, calls=fused",
     "operand 0 is f32[4] but parameter 0 of fused is f32[3]"),
    ("a = f32[4] parameter(0)\n ROOT r = token[] after-all(a)", "is f32[4], expected token[]"),
    ("a = s32[] parameter(0)\n ROOT r = s32[4] rng(a, a), distribution=rng_normal", "floating-point type"),
    ("a = f32[4] parameter(0)\n ROOT r = f32[4] custom-call(a), custom_call_target=\"x\", "
     "operand_layout_constraints={f32[4]{0}, f32[4]{0}}", "expected 1 (one per operand)"),
    # collectives
    ("a = f32[2,3] parameter(0)\n ROOT r = f32[2,9] all-gather(a), replica_groups={{0,1}}, dimensions={1}",
     "implies 3 shards, expected the replica group size 2"),
    ("a = f32[7] parameter(0)\n ROOT r = f32[4] reduce-scatter(a), replica_groups={{0,1}}, dimensions={0}, "
     "to_apply=add", "expected a multiple of the 2 shards"),
]


@pytest.mark.parametrize("body, fragment", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_inference_error_names_instruction(body: str, fragment: str) -> None:
    m = parse_module(f"HloModule m\n{PRELUDE}ENTRY e {{\n {body}\n}}")
    with pytest.raises(VerificationError) as info:
        verify_module(m)
    err = info.value
    assert isinstance(err, ShapeInferenceError), err
    assert (err.computation, err.instruction) == ("e", "r"), str(err)
    assert "expected" in str(err) and fragment in str(err), str(err)
    # parsed from text, so its place comes first (issue 22: it was missing for these errors)
    assert re.fullmatch(r"<string>:\d+:\d+", err.place or ""), str(err)
    assert str(err).startswith(f"{err.place}: in computation e, instruction %r: ")


@pytest.mark.parametrize("body", [
    "ROOT r = s32[4] iota(), iota_dimension=0",
    "a = f32[4] parameter(0)\n ROOT r = f32[2,2] reshape(a)",
    "a = f32[4] parameter(0)\n ROOT r = f32[4] custom-call(a), custom_call_target=\"foo\"",
    "a = f32[4] parameter(0)\n ROOT r = s32[4] convert(a)",
    "a = f32[4] parameter(0)\n ROOT r = f32[4] parameter(1)",
])
def test_shape_that_only_text_can_give(body: str) -> None:
    m = parse_module(f"ENTRY e {{\n {body}\n}}")
    r = m.entry.root
    r.shape = None
    with pytest.raises(ShapeInferenceError, match=rf"instruction %r: {r.opcode}: .*cannot be inferred.*write it out"):
        infer_shape(r)


def test_pred_conditional_with_three_branches() -> None:
    # the parser refuses branch_computations= on a pred index (as XLA's does), so the IR is made
    # by changing the index's type after parsing
    m = parse_module(f"HloModule m\n{PRELUDE}ENTRY e {{\n p = s32[] parameter(0)\n a = f32[4] parameter(1)\n "
                     "ROOT r = f32[4] conditional(p, a, a, a), branch_computations={b1, b1, b1}\n}")
    m.entry.parameters[0].shape = parse_module("ENTRY e { ROOT p = pred[] parameter(0) }").entry.root.shape
    with pytest.raises(ShapeInferenceError, match="found 3 branches for a pred branch index, expected 2"):
        verify_module(m)


def test_parser_reports_inference_errors() -> None:
    with pytest.raises(HloParseError, match="expected identical dimensions"):
        parse_module("ENTRY e { a = f32[2] parameter(0)  b = f32[3] parameter(1)  ROOT r = add(a, b) }")


def test_error_without_computation_names_instruction() -> None:
    m = parse_module("ENTRY e { a = f32[2] parameter(0)  ROOT r = f32[2] negate(a) }")
    bad = HloInstruction("lonely", "add", None, [m.entry.root, m.entry.parameters[0].users[0]], {})
    bad.operands[1] = HloInstruction("x", "parameter", None)  # a parameter without a shape
    with pytest.raises(ShapeInferenceError, match=r"instruction %lonely \(add\)"):
        infer_shape(bad)


def test_malformed_attribute_is_a_project_error() -> None:
    m = parse_module("ENTRY e { a = f32[2,3] parameter(0)\n"
                     "  ROOT r = f32[3,2] transpose(a), dimensions={1,0} }")
    m.entry.root.attrs["dimensions"] = "1,0"  # a pass that stored text instead of a tuple
    with pytest.raises(ShapeInferenceError, match="dimensions"):
        verify_module(m)
