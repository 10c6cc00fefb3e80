"""Thunk emission: which HLO instructions become which thunks, with which slices (XLA's ThunkEmitter).

Kernels come from a fake backend here (the emitters have their own tests); every expected slice
is read from the buffer assignment the compile produced, never from the emitter's output.
"""

from __future__ import annotations

import pytest
from codegen_testlib import WHILE, compile_text

from hlo_common.errors import HloError
from hlo_common.manifest.thunks import (
    BufferSlice, ConditionalThunk, CopyThunk, GemmThunk, KernelThunk, MemsetThunk, WhileThunk, walk,
)
from hlo_codegen.thunks import thunk_sequence_to_string


def slice_of(result, name, index=()):
    instr = _find(result.module, name)
    s = result.assignment.get_slice(instr, index)
    return BufferSlice(s.index, s.offset, s.size)


def _find(module, name):
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.name == name:
                return instr
    raise KeyError(name)


def kinds(result):
    return [t.kind for t in result.manifest.thunks.thunks]


def test_lone_instruction_is_wrapped_into_a_kernel_with_operands_then_outputs():
    result, backend = compile_text("""HloModule m
ENTRY e { p = f32[8] parameter(0) q = f32[8] parameter(1) ROOT a = f32[8] add(p, q) }""")
    (thunk,) = result.manifest.thunks.thunks
    assert isinstance(thunk, KernelThunk) and thunk.kernel == "wrapped_add"
    assert [c[0] for c in backend.calls] == ["wrapped_add"]
    fusion = _find(result.module, "wrapped_add")
    assert fusion.opcode == "fusion" and fusion.attrs["kind"] == "kLoop"
    assert fusion.fused_computation().root.opcode == "add"
    assert [a.slice for a in thunk.args] == [slice_of(result, "p"), slice_of(result, "q"),
                                              slice_of(result, "wrapped_add")]
    assert [a.written for a in thunk.args] == [False, False, True]
    assert [a.shape for a in thunk.args] == ["f32[8]{0}"] * 3


def test_an_operand_used_twice_is_passed_once():
    result, _ = compile_text("HloModule m\nENTRY e { p = f32[8] parameter(0) ROOT a = f32[8] add(p, p) }")
    (thunk,) = result.manifest.thunks.thunks
    assert len(thunk.args) == 2 and [a.written for a in thunk.args] == [False, True]


def test_in_place_output_shares_the_operand_parameter():
    result, backend = compile_text("""HloModule m
ENTRY e {
  p = f32[8] parameter(0) u = f32[2] parameter(1) i = s32[] parameter(2)
  n = f32[8] negate(p)
  ROOT d = f32[8] dynamic-update-slice(n, u, i)
}""")
    dus = result.manifest.thunks.thunks[1]
    slices = [slice_of(result, x) for x in ("wrapped_negate", "u", "i", "wrapped_dynamic-update-slice")]
    distinct = list(dict.fromkeys(slices))
    assert [a.slice for a in dus.args] == distinct
    out_slice = slices[-1]
    assert [a.written for a in dus.args] == [s == out_slice for s in distinct]
    assert dus.kernel == "wrapped_dynamic_update_slice"  # sanitized for PTX / LLVM


def test_dot_becomes_a_gemm_with_matrix_layouts():
    result, backend = compile_text("""HloModule m
ENTRY e { a = f32[2,3] parameter(0) b = f32[3,4]{0,1} parameter(1)
  ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0} }""")
    (g,) = result.manifest.thunks.thunks
    assert isinstance(g, GemmThunk) and not backend.calls
    assert (g.lhs, g.rhs, g.output) == (slice_of(result, "a"), slice_of(result, "b"), slice_of(result, "d"))
    c = g.config
    assert (c.lhs_matrix.rows, c.lhs_matrix.cols, c.lhs_matrix.order) == (2, 3, "row_major")
    assert (c.rhs_matrix.rows, c.rhs_matrix.cols, c.rhs_matrix.order) == (3, 4, "column_major")
    assert (c.output_matrix.rows, c.output_matrix.cols, c.output_matrix.leading_dim) == (2, 4, 4)
    assert (c.alpha_real, c.beta, c.epilogue) == (1.0, 0.0, "DEFAULT")


def test_batched_dot_gemm_and_dots_cublas_cannot_do():
    result, _ = compile_text("""HloModule m
ENTRY e { a = bf16[5,2,3] parameter(0) b = bf16[5,3,4] parameter(1)
  ROOT d = f32[5,2,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0},
    lhs_contracting_dims={2}, rhs_contracting_dims={1} }""")
    (g,) = result.manifest.thunks.thunks
    assert g.config.output_matrix.batch == 5 and g.config.lhs_matrix.batch_stride == 6
    for text in ("ENTRY e { a = s32[2,3] parameter(0) b = s32[3,4] parameter(1)\n"
                 "ROOT d = s32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0} }",
                 # the batch dim (1) most minor: no MatrixLayout (a batch between the rows and
                 # the contracting dim, {2,1,0}, is one, as in XLA)
                 "ENTRY e { a = f32[2,5,3]{1,2,0} parameter(0) b = f32[5,3,4] parameter(1)\n"
                 "ROOT d = f32[5,2,4] dot(a, b), lhs_batch_dims={1}, rhs_batch_dims={0},"
                 " lhs_contracting_dims={2}, rhs_contracting_dims={1} }"):
        result, backend = compile_text("HloModule m\n" + text)
        assert kinds(result) == ["kKernel"] and backend.calls[0][0] == "wrapped_dot"


def test_cublas_gemm_custom_call_with_beta_and_workspace():
    result, _ = compile_text("""HloModule m
ENTRY e { a = f32[2,3] parameter(0) b = f32[3,4] parameter(1) c = f32[2,4] parameter(2)
  n = f32[2,4] negate(c)
  g = (f32[2,4], s8[64]) custom-call(a, b, n), custom_call_target="__cublas$gemm",
    output_to_operand_aliasing={{0}: (2, {})},
    backend_config={"gemm_backend_config":{"alpha_real":2,"alpha_imag":0,"beta":0.5,
      "dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],
      "lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"epilogue":"DEFAULT"}}
  ROOT r = f32[2,4] get-tuple-element(g), index=0 }""")
    g = result.manifest.thunks.thunks[-1]
    assert isinstance(g, GemmThunk)
    assert (g.config.alpha_real, g.config.beta) == (2.0, 0.5)
    assert g.c == slice_of(result, "wrapped_negate") and g.output == slice_of(result, "g", (0,))
    assert g.workspace == slice_of(result, "g", (1,)) and g.workspace.size == 64


def test_bad_gemm_custom_call_names_the_instruction():
    with pytest.raises(HloError, match="%g: a gemm with beta=0 and epilogue DEFAULT takes 2 operands"):
        compile_text("""HloModule m
ENTRY e { a = f32[2,3] parameter(0) b = f32[3,4] parameter(1) c = f32[2,4] parameter(2)
  ROOT g = f32[2,4] custom-call(a, b, c), custom_call_target="__cublas$gemm",
    backend_config={"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],
    "rhs_contracting_dimensions":["0"]}}} }""")


@pytest.mark.parametrize("body, expected", [
    ("p = f32[2,3] parameter(0)\n ROOT c = f32[2,3] copy(p)", "kCopy"),
    ("p = f32[2,3] parameter(0)\n ROOT c = f32[2,3]{0,1} copy(p)", "kKernel"),
    ("p = f32[2,3] parameter(0)\n ROOT r = f32[3,2] reshape(p)", "kCopy"),
    ("p = f32[2,3]{0,1} parameter(0)\n ROOT r = f32[3,2] reshape(p)", "kKernel"),
    ("p = f32[2,3] parameter(0)\n ROOT t = f32[3,2]{0,1} transpose(p), dimensions={1,0}", "kCopy"),
    ("p = f32[2,3] parameter(0)\n ROOT t = f32[3,2] transpose(p), dimensions={1,0}", "kKernel"),
    ("p = f32[2,3] parameter(0)\n ROOT b = s32[2,3] bitcast-convert(p)", "kCopy"),
    ("ROOT r = u32[] replica-id()", "kMemzero"),
    ("p = f32[4] parameter(0)\n ROOT a = f32[4] all-reduce(p), to_apply=add", "kCopy"),
    ("p = f32[4] parameter(0)\n ROOT s = f32[4] custom-call(p), custom_call_target=\"Sharding\"", "kCopy"),
    ("p = s4[4] parameter(0)\n ROOT c = s4[4] copy(p)", "kCopy"),
])
def test_copies_memcpy_like_ops_and_single_device_ops(body, expected):
    add = "add { x = f32[] parameter(0) y = f32[] parameter(1) ROOT s = f32[] add(x, y) }\n"
    result, _ = compile_text(f"HloModule m\n{add}ENTRY e {{\n {body}\n}}")
    assert kinds(result) == [expected]


@pytest.mark.parametrize("const, shape, kind, value", [
    ("f32[] constant(0)", "f32[6]", "kMemzero", 0),
    ("f32[] constant(1)", "f32[6]", "kMemset32BitValue", 0x3F800000),
    ("bf16[] constant(1)", "bf16[6]", "kMemset32BitValue", 0x3F803F80),
    ("s8[] constant(-1)", "s8[8]", "kMemset32BitValue", 0xFFFFFFFF),
    ("pred[] constant(false)", "pred[3]", "kMemzero", 0),
])
def test_broadcast_of_a_constant_is_a_memset(const, shape, kind, value):
    dims = shape[shape.index("["):]
    result, backend = compile_text(f"""HloModule m
f {{ c = {const} ROOT b = {shape} broadcast(c), dimensions={{}} }}
ENTRY e {{ ROOT f = {shape} fusion(), kind=kLoop, calls=f }}""".replace("{dims}", dims))
    (t,) = result.manifest.thunks.thunks
    assert isinstance(t, MemsetThunk) and (t.kind, t.value) == (kind, value) and not backend.calls
    assert t.destination == slice_of(result, "f")


def test_memset_that_does_not_fill_whole_words_needs_a_kernel():
    result, _ = compile_text("""HloModule m
f { c = s8[] constant(3) ROOT b = s8[7] broadcast(c), dimensions={} }
ENTRY e { ROOT f = s8[7] fusion(), kind=kLoop, calls=f }""")
    assert kinds(result) == ["kKernel"]



def test_while_has_condition_and_body_sequences():
    result, _ = compile_text(WHILE)
    loops = [t for t in result.manifest.thunks.thunks if isinstance(t, WhileThunk)]
    assert len(loops) == 1
    loop = loops[0]
    assert loop.predicate == slice_of(result, "wrapped_compare") and loop.trip_count == 5
    assert [t.kernel for t in loop.condition.thunks] == ["wrapped_compare"]
    body_kernels = {t.kernel for t in loop.body.thunks if isinstance(t, KernelThunk)}
    assert body_kernels == {"wrapped_add", "wrapped_negate"}
    # copy insertion: the loop state may not live in the read-only parameter / constant buffers
    assert all(isinstance(t, CopyThunk) for t in result.manifest.thunks.thunks if t is not loop)
    state = {slice_of(result, "loop", (i,)) for i in (0, 1)}
    assert state == {slice_of(result, "t", (0,)), slice_of(result, "t", (1,))}


def test_conditional_branches_by_pred_and_by_index():
    branches = "b{k} {{ p = f32[4] parameter(0) ROOT n = f32[4] {op}(p) }}\n"
    ops = ["negate", "abs", "sine"]
    text = "HloModule c\n" + "".join(branches.format(k=k, op=op) for k, op in enumerate(ops))
    pred = text + """ENTRY e { s = pred[] parameter(0) a = f32[4] parameter(1)
  ROOT c = f32[4] conditional(s, a, a), true_computation=b0, false_computation=b1 }"""
    result, _ = compile_text(pred)
    (cond,) = [t for t in result.manifest.thunks.thunks if isinstance(t, ConditionalThunk)]
    assert cond.index_is_bool and cond.branch_index == slice_of(result, "s")
    assert [[t.kernel for t in b.thunks] for b in cond.branches] == [["wrapped_negate"], ["wrapped_abs"]]
    index = text + """ENTRY e { s = s32[] parameter(0) a = f32[4] parameter(1)
  ROOT c = f32[4] conditional(s, a, a, a), branch_computations={b0, b1, b2} }"""
    result, _ = compile_text(index)
    (cond,) = [t for t in result.manifest.thunks.thunks if isinstance(t, ConditionalThunk)]
    assert not cond.index_is_bool and len(cond.branches) == 3
    assert cond.children()[2][0] == "branch_2"


def test_call_is_inlined_and_tuples_bitcasts_constants_make_no_thunks():
    result, _ = compile_text("""HloModule m
f { x = f32[4] parameter(0) ROOT n = f32[4] negate(x) }
ENTRY e { p = f32[4] parameter(0) c = f32[4] call(p), to_apply=f
  k = f32[4] constant({1, 2, 3, 4}) b = f32[2,2] bitcast(k)
  t = (f32[4], f32[2,2]) tuple(c, b) ROOT g = f32[4] get-tuple-element(t), index=0 }""")
    assert kinds(result) == ["kKernel"]
    assert result.manifest.thunks.thunks[0].kernel == "wrapped_negate"


@pytest.mark.parametrize("instr, message", [
    ("ROOT c = f32[4] custom-call(p), custom_call_target=\"foo\"",
     r"%c: custom-call \(custom_call_target=\"foo\"\)"),
    ("a = token[] after-all() ROOT i = (f32[4], token[]) infeed(a)", "%i: infeed is not supported"),
])
def test_unsupported_instructions_are_named(instr, message):
    with pytest.raises(HloError, match=message):
        compile_text(f"HloModule m\nENTRY e {{ p = f32[4] parameter(0) {instr} }}")


def test_thunk_sequence_text_follows_xla():
    result, _ = compile_text(WHILE)
    text = thunk_sequence_to_string(result.manifest.thunks)
    lines = text.splitlines()
    top = [line for line in lines if not line.startswith(" ")]
    assert [line.split("\t")[0] for line in top] == ["001: kCopy ", "002: kCopy ", "003: kWhile"]
    assert "  condition:" in lines and "  body:" in lines
    kernel_line = next(line for line in lines if "kernel=wrapped_compare" in line)
    assert kernel_line.startswith("  004: kKernel\tkernel=wrapped_compare, "
                                  "profile_annotation=wrapped_compare, launch dimensions=blocks: "
                                  "{1, 1, 1}, threads/block: {128, 1, 1}, cluster_dim=nullopt")
    ids = [int(line.strip()[:3]) for line in lines if line.strip()[:3].isdigit()]
    assert ids == list(range(1, len(list(walk(result.manifest.thunks))) + 1))


def test_control_flow_layout_mismatch_is_refused():
    text = """HloModule m
b { p = f32[2,3]{1,0} parameter(0) ROOT n = f32[2,3]{1,0} negate(p) }
ENTRY e { s = pred[] parameter(0) a = f32[2,3]{0,1} parameter(1)
  ROOT c = f32[2,3]{1,0} conditional(s, a, a), true_computation=b, false_computation=b }"""
    with pytest.raises(HloError, match=r"%c \(conditional\): operand 1 is f32\[2,3\]\{0,1\}, expected "
                                        r"f32\[2,3\]\{1,0\} \(layouts must match"):
        compile_text(text)


def test_xla_builder_decomposition_runs_its_computation_inline():
    result, _ = compile_text("""HloModule m
cosh { x = f32[4] parameter(0) e = f32[4] exponential(x) ROOT n = f32[4] negate(e) }
ENTRY e { p = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(p), custom_call_target="xla_builder.math.Cosh", called_computations={cosh} }""")
    assert [t.kernel for t in result.manifest.thunks.thunks] == ["wrapped_exponential", "wrapped_negate"]
    assert _find(result.module, "c").opcode == "call"


def test_identical_fusions_share_one_kernel():
    result, backend = compile_text("""HloModule m
f1 { a = f32[8] parameter(0) b = f32[8] parameter(1) ROOT s = f32[8] add(a, b) }
f2 { x = f32[8] parameter(0) y = f32[8] parameter(1) ROOT t = f32[8] add(x, y) }
f3 { x = f32[8] parameter(0) y = f32[8] parameter(1) ROOT t = f32[8] multiply(x, y) }
ENTRY e { p = f32[8] parameter(0) q = f32[8] parameter(1)
  u = f32[8] fusion(p, q), kind=kLoop, calls=f1
  v = f32[8] fusion(q, p), kind=kLoop, calls=f2
  w = f32[8] fusion(p, q), kind=kLoop, calls=f3
  ROOT r = (f32[8], f32[8], f32[8]) tuple(u, v, w) }""")
    assert [c[0] for c in backend.calls] == ["u", "w"]
    thunks = result.manifest.thunks.thunks
    assert [t.kernel for t in thunks] == ["u", "u", "w"]
    assert thunks[0].args != thunks[1].args and sorted(result.manifest.kernels) == ["u", "w"]


@pytest.mark.parametrize("hlo_name, kernel", [("add.3", "add_3"), ("_", "kernel_"), ("3d", "_3d"),
                                              ("wrapped_dynamic-update-slice", "wrapped_dynamic_update_slice")])
def test_kernel_names_are_ptx_identifiers(hlo_name, kernel):
    from hlo_codegen.thunk_emitter import sanitize_kernel_name

    assert sanitize_kernel_name(hlo_name) == kernel


def test_dynamic_shapes_are_refused_with_the_instruction():
    # Bounded dimensions (`<=8`) are static at their bounds (hlo_common.passes.bounded_dynamic_dimensions);
    # `?` is refused.
    with pytest.raises(HloError, match=r"%p: dynamic shape f32\[\?\] is not supported by hlo-codegen"):
        compile_text("HloModule m\nENTRY e { p = f32[?] parameter(0) ROOT n = f32[?] negate(p) }")


def test_async_start_done_runs_its_computation_in_order():
    result, _ = compile_text("""HloModule m
neg { x = f32[4] parameter(0) ROOT n = f32[4] negate(x) }
ENTRY e { p = f32[4] parameter(0)
  s = ((f32[4]), f32[4], u32[]) async-start(p), calls=neg
  u = ((f32[4]), f32[4], u32[]) async-update(s)
  ROOT d = f32[4] async-done(u) }""")
    assert [t.kernel for t in result.manifest.thunks.thunks] == ["wrapped_negate"]
    assert _find(result.module, "d").opcode == "call"
    assert not any(i.opcode.startswith("async") for i in result.module.entry.instructions)
