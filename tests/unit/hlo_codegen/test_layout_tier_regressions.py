"""Bugs the layout tier (`tests/corpus/test_layout_corpus.py`) found, each reduced to a module that
failed before its fix, run through hlo-opt and the host pipe against the interpreter."""

from __future__ import annotations

import pytest
from test_layout_sensitive_pipe import HOST_BOUND, assert_matches, compile_for, optimize, run_host

from hlo_common.interpreter.evaluator import evaluate
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_run.inputs import make_fake_arguments

# import_async.hlo#4 with a column-major parameter: layout-assignment kept the copy-start's
# tuple as written ({1,0}) while its operand became {0,1}, and hlo-codegen refused a copy-start
# that "changes the layout"; the same for an async-start, whose call then disagreed with its
# operand ("layouts must match across control flow").
COPY_START = """HloModule copy_start, entry_computation_layout={(f32[128,32]{0,1})->f32[128,32]{0,1}}
ENTRY main {
  p = f32[128,32]{0,1} parameter(0)
  cs = (f32[128,32], f32[128,32], u32[]) copy-start(p), cross_program_prefetch_index=0
  ROOT cd = f32[128,32] copy-done(cs)
}
"""
ASYNC_START = """HloModule async_start, entry_computation_layout={(f32[8,16]{0,1})->f32[8,16]{0,1}}
wrapped {
  p = f32[8,16] parameter(0)
  ROOT n = f32[8,16] negate(p)
}
ENTRY main {
  a = f32[8,16]{0,1} parameter(0)
  s = ((f32[8,16]), f32[8,16], s32[]) async-start(a), calls=wrapped
  ROOT d = f32[8,16] async-done(s)
}
"""


@pytest.mark.parametrize("text, op, alias", [(COPY_START, "copy-start", (1,)),
                                              (ASYNC_START, "async-start", (0, 0))])
def test_an_async_start_reads_its_operand_in_the_layout_its_result_aliases(text, op, alias):
    optimized = parse_module(optimize(text, op, None))
    (start,) = [i for i in optimized.entry.instructions if i.opcode == op]
    assert start.operands[0].shape.minor_to_major == start.shape.subshape(alias).minor_to_major
    module = parse_module(text)
    args = make_fake_arguments(module, 0)
    manifest = compile_for(optimize(text, op, None), op, "host")
    assert_matches(run_host(manifest, args, op), evaluate(module, args), HOST_BOUND, "host pipe")


# launch_dimensions.hlo#6 with permuted parameters: a transpose fusion of the corpus adds a {0,1}
# value to {1,0} ones; once layout-assignment fed it a kernel's result (a copy) instead of an
# entry parameter, buffer assignment let the fusion write over that operand, which it reads
# through a layout-changing bitcast, so later elements read clobbered ones (2e6 of 4e6 wrong).
SHARE_THROUGH_TRANSPOSING_BITCAST = """HloModule share, is_scheduled=true
neg {
  p = f32[64,64]{1,0} parameter(0)
  ROOT n = f32[64,64]{1,0} negate(p)
}
fused_add {
  p0 = f32[64,64]{1,0} parameter(0)
  bc = f32[64,64]{0,1} bitcast(p0)
  p1 = f32[64,64]{1,0} parameter(1)
  ROOT add = f32[64,64]{1,0} add(bc, p1)
}
ENTRY main {
  a = f32[64,64]{1,0} parameter(0)
  b = f32[64,64]{1,0} parameter(1)
  n = f32[64,64]{1,0} fusion(a), kind=kLoop, calls=neg
  ROOT f = f32[64,64]{1,0} fusion(n, b), kind=kLoop, calls=fused_add
}
"""


def test_a_fusion_does_not_write_over_an_operand_it_reads_in_another_memory_order():
    from hlo_common.analysis.sharing import fusion_can_share_buffer_hint

    text = SHARE_THROUGH_TRANSPOSING_BITCAST
    module = parse_module(text)
    n, f = (module.entry.instruction(name) for name in ("n", "f"))
    assert not fusion_can_share_buffer_hint(f, n, ())
    args = make_fake_arguments(module, 0)
    manifest = compile_for(text, "share", "host")
    assert_matches(run_host(manifest, args, "share"), evaluate(module, args), HOST_BOUND, "host pipe")
    # the same fusion without the bitcast may share (the check is no broader than it must be)
    same_order = parse_module(text.replace("f32[64,64]{0,1} bitcast", "f32[64,64]{1,0} bitcast"))
    f2, n2 = same_order.entry.instruction("f"), same_order.entry.instruction("n")
    assert fusion_can_share_buffer_hint(f2, n2, ())


# transpose_10_s4.hlo with a column-major parameter: layout normalization and layout-assignment
# rebuilt layouts without the `E(4)` element size, so a packed s4 value (2048 bytes) was bitcast to
# an unpacked one (4096 bytes) and hlo-run refused the manifest ("copy from 2048 bytes into 4096").
PACKED_S4 = """HloModule packed_s4, entry_computation_layout={(s4[64,64]{0,1:E(4)})->s4[64,64]{1,0:E(4)}}
ENTRY main {
  p = s4[64,64]{0,1:E(4)} parameter(0)
  ROOT t = s4[64,64]{1,0:E(4)} transpose(p), dimensions={1,0}
}
"""


def test_a_packed_sub_byte_value_stays_packed_through_layout_changes():
    from hlo_common.manifest.layout_bytes import array_to_bytes

    optimized = parse_module(optimize(PACKED_S4, "packed_s4", None))
    for instr in optimized.entry.instructions:
        if instr.shape.is_array and instr.shape.element_type.name == "s4":
            assert instr.shape.layout.element_size_in_bits == 4, instr.name
    module = parse_module(PACKED_S4)
    args = make_fake_arguments(module, 0)
    assert len(array_to_bytes(args[0], module.entry.parameters[0].shape)) == 2048
    manifest = compile_for(print_module(optimized), "packed_s4", "host")
    assert_matches(run_host(manifest, args, "packed_s4"), evaluate(module, args), HOST_BOUND, "host pipe")
