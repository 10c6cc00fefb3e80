"""The HLO text parser: the syntax of xla-facts.md section a, and errors with FILE:LINE:COL.

Expected values are written by hand from the grammar (what each text means), not produced by the
code under test.
"""

from __future__ import annotations

import re

import pytest

from hlo_common.errors import HloParseError
from hlo_common.hlo.parser import parse_module, parse_modules, split_module_texts
from hlo_common.hlo.printer import print_module


def _instr(module, name):
    for c in [module.entry] + module.computations:
        for i in c.instructions:
            if i.name == name:
                return i
    raise KeyError(name)


# -- module structure -----------------------------------------------------------------------------
def test_header_attributes_and_entry_layout():
    m = parse_module("""HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[2,4]{0,1}, s32[])->f32[2,4]{1,0}}, replica_count=2, input_output_alias={ {}: (0, {}, may-alias) }
ENTRY main {
  p = f32[2,4]{0,1} parameter(0)
  q = s32[] parameter(1)
  ROOT c = f32[2,4] copy(p)
}""")
    assert m.name == "jit_f" and m.is_scheduled
    params, result = m.entry_computation_layout
    assert [str(p) for p in params] == ["f32[2,4]{0,1}", "s32[]"]
    assert str(result) == "f32[2,4]{1,0}"
    assert m.header_attr("replica_count") == "2"
    assert m.header_attr("input_output_alias") == "{ {}: (0, {}, may-alias) }"  # kept as XLA prints it


def test_headerless_module_is_named_after_its_entry_and_last_computation_is_entry():
    m = parse_module("add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"
                     "main { x = f32[] parameter(0) ROOT y = f32[] negate(x) }")
    assert m.name == "module_main"
    assert m.entry.name == "main" and m.entry.is_entry
    assert [c.name for c in m.computations] == ["add", "main"]


def test_single_instruction_text_becomes_a_module_with_parameters():
    # XLA's ParseSingleInstruction: shaped operands that are not defined become parameters.
    m = parse_module("f32[4] add(f32[4] %x, f32[4] multiply(f32[4], f32[4] y))")
    e = m.entry
    assert m.name == "_" and m.is_scheduled and e.root.name == "_"
    assert [(p.name, p.parameter_number) for p in e.parameters] == [("x", 0), ("_1", 1), ("y", 2)]
    assert e.root.operands[1].opcode == "multiply"
    m = parse_module("r = f32[2] negate(f32[2] p)")
    assert m.entry.root.name == "r" and m.entry.parameters[0].name == "p"
    with pytest.raises(HloParseError, match="operand 'p' is not defined"):
        parse_module("r = f32[2] negate(p)")
    with pytest.raises(HloParseError, match="expected the end of the text after a single instruction"):
        parse_module("r = f32[2] negate(f32[2] p)\ns = f32[2] abs(r)")


def test_percent_sigils_are_optional_and_root_defaults_to_last_instruction():
    m = parse_module("ENTRY %e { %p = f32[2] parameter(0)\n %n = f32[2] negate(%p)\n r = f32[2] abs(n) }")
    assert m.entry.root.name == "r"
    assert [o.name for o in m.entry.root.operands] == ["n"]


def test_signature_result_must_match_root():
    with pytest.raises(HloParseError, match="declared to return f32\\[3\\] but its root returns f32\\[2\\]"):
        parse_module("ENTRY e (p: f32[2]) -> f32[3] { ROOT p = f32[2] parameter(0) }")


def test_stack_frame_table_and_stack_frame_id_survive_printing():
    text = """HloModule m

FileNames
1 "a.py"
FunctionNames
1 "f"
FileLocations
1 {file_name_id=1 function_name_id=1 line=4 end_line=4 column=6 end_column=45}
StackFrames
1 {file_location_id=1 parent_frame_id=1}

ENTRY e {
  ROOT p = f32[] parameter(0), metadata={op_name="jit(f)/x" stack_frame_id=1}
}"""
    m = parse_module(text)
    assert 'FileNames\n  1 "a.py"' in m.stack_frames
    assert "StackFrames\n  1 {file_location_id=1 parent_frame_id=1}" in m.stack_frames
    assert m.entry.root.metadata_value("stack_frame_id") == 1
    printed = print_module(m)
    assert "1 {file_name_id=1 function_name_id=1 line=4 end_line=4 column=6 end_column=45}" in printed
    assert print_module(parse_module(printed)) == printed


def test_split_on_dash_lines_only_exact_marker():
    text = "HloModule a\nENTRY e { ROOT p = f32[] parameter(0) }\n// -----\n// only a comment\n// -----\n" \
           "HloModule b\nENTRY e { ROOT p = s32[] parameter(0) }\n// ---------------\nc { ROOT q = f32[] parameter(0) }\n"
    assert len(split_module_texts(text)) == 2
    mods = parse_modules(text, "x.hlo")
    assert [m.name for m in mods] == ["a", "b"]
    assert [c.name for c in mods[1].computations] == ["e", "c"]


def test_two_modules_without_a_separator_are_an_error():
    with pytest.raises(HloParseError, match="a second 'HloModule' in one module text") as info:
        parse_module("HloModule a\nENTRY e { ROOT p = f32[] parameter(0) }\nHloModule b\n", "x.hlo")
    assert (info.value.line, info.value.col) == (3, 1)


def test_errors_in_later_chunks_report_file_lines():
    text = "HloModule a\nENTRY e { ROOT p = f32[] parameter(0) }\n// -----\nHloModule b\nENTRY e {\n  ROOT p = f32[] nope(0)\n}\n"
    with pytest.raises(HloParseError) as info:
        parse_modules(text, "x.hlo")
    assert str(info.value) == "x.hlo:6:18: unknown opcode 'nope'"


# -- operands ---------------------------------------------------------------------------------------
def test_operands_with_shapes_and_nested_anonymous_instructions():
    m = parse_module("ENTRY e { x = f32[] parameter(0)\n"
                     "ROOT a = f32[] add(f32[] x, f32[] multiply(x, f32[] constant(2))) }")
    root = m.entry.root
    mul = root.operands[1]
    assert mul.opcode == "multiply" and mul.name == "multiply.anon"
    assert mul.operands[1].opcode == "constant" and float(mul.operands[1].literal) == 2.0
    assert mul.operands[1].name == "constant.anon"
    # printed as ordinary named instructions, operands first
    printed = print_module(m)
    assert printed.index("%constant.anon =") < printed.index("%multiply.anon =") < printed.index("ROOT %a")


def test_operand_declared_shape_must_match():
    with pytest.raises(HloParseError, match="operand 'x' is declared s32\\[\\] but is f32\\[\\]"):
        parse_module("ENTRY e { x = f32[] parameter(0) ROOT n = f32[] negate(s32[] x) }")


def test_compact_get_tuple_element_sugar():
    m = parse_module("ENTRY e { p = (f32[2], (s32[], pred[3])) parameter(0)\n"
                     "ROOT t = (f32[2], pred[3], pred[3]) tuple(p#0, p#1#1, p#1#1) }")
    a, b, c = m.entry.root.operands
    assert (a.opcode, a.attrs["index"], str(a.shape)) == ("get-tuple-element", 0, "f32[2]{0}")
    assert (b.opcode, b.attrs["index"], str(b.shape)) == ("get-tuple-element", 1, "pred[3]{0}")
    assert b.operands[0].attrs["index"] == 1 and str(b.operands[0].shape) == "(s32[], pred[3]{0})"
    assert b is c  # the same element is read once


def test_undefined_operand_and_forward_reference():
    with pytest.raises(HloParseError) as info:
        parse_module("ENTRY e {\n  a = f32[] negate(b)\n  b = f32[] parameter(0)\n}", "f.hlo")
    assert str(info.value).startswith("f.hlo:2:20: operand 'b' is not defined")


def test_control_predecessors():
    m = parse_module("ENTRY e { a = f32[] parameter(0) b = f32[] negate(a)\n"
                     "ROOT c = f32[] abs(a), control-predecessors={b} }")
    b, c = _instr(m, "b"), _instr(m, "c")
    assert c.control_predecessors == [b] and b.control_successors == [c]


# -- called computations ------------------------------------------------------------------------------
def test_called_computations_must_be_defined_first_or_inline():
    with pytest.raises(HloParseError, match="computation 'add' is not defined"):
        parse_module("ENTRY e { p = f32[4] parameter(0) z = f32[] constant(0)\n"
                     "ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add }\n"
                     "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }")
    m = parse_module("ENTRY e { p = f32[4] parameter(0) z = f32[] constant(0)\n"
                     "ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply={ a = f32[] parameter(0)\n"
                     "b = f32[] parameter(1) ROOT s = f32[] add(a, b) } }")
    called = m.entry.root.attrs["to_apply"]
    assert called.root.opcode == "add" and called in m.computations
    assert m.computations.index(called) < m.computations.index(m.entry)


def test_conditional_branches_and_while():
    m = parse_module("""
c0 { p = f32[] parameter(0) ROOT n = f32[] negate(p) }
c1 { p = f32[] parameter(0) ROOT n = f32[] abs(p) }
cond { p = s32[] parameter(0) z = s32[] constant(3) ROOT lt = pred[] compare(p, z), direction=LT }
body { p = s32[] parameter(0) one = s32[] constant(1) ROOT s = s32[] add(p, one) }
ENTRY e { i = s32[] parameter(0) x = f32[] parameter(1)
  w = s32[] while(i), condition=cond, body=body
  ROOT r = f32[] conditional(w, x, x), branch_computations={c0, c1} }""")
    assert [c.name for c in m.entry.root.attrs["branch_computations"]] == ["c0", "c1"]
    w = _instr(m, "w")
    assert (w.attrs["condition"].name, w.attrs["body"].name) == ("cond", "body")
    assert str(_instr(m, "lt").attrs["direction"]) == "LT"


def test_async_sugar_wraps_the_op():
    m = parse_module("ENTRY e { p = f32[2] parameter(0)\n"
                     "s = ((f32[2]), f32[2], s32[]) custom-call-start(p), custom_call_target=\"foo\"\n"
                     "ROOT d = f32[2] custom-call-done(s) }")
    s = _instr(m, "s")
    assert s.opcode == "async-start" and str(s.attrs["async_wrapped_opcode"]) == "custom-call-start"
    assert s.attrs["custom_call_target"] == "foo"
    assert "custom-call-start(%p), custom_call_target=\"foo\"" in print_module(m)


# -- attributes ---------------------------------------------------------------------------------------
def test_dot_gather_scatter_and_window_attributes():
    m = parse_module("""
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[2,3,4] parameter(0)
  y = f32[2,4,5] parameter(1)
  d = f32[2,3,5] dot(x, y), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={high,highest}
  i = s32[2,1] parameter(2)
  g = f32[2,3,4] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3,4}
  u = f32[2,3,4] parameter(3)
  s = f32[2,3,4] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  z = f32[] constant(0)
  rw = f32[2,2,4] reduce-window(x, z), window={size=1x2x1 stride=1x1x1 pad=0_0x0_0x0_0 rhs_dilate=1x2x1}, to_apply=add
  ROOT t = (f32[2,3,5], f32[2,3,4], f32[2,3,4], f32[2,2,4]) tuple(d, g, s, rw)
}""")
    d = _instr(m, "d")
    assert d.attrs["lhs_contracting_dims"] == (2,) and d.attrs["rhs_batch_dims"] == (0,)
    assert d.attrs["operand_precision"] == ("high", "highest")
    g = _instr(m, "g")
    assert g.attrs["slice_sizes"] == (1, 3, 4) and g.attrs["index_vector_dim"] == 1
    assert _instr(m, "s").attrs["to_apply"].name == "add"
    w = _instr(m, "rw").attrs["window"]
    assert [dim.size for dim in w.dims] == [1, 2, 1]
    assert [dim.window_dilation for dim in w.dims] == [1, 2, 1]
    assert str(w) == "{size=1x2x1 rhs_dilate=1x2x1}"  # defaults are not printed


def test_convolution_pad_and_slice_attributes():
    m = parse_module("""ENTRY e {
  x = f32[1,8,8,3] parameter(0)
  k = f32[3,3,3,16] parameter(1)
  c = f32[1,8,8,16] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=1
  z = f32[] constant(0)
  p = f32[3,12,10,16] pad(c, z), padding=1_1x2_2_1x0_2x0_0
  ROOT s = f32[1,4,4,16] slice(c), slice={[0:1], [0:8:2], [1:8:2], [0:16]}
}""")
    dn = _instr(m, "c").attrs["dim_labels"]
    assert (dn.input_batch, dn.input_feature, dn.input_spatial) == (0, 3, (1, 2))
    assert (dn.kernel_input_feature, dn.kernel_output_feature, dn.kernel_spatial) == (2, 3, (0, 1))
    assert _instr(m, "p").attrs["padding"].dims == ((1, 1, 0), (2, 2, 1), (0, 2, 0), (0, 0, 0))
    assert _instr(m, "s").attrs["slice"].dims == ((0, 1, 1), (0, 8, 2), (1, 8, 2), (0, 16, 1))
    printed = print_module(m)
    assert "padding=1_1_0x2_2_1x0_2_0x0_0_0" in printed  # XLA prints every interior once one is set
    assert "slice={[0:1:1], [0:8:2], [1:8:2], [0:16:1]}" in printed


def test_replica_groups_forms():
    m = parse_module("""add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e { p = f32[8] parameter(0)
  a = f32[8] all-reduce(p), replica_groups={{0,2},{1,3}}, to_apply=add
  b = f32[8] all-reduce(p), replica_groups=[2,2]<=[4], to_apply=add
  c = f32[8] all-reduce(p), replica_groups=[2,2]<=[2,2]T(1,0), to_apply=add
  d = f32[8] all-reduce(p), replica_groups=mesh['x'=2,'y'=2] {'x'}, to_apply=add
  ROOT t = (f32[8], f32[8], f32[8], f32[8]) tuple(a, b, c, d) }""")
    groups = {n: _instr(m, n).attrs["replica_groups"].groups() for n in "abcd"}
    assert groups["a"] == [[0, 2], [1, 3]]
    assert groups["b"] == [[0, 1], [2, 3]]
    assert groups["c"] == [[0, 2], [1, 3]]  # iota 0..3 as 2x2, transposed
    assert groups["d"] == [[0, 2], [1, 3]]  # devices of a 2x2 mesh, grouped along 'x'
    printed = print_module(m)
    for text in ("replica_groups={{0,2},{1,3}}", "replica_groups=[2,2]<=[4]",
                 "replica_groups=[2,2]<=[2,2]T(1,0)", "replica_groups=mesh['x'=2,'y'=2] {'x'}"):
        assert text in printed


def test_collective_permute_and_custom_call_attributes():
    m = parse_module("""ENTRY e { p = f32[4] parameter(0)
  cp = f32[4] collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,2},{2,0}}
  ROOT cc = (f32[4], f32[4]) custom-call(p, cp), custom_call_target="__cublas$gemm", output_to_operand_aliasing={{0}: (1, {}), {1}: (0, {})}, api_version=API_VERSION_STATUS_RETURNING, custom_call_has_side_effect=true, literal=s32[2]{0} {3, 4} }""")
    cp = _instr(m, "cp")
    assert cp.attrs["source_target_pairs"].pairs == ((0, 1), (1, 2), (2, 0)) and cp.attrs["channel_id"] == 1
    cc = m.entry.root
    assert cc.attrs["custom_call_target"] == "__cublas$gemm"
    assert cc.attrs["output_to_operand_aliasing"].entries == (((0,), 1, ()), ((1,), 0, ()))
    assert cc.attrs["literal"].value.tolist() == [3, 4]
    assert cc.has_side_effect
    printed = print_module(m)
    assert "output_to_operand_aliasing={{0}: (1, {}), {1}: (0, {})}" in printed
    # with its layout, so that the braces of the value cannot be read as a layout
    assert "literal=s32[2]{0} {3, 4}" in printed


@pytest.mark.parametrize("sharding", [
    "{replicated}", "{maximal device=1}", "{manual}", "{unknown}", "{devices=[2,1]0,1}",
    "{devices=[4,1]<=[4]}", "{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
    "{devices=[2,1,2]<=[4] last_tile_dims={manual}}", "{{replicated}, {maximal device=0}}",
    "{replicated shard_as 1}",
])
def test_sharding_forms_are_kept(sharding):
    m = parse_module(f"ENTRY e {{ ROOT p = f32[4,4] parameter(0), sharding={sharding} }}")
    assert str(m.entry.root.sharding) == sharding
    assert f"sharding={sharding}" in print_module(m)


def test_metadata_frontend_attributes_and_backend_config():
    m = parse_module("""ENTRY e { ROOT p = f32[] parameter(0),
      frontend_attributes={zeta="1",alpha={"k":2}},
      metadata={source_line=3 op_name="jit(f)/add" op_type="Add" source_file="f.py" source_column=0},
      backend_config={"operation_queue_id":"0", "wait_on_operation_queues":[], "force_earliest_schedule":false} }""")
    p = m.entry.root
    assert p.frontend_attributes == [("alpha", '{"k":2}'), ("zeta", '"1"')]
    assert [k for k, _ in p.metadata] == ["op_type", "op_name", "source_file", "source_line"]  # XLA's order
    assert p.metadata_value("op_name") == "jit(f)/add" and p.metadata_value("source_line") == 3
    assert p.backend_config_data == {"operation_queue_id": "0", "wait_on_operation_queues": [],
                                     "force_earliest_schedule": False}
    assert list(p.backend_config_data) == ["operation_queue_id", "wait_on_operation_queues",
                                           "force_earliest_schedule"]
    assert p.backend_config == '{"operation_queue_id":"0","wait_on_operation_queues":[],"force_earliest_schedule":false}'


def test_quoted_backend_config_json_becomes_data_and_other_strings_stay():
    m = parse_module('ENTRY e { a = f32[] parameter(0), backend_config="{\\"x\\": 1}"\n'
                     'ROOT b = f32[] negate(a), backend_config="\\n\\003opaque" }')
    a, b = _instr(m, "a"), _instr(m, "b")
    assert a.backend_config_data == {"x": 1} and a.backend_config == '{"x":1}'
    assert b.backend_config_data == "\n\x03opaque"
    assert b.backend_config == '"\\n\\003opaque"'  # CEscape: octal for non-printable bytes


def test_unknown_attributes_are_kept_as_text():
    m = parse_module("ENTRY e { ROOT p = f32[] parameter(0), something_new={a=1,  b=[2, 3]} }")
    assert str(m.entry.root.attrs["something_new"]) == "{a=1, b=[2, 3]}"


# -- shapes ---------------------------------------------------------------------------------------------
def test_shape_forms():
    m = parse_module("""ENTRY e {
  a = f32[<=8,?]{1,0} parameter(0)
  b = bf16[128,256]{1,0:T(8,128)(2,1)S(1)} parameter(1)
  c = s4[128]{0:E(4)} parameter(2)
  d = b(f32[2,4]) custom-call(), custom_call_target="CreateBuffer"
  e = () tuple()
  ROOT t = (f32[<=8,?], bf16[128,256], s4[128], b(f32[2,4]), ()) tuple(a, b, c, d, e)
}""")
    a, b, c, d = (_instr(m, n) for n in "abcd")
    assert a.shape.dynamic == ("<=", "?") and str(a.shape) == "f32[<=8,?]{1,0}"
    assert b.shape.layout.memory_space == 1 and str(b.shape) == "bf16[128,256]{1,0:T(8,128)(2,1)S(1)}"
    assert c.shape.layout.element_size_in_bits == 4
    assert d.shape.is_buffer and str(d.shape.buffer_of) == "f32[2,4]{1,0}" and str(d.shape) == "b(f32[2,4]{1,0})"
    assert _instr(m, "e").shape.tuple_shapes == ()


@pytest.mark.parametrize("layout", [
    "{1,0:T(8,128)(2,1)}", "{0,1:E(4)S(1)}", "{1,0:D(D,C+~)L(4)#(u32)*(u64)}", "{1,0:SC(0:1,2)(1:3)M(8)}",
    "{1,0:P(f32[8,128]{1,0})}",
])
def test_layout_extras_round_trip(layout):
    m = parse_module(f"ENTRY e {{ ROOT p = f32[8,128]{layout} parameter(0) }}")
    assert str(m.entry.root.shape) == f"f32[8,128]{layout}"


@pytest.mark.parametrize("text, message", [
    ("f32[2,3]{0} parameter(0)", "layout {0} is not a permutation of the 2 dimensions"),
    ("f32[2]{0:Q(1)} parameter(0)", "unknown layout attribute"),
    ("f33[2] parameter(0)", "unknown opcode 'f33'"),
    ("token[2] parameter(0)", "token shape cannot have dimensions"),
    ("b((f32[])) parameter(0)", "a buffer shape holds an array"),
])
def test_bad_shapes(text, message):
    with pytest.raises(HloParseError, match=re.escape(message)):
        parse_module(f"ENTRY e {{ ROOT p = {text} }}")


# -- errors -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("body, where, message", [
    ("ROOT x = f32[] addd(p)", (3, 18), "unknown opcode 'addd'"),
    ("p = f32[] parameter(1)", (3, 3), "instruction 'p' is defined twice in computation 'e'"),
    ("ROOT q = f32[] negate(p)\nROOT r = f32[] abs(p)", (4, 3), "computation 'e' has more than one ROOT"),
    ("ROOT q = convert(p)", (3, 12), "cannot infer the shape of opcode 'convert'"),
    ("ROOT q = f32[] add(p)", (3, 18), "'add' expects 2 operands, but has 1"),
    ("ROOT f32 = f32[] negate(p)", (3, 8), "illegal instruction name 'f32'"),
    ("ROOT __x = f32[] negate(p)", (3, 8), "illegal instruction name '__x'"),
    ('ROOT q = f32[] negate(p), metadata={op_name="a', (3, 47), "unterminated string"),
    ("ROOT q = f32[] negate(p), dimensions={0}, dimensions={1}", (3, 45), "attribute 'dimensions' given twice"),
    ("ROOT q = f32[] negate(p), window={size=2 bogus=1}", (3, 29), "unknown window field 'bogus=1'"),
    ("ROOT q = f32[] negate(p), to_apply=nowhere", (3, 38), "computation 'nowhere' is not defined"),
    ("ROOT q = s8[] constant(300)", (3, 26), "value 300 is out of range for literal's primitive type s8"),
    ("ROOT q = f32[2] constant({1, 2, 3})", (3, 35), "expects 2 elements on the minor-most dimension"),
])
def test_errors_name_line_and_column(body, where, message):
    text = "ENTRY e {\n  p = f32[] parameter(0)\n" + "\n".join("  " + b for b in body.split("\n")) + "\n}"
    with pytest.raises(HloParseError) as info:
        parse_module(text, "t.hlo")
    err = info.value
    assert message in err.message
    assert (err.line, err.col) == where
    assert str(err).startswith(f"t.hlo:{where[0]}:{where[1]}: ")


def test_empty_and_comment_only_inputs():
    with pytest.raises(HloParseError, match="empty input"):
        parse_module("  \n// nothing here\n")
    with pytest.raises(HloParseError, match="no HLO module found"):
        parse_modules("// a\n// -----\n// b\n")


def test_deep_nesting_is_an_error_not_a_crash():
    deep = "(" * 5000 + "f32[]" + ")" * 5000
    with pytest.raises(HloParseError, match="nested too deeply"):
        parse_module(f"ENTRY e {{ ROOT p = {deep} parameter(0) }}")
