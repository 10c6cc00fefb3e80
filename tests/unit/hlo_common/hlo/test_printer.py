"""The canonical printer: print(parse(print(m))) == print(m), text XLA reads, values kept exactly."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.hlo.shape import Shape

MODULE = """HloModule m, entry_computation_layout={(f32[4,8]{1,0}, s32[])->(f32[4], f32[8,4])}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4,8] parameter(0), sharding={devices=[2,1]0,1}
  i = s32[] parameter(1)
  z = f32[] constant(0)
  r = f32[4] reduce(x, z), dimensions={1}, to_apply=add, metadata={op_type="ReduceSum" op_name="jit(f)/reduce_sum" source_file="f.py" source_line=3}
  t = f32[8,4]{0,1} transpose(x), dimensions={1,0}, frontend_attributes={_xla_stream_annotation="1"}
  c = f32[8,4] copy(t), backend_config={"operation_queue_id":"0","wait_on_operation_queues":[]}, control-predecessors={r}
  ROOT out = (f32[4], f32[8,4]) tuple(r, c)
}
"""


def _stable(module: HloModule) -> str:
    text = print_module(module)
    assert print_module(parse_module(text)) == text
    return text


def test_printed_module_is_stable_and_has_xla_shape():
    text = _stable(parse_module(MODULE))
    lines = text.splitlines()
    assert lines[0] == "HloModule m, entry_computation_layout={(f32[4,8]{1,0}, s32[])->(f32[4]{0}, f32[8,4]{1,0})}"
    assert "%add (a: f32[], b: f32[]) -> f32[] {" in lines
    assert "ENTRY %main (x: f32[4,8], i: s32[]) -> (f32[4], f32[8,4]) {" in lines
    assert ('  %r = f32[4]{0} reduce(%x, %z), dimensions={1}, to_apply=%add, metadata={op_type="ReduceSum" '
            'op_name="jit(f)/reduce_sum" source_file="f.py" source_line=3}') in lines
    assert ('  %c = f32[8,4]{1,0} copy(%t), control-predecessors={%r}, '
            'backend_config={"operation_queue_id":"0","wait_on_operation_queues":[]}') in lines
    assert "  ROOT %out = (f32[4]{0}, f32[8,4]{1,0}) tuple(%r, %c)" in lines


def test_xla_reads_our_text_back_to_the_same_module():
    pytest.importorskip("jax", reason="jaxlib is needed to run XLA's parser")
    from jax._src.lib import xla_client as xc

    ours = print_module(parse_module(MODULE))
    opts = xc.hlo.HloPrintOptions()
    opts.print_large_constants = True
    assert xc.hlo.hlo_module_from_text(ours).to_string(opts) == \
        xc.hlo.hlo_module_from_text(MODULE).to_string(opts)


def test_print_metadata_false_drops_metadata():
    assert "metadata=" not in print_module(parse_module(MODULE), print_metadata=False)


def test_computations_print_callees_first_and_operands_before_users():
    m = parse_module("ENTRY e { p = f32[] parameter(0) ROOT n = f32[] negate(p) }")
    e = m.entry
    callee = HloComputation("callee")
    m.add_computation(callee)  # added after the entry that will call it
    q = callee.add_instruction(HloInstruction("q", "parameter", Shape.array("f32", ())))
    q.parameter_number = 0
    callee.root = q
    call = HloInstruction("c", "call", Shape.array("f32", ()), [e.root], {"to_apply": callee})
    late = HloInstruction("late", "abs", Shape.array("f32", ()), [e.parameter(0)])
    e.add_instruction(late)  # appended at the end, but used earlier:
    call.replace_operand(0, late)
    e.add_instruction(call, before=e.root)
    e.root.replace_operand(0, call)
    text = _stable(m)
    assert text.index("%callee (") < text.index("ENTRY %e")
    assert text.index("%late = ") < text.index("%c = ") < text.index("ROOT %n")


def test_large_constants_print_in_full_and_values_survive():
    values = (np.arange(64, dtype=np.float32) / 7).reshape(8, 8)
    m = parse_module("ENTRY e { ROOT c = f32[8,8] constant(0) }")
    m.entry.root.literal = values
    text = _stable(m)
    assert "{...}" not in text
    back = parse_module(text).entry.root.literal
    assert back.dtype == np.float32 and np.array_equal(back.view(np.uint32), values.view(np.uint32))


def test_zero_constants_of_more_than_ten_elements_print_short():
    m = parse_module("ENTRY e { a = pred[11] constant({0,0,0,0,0,0,0,0,0,0,0})\n"
                     "b = s32[10] constant({0,0,0,0,0,0,0,0,0,0})\n"
                     "c = f32[12] constant({0,0,0,0,0,0,0,0,0,0,0,-0.0})\n"
                     "ROOT t = (pred[11], s32[10], f32[12]) tuple(a, b, c) }")
    text = _stable(m)
    assert "%a = pred[11]{0} constant(false)" in text
    assert "%b = s32[10]{0} constant({0, 0, 0, 0, 0, 0, 0, 0, 0, 0})" in text  # 10 or fewer: in full
    assert "constant({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -0.0})" in text  # -0.0 is not all-zero bits


def test_backend_config_as_data_prints_compact_json_or_escaped_string():
    m = parse_module("ENTRY e { ROOT p = f32[] parameter(0) }")
    p = m.entry.root
    p.backend_config_data = {"z": 1, "a": {"k": [1.5, "x"]}, "u": "é"}
    assert 'backend_config={"z":1,"a":{"k":[1.5,"x"]},"u":"é"}' in _stable(m)
    p.backend_config_data = "line\nquote\"tab\t\x01"
    assert 'backend_config="line\\nquote\\"tab\\t\\001"' in _stable(m)
    assert parse_module(print_module(m)).entry.root.backend_config_data == "line\nquote\"tab\t\x01"
    p.backend_config_data = ""
    assert "backend_config" not in _stable(m)
    p.backend_config = '{"a": 2}'  # the text setter still works and gives data
    assert p.backend_config_data == {"a": 2}


def test_stale_entry_layout_is_rederived_only_when_parameter_count_changes():
    m = parse_module("HloModule m, entry_computation_layout={(f32[2]{0}, f32[2]{0})->f32[2]{0}}\n"
                     "ENTRY e { a = f32[2] parameter(0) b = f32[2] parameter(1) ROOT n = f32[2] negate(a) }")
    e = m.entry
    e.remove_instruction(e.parameter(1))
    text = _stable(m)
    assert text.startswith("HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}")


def test_modules_built_from_ir_print_stably():
    m = HloModule("built")
    comp = HloComputation("main")
    m.add_computation(comp, entry=True)
    p = comp.add_instruction(HloInstruction("p", "parameter", Shape.array("bf16", (3,))))
    p.parameter_number = 0
    c = comp.add_instruction(HloInstruction("c", "constant", Shape.array("bf16", (3,))))
    c.literal = np.array([0.1, -2, 1e-3], dtype=Shape.array("bf16", ()).element_type.np_dtype)
    comp.root = comp.add_instruction(HloInstruction("m", "multiply", p.shape, [p, c]))
    text = _stable(m)
    assert "%c = bf16[3]{0} constant({0.1001, -2, 0.0009995})" in text  # bf16(1e-3) = 0.00099945...
