"""MultiOutputFusion ("multi_output_fusion"): the cases of XLA's multi_output_fusion_test.cc (HLO in,
structure out, XLA's rejections with the rule that refuses), numbers unchanged by the interpreter,
and the same output under any PYTHONHASHSEED.

The pass runs as in the pipeline (H100, with the performance model); the expected results are those
of XLA's tests (whose device is an RTX A6000), and where a test names the rule that refuses, the
decision log must say so."""

from __future__ import annotations

import os
import subprocess
import sys

from pass_testlib import check_numerics, run_pass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_opt import cli
from hlo_opt.passes.multi_output_fusion import MultiOutputFusion

PREFIX = """
HloModule test_module

scalar_add_computation {
  scalar_lhs.0 = f32[] parameter(0)
  scalar_rhs.0 = f32[] parameter(1)
  ROOT add.0 = f32[] add(scalar_lhs.0, scalar_rhs.0)
}
scalar_mul_computation {
  scalar_lhs.1 = f32[] parameter(0)
  scalar_rhs.1 = f32[] parameter(1)
  ROOT mul.1 = f32[] multiply(scalar_lhs.1, scalar_rhs.1)
}
"""


def mof(text: str, cost_model: bool = True) -> tuple[HloModule, bool, list[str]]:
    p = MultiOutputFusion(cost_model=cost_model)
    module, changed = run_pass(p, text)
    return module, changed, p.decisions


def fused_root_opcodes(fusion: HloInstruction) -> list[str]:
    root = fusion.fused_computation().root
    assert root.opcode == "tuple", f"{fusion.name} is not a multi-output fusion"
    return [o.opcode for o in root.operands]


def root_fusion(module: HloModule, i: int = 0) -> HloInstruction:
    """entry root -> operand i -> its operand 0 (the fusion behind a get-tuple-element)."""
    gte = module.entry.root.operands[i]
    assert gte.opcode == "get-tuple-element", print_module(module)
    return gte.operands[0]


def count_mofs(module: HloModule) -> int:
    return sum(1 for c in module.computations for i in c.instructions
               if i.opcode == "fusion" and i.fused_computation().root.opcode == "tuple"
               and c is not None and not _is_fused(module, c))


def _is_fused(module: HloModule, comp) -> bool:
    return any(i.opcode == "fusion" and i.attrs["calls"] is comp for c in module.computations
               for i in c.instructions)


def refused(decisions: list[str], rule: str) -> bool:
    return any(d.startswith("not fusing") and d.endswith(f"[{rule}]") for d in decisions)


# -- siblings ---------------------------------------------------------------------------------------
def test_sibling_reduce_and_reduce_fusion():
    text = PREFIX + """
fused_computation {
  p1.1 = f32[2,64,8,8]{3,2,1,0} parameter(1)
  mul = f32[2,64,8,8]{3,2,1,0} multiply(p1.1, p1.1)
  const.1 = f32[] parameter(0)
  ROOT reduce.1 = f32[64]{0} reduce(mul, const.1), dimensions={0,2,3}, to_apply=scalar_add_computation
}
ENTRY entry {
  p0 = f32[] parameter(0)
  p1 = f32[2,64,8,8]{3,2,1,0} parameter(1)
  const.2 = f32[] constant(1)
  fusion = f32[64] fusion(p0, p1), kind=kInput, calls=fused_computation
  reduce.2 = f32[64]{0} reduce(p1, const.2), dimensions={0,2,3}, to_apply=scalar_add_computation
  ROOT root = (f32[64]{0}, f32[64]{0}) tuple(fusion, reduce.2)
}"""
    module, changed, _ = mof(text)
    assert changed
    fusion = root_fusion(module)
    assert fused_root_opcodes(fusion) == ["reduce", "reduce"]
    assert fusion.attrs["kind"] == "kInput"
    assert root_fusion(module, 1) is fusion
    check_numerics(text, module)


def test_sibling_reduce_fusions_xla_shapes():
    module, changed, _ = mof(PREFIX + """
fused_computation_1 {
  p1.1 = f32[128,512,28,28]{3,2,1,0} parameter(1)
  mul = f32[128,512,28,28]{3,2,1,0} multiply(p1.1, p1.1)
  const.1 = f32[] parameter(0)
  ROOT reduce.1 = f32[512]{0} reduce(mul, const.1), dimensions={0,2,3}, to_apply=scalar_add_computation
}
fused_computation_2 {
  p1.2 = f32[128,512,28,28]{3,2,1,0} parameter(1)
  const.2 = f32[] parameter(0)
  ROOT reduce.2 = f32[512]{0} reduce(p1.2, const.2), dimensions={0,2,3}, to_apply=scalar_add_computation
}
ENTRY entry {
  p0 = f32[] parameter(0)
  p1 = f32[128,512,28,28]{3,2,1,0} parameter(1)
  fusion.1 = f32[512] fusion(p0, p1), kind=kInput, calls=fused_computation_1
  fusion.2 = f32[512] fusion(p0, p1), kind=kInput, calls=fused_computation_2
  ROOT root = (f32[512]{0}, f32[512]{0}) tuple(fusion.1, fusion.2)
}""")
    assert changed
    assert fused_root_opcodes(root_fusion(module)) == ["reduce", "reduce"]
    # p0 and p1 are read once each by the one kernel
    assert [o.name for o in root_fusion(module).operands] == ["p0", "p1"]


def test_different_reduce_input_shapes_are_not_fused():
    _, changed, log = mof(PREFIX + """
fused_computation_1 {
  p1.1 = f32[6400]{0} parameter(1)
  mul = f32[6400]{0} multiply(p1.1, p1.1)
  const.1 = f32[] parameter(0)
  ROOT reduce.1 = f32[] reduce(mul, const.1), dimensions={0}, to_apply=scalar_add_computation
}
fused_computation_2 {
  p1.2 = f32[6400]{0} parameter(1)
  r1 = f32[64,100]{0,1} reshape(p1.2)
  const.2 = f32[] parameter(0)
  ROOT reduce.2 = f32[] reduce(r1, const.2), dimensions={1,0}, to_apply=scalar_mul_computation
}
ENTRY entry {
  p0 = f32[] parameter(0)
  p1 = f32[6400]{0} parameter(1)
  fusion.1 = f32[] fusion(p0, p1), kind=kInput, calls=fused_computation_1
  fusion.2 = f32[] fusion(p0, p1), kind=kInput, calls=fused_computation_2
  ROOT root = (f32[], f32[]) tuple(fusion.1, fusion.2)
}""")
    assert not changed
    assert refused(log, "loop_shapes")


def test_different_reduce_output_shapes_are_not_fused():
    _, changed, log = mof(PREFIX + """
fused_computation_1 {
  p1.1 = f32[10,10]{1,0} parameter(1)
  mul = f32[10,10]{1,0} multiply(p1.1, p1.1)
  const.1 = f32[] parameter(0)
  ROOT reduce.1 = f32[] reduce(mul, const.1), dimensions={0,1}, to_apply=scalar_add_computation
}
fused_computation_2 {
  p1.2 = f32[10,10]{1,0} parameter(1)
  const.2 = f32[] parameter(0)
  ROOT reduce.2 = f32[10]{0} reduce(p1.2, const.2), dimensions={0}, to_apply=scalar_mul_computation
}
ENTRY entry {
  p0 = f32[] parameter(0)
  p1.3 = f32[10,10]{1,0} parameter(1)
  fusion.1 = f32[] fusion(p0, p1.3), kind=kInput, calls=fused_computation_1
  p2 = f32[] parameter(2)
  fusion.2 = f32[10]{0} fusion(p2, p1.3), kind=kInput, calls=fused_computation_2
  ROOT root = (f32[], f32[10]{0}) tuple(fusion.1, fusion.2)
}""")
    assert not changed
    # the column reduce f32[10,10] -> f32[10] is faster elemental: no reduction hero, no root
    assert log == []


def test_no_sibling_fusion_for_a_common_scalar():
    _, changed, log = mof(PREFIX + """
fused_computation_1 {
  param_0.87 = bf16[32,4096,16384]{2,1,0} parameter(0)
  param_1.4620 = s32[] parameter(1)
  constant_3949 = s32[] constant(0)
  compare.1026 = pred[] compare(param_1.4620, constant_3949), direction=LT
  constant_5437 = s32[] constant(32)
  add.6859 = s32[] add(param_1.4620, constant_5437)
  select.1599 = s32[] select(compare.1026, add.6859, param_1.4620)
  dynamic-slice.59 = bf16[1,4096,16384]{2,1,0} dynamic-slice(param_0.87, select.1599, constant_3949,
      constant_3949), dynamic_slice_sizes={1,4096,16384}
  ROOT bitcast.41089 = bf16[4096,16384]{1,0} bitcast(dynamic-slice.59)
}
fused_computation_2 {
  param_0 = bf16[32,4096,16384]{2,1,0} parameter(0)
  param_1 = s32[] parameter(1)
  constant = s32[] constant(0)
  compare = pred[] compare(param_1, constant), direction=LT
  constant.32 = s32[] constant(32)
  add = s32[] add(param_1, constant.32)
  select = s32[] select(compare, add, param_1)
  dynamic-slice = bf16[1,4096,16384]{2,1,0} dynamic-slice(param_0, select, constant, constant),
      dynamic_slice_sizes={1,4096,16384}
  ROOT bitcast.41087 = bf16[4096,16384]{1,0} bitcast(dynamic-slice)
}
ENTRY entry {
  p0 = s32[] parameter(0)
  p1 = bf16[32,4096,16384]{2,1,0} parameter(1)
  p2 = bf16[32,4096,16384]{2,1,0} parameter(2)
  fusion.1 = bf16[4096,16384]{1,0} fusion(p1, p0), kind=kLoop, calls=fused_computation_1
  fusion.2 = bf16[4096,16384]{1,0} fusion(p2, p0), kind=kLoop, calls=fused_computation_2
  ROOT root = (bf16[4096,16384]{1,0}, bf16[4096,16384]{1,0}) tuple(fusion.1, fusion.2)
}""")
    assert not changed
    assert log == []  # the scalar is no profitable shared operand: no pair is even considered


def test_sibling_reduce_and_reduce_multi_output_fusion():
    text = PREFIX + """
fused_computation {
  const.1 = f32[] constant(1)
  p0.1 = f32[2,64,8,8]{3,2,1,0} parameter(0)
  mul = f32[2,64,8,8]{3,2,1,0} multiply(p0.1, p0.1)
  reduce.1 = f32[64]{0} reduce(mul, const.1), dimensions={0,2,3}, to_apply=scalar_add_computation
  reduce.2 = f32[64]{0} reduce(p0.1, const.1), dimensions={0,2,3}, to_apply=scalar_add_computation
  ROOT tuple = (f32[64]{0}, f32[64]{0}) tuple(reduce.1, reduce.2)
}
ENTRY entry {
  p0 = f32[2,64,8,8]{3,2,1,0} parameter(0)
  const = f32[] constant(1)
  fusion = (f32[64]{0}, f32[64]{0}) fusion(p0), kind=kInput, calls=fused_computation
  get-tuple-element = f32[64]{0} get-tuple-element(fusion), index=0
  get-tuple-element.1 = f32[64]{0} get-tuple-element(fusion), index=1
  reduce.3 = f32[64]{0} reduce(p0, const), dimensions={0,2,3}, to_apply=scalar_add_computation
  ROOT root = (f32[64]{0}, f32[64]{0}, f32[64]{0}) tuple(get-tuple-element, get-tuple-element.1, reduce.3)
}"""
    module, changed, _ = mof(text)
    assert changed
    assert fused_root_opcodes(root_fusion(module)) == ["reduce", "reduce", "reduce"]
    assert [g.attrs["index"] for g in module.entry.root.operands] == [0, 1, 2]
    check_numerics(text, module)


def test_multi_output_sibling_is_checked_against_its_reduce_output():
    _, changed, log = mof(PREFIX + """
fused_computation_1 {
  p1.1 = f32[10,10]{1,0} parameter(1)
  mul = f32[10,10]{1,0} multiply(p1.1, p1.1)
  const.1 = f32[] parameter(0)
  reduce.1 = f32[] reduce(p1.1, const.1), dimensions={0,1}, to_apply=scalar_add_computation
  ROOT tuple = (f32[10,10], f32[]) tuple(mul, reduce.1)
}
fused_computation_2 {
  p1.2 = f32[10,10]{1,0} parameter(1)
  const.2 = f32[] parameter(0)
  ROOT reduce.2 = f32[10] reduce(p1.2, const.2), dimensions={0}, to_apply=scalar_mul_computation
}
ENTRY entry {
  p0 = f32[] parameter(0)
  p1 = f32[10,10]{1,0} parameter(1)
  p2 = f32[] parameter(2)
  fusion.1 = (f32[10,10], f32[]) fusion(p0, p1), kind=kInput, calls=fused_computation_1
  get-tuple-element.1 = f32[10,10] get-tuple-element(fusion.1), index=0
  get-tuple-element.2 = f32[] get-tuple-element(fusion.1), index=1
  fusion.2 = f32[10] fusion(p2, p1), kind=kInput, calls=fused_computation_2
  ROOT root = (f32[10,10], f32[], f32[10]) tuple(get-tuple-element.1, get-tuple-element.2, fusion.2)
}""")
    assert not changed
    assert log == []


VARIADIC_MINMAX = """
fused_computation.1117 {
  param_0.2433 = f32[] parameter(0)
  param_1.2571 = f32[] parameter(1)
  compare.1770 = pred[] compare(param_0.2433, param_1.2571), direction=LE
  select.682 = f32[] select(compare.1770, param_0.2433, param_1.2571)
  compare.1303.clone.1 = pred[] compare(param_0.2433, param_1.2571), direction=EQ
  param_2.6460 = s32[] parameter(2)
  param_3.6755 = s32[] parameter(3)
  minimum.633.clone.1 = s32[] minimum(param_2.6460, param_3.6755)
  select.398.clone.1 = s32[] select(compare.1770, param_2.6460, param_3.6755)
  select.397.clone.1 = s32[] select(compare.1303.clone.1, minimum.633.clone.1, select.398.clone.1)
  ROOT tuple.151 = (f32[], s32[]) tuple(select.682, select.397.clone.1)
}
minmax_func.223 {
  lhs_value.224 = f32[] parameter(0)
  rhs_value.226 = f32[] parameter(2)
  lhs_index.225 = s32[] parameter(1)
  rhs_index.227 = s32[] parameter(3)
  ROOT fusion.1117 = (f32[], s32[]) fusion(lhs_value.224, rhs_value.226, lhs_index.225, rhs_index.227),
      kind=kLoop, calls=fused_computation.1117
}
"""


def test_loop_variadic_reduction_fusions_are_not_fused():
    _, changed, _ = mof(PREFIX + VARIADIC_MINMAX + """
fused_computation {
  tmp_0 = f32[5541,10]{1,0} parameter(0)
  tmp_1 = s32[5541,10]{1,0} iota(), iota_dimension=1
  tmp_2 = f32[] constant(-inf)
  tmp_3 = s32[] constant(0)
  ROOT tmp_4 = (f32[5541]{0}, s32[5541]{0}) reduce(tmp_0, tmp_1, tmp_2, tmp_3), dimensions={1},
      to_apply=minmax_func.223
}
fused_computation2 {
  tmp_0 = f32[5541,10]{1,0} parameter(0)
  tmp_1 = s32[5541,10]{1,0} iota(), iota_dimension=1
  tmp_2 = f32[] constant(inf)
  tmp_3 = s32[] constant(1)
  ROOT tmp_4 = (f32[5541]{0}, s32[5541]{0}) reduce(tmp_0, tmp_1, tmp_2, tmp_3), dimensions={1},
      to_apply=minmax_func.223
}
ENTRY e {
  tmp_0 = f32[5541,10]{1,0} parameter(0)
  tmp_1 = (f32[5541]{0}, s32[5541]{0}) fusion(tmp_0), kind=kLoop, calls=fused_computation
  tmp_2 = s32[5541]{0} get-tuple-element(tmp_1), index=1
  tmp_4 = (f32[5541]{0}, s32[5541]{0}) fusion(tmp_0), kind=kLoop, calls=fused_computation2
  tmp_5 = s32[5541]{0} get-tuple-element(tmp_4), index=1
  ROOT tmp_6 = s32[5541]{0} add(tmp_2, tmp_5)
}""")
    assert not changed


def test_input_variadic_reduction_fusions_are_left_alone():
    """XLA fuses these into a tuple of two tuple-shaped reduces; we decline tuple-shaped outputs that
    are not a root tuple (nested tuple outputs, which hlo-codegen does not emit)."""
    module, changed, _ = mof(PREFIX + VARIADIC_MINMAX + """
fused_computation.73 {
  bitcast.86661 = f32[3,1024,300]{2,1,0} parameter(0)
  iota.734 = s32[3,1,1024,300]{3,2,1,0} iota(), iota_dimension=3
  bitcast.97555 = s32[3,1024,300]{2,1,0} bitcast(iota.734)
  constant_3917 = f32[] constant(inf)
  constant_3918 = s32[] constant(0)
  ROOT reduce.1069 = (f32[3,1024]{1,0}, s32[3,1024]{1,0}) reduce(bitcast.86661, bitcast.97555,
      constant_3917, constant_3918), dimensions={2}, to_apply=minmax_func.223
}
fused_computation.84 {
  bitcast.86676 = f32[3,1024,300]{2,1,0} parameter(0)
  iota.732 = s32[3,1,1024,300]{3,2,1,0} iota(), iota_dimension=3
  bitcast.97553 = s32[3,1024,300]{2,1,0} bitcast(iota.732)
  constant_3915 = f32[] constant(inf)
  constant_3916 = s32[] constant(0)
  ROOT reduce.1070 = (f32[3,1024]{1,0}, s32[3,1024]{1,0}) reduce(bitcast.86676, bitcast.97553,
      constant_3915, constant_3916), dimensions={2}, to_apply=minmax_func.223
}
ENTRY e {
  p0 = f32[3,1024,300]{2,1,0} parameter(0)
  fusion.84 = (f32[3,1024]{1,0}, s32[3,1024]{1,0}) fusion(p0), kind=kInput, calls=fused_computation.84
  gte.391 = s32[3,1024]{1,0} get-tuple-element(fusion.84), index=1
  fusion.73 = (f32[3,1024]{1,0}, s32[3,1024]{1,0}) fusion(p0), kind=kInput, calls=fused_computation.73
  gte.393 = s32[3,1024]{1,0} get-tuple-element(fusion.73), index=1
  ROOT r = s32[3,1024]{1,0} add(gte.391, gte.393)
}""")
    assert not changed
    assert len(module.entry.parameters[0].users) == 2


TWO_LOOPS = PREFIX + """
fused_computation_1 {
  p0.1 = f32[6400]{0} parameter(0)
  ROOT mul = f32[6400]{0} multiply(p0.1, p0.1)
}
fused_computation_2 {
  p0.2 = f32[6400]{0} parameter(0)
  const.2 = f32[] constant(1)
  broadcast = f32[6400]{0} broadcast(const.2), dimensions={}
  ROOT div = f32[6400]{0} divide(p0.2, broadcast)
}
ENTRY entry {
  p0 = f32[6400]{0} parameter(0)
  fusion.1 = f32[6400]{0} fusion(p0), kind=kLoop, calls=fused_computation_1
  fusion.2 = f32[6400]{0} fusion(p0), kind=kLoop, calls=fused_computation_2
  ROOT root = (f32[6400]{0}, f32[6400]{0}) tuple(fusion.1, fusion.2)
}"""


def test_two_loop_fusions():
    module, changed, log = mof(TWO_LOOPS)
    assert changed
    fusion = root_fusion(module)
    assert fused_root_opcodes(fusion) == ["multiply", "divide"]
    assert fusion.name == "fusion.1" and fusion.attrs["kind"] == "kLoop"
    assert log == ["fusing sibling fusion.2 into fusion.1 (operand p0)"]
    # the merged-away computation is gone
    assert [c.name for c in module.computations] == ["scalar_add_computation", "scalar_mul_computation",
                                                     "fused_computation_1", "entry"]
    check_numerics(TWO_LOOPS, module)


def test_loop_fusion_and_plain_elementwise_sibling():
    text = PREFIX + """
fused_computation_1 {
  p0.1 = f32[6400]{0} parameter(0)
  ROOT mul = f32[6400]{0} multiply(p0.1, p0.1)
}
ENTRY entry {
  p0 = f32[6400]{0} parameter(0)
  fusion.1 = f32[6400]{0} fusion(p0), kind=kLoop, calls=fused_computation_1
  const.2 = f32[] constant(1)
  broadcast = f32[6400]{0} broadcast(const.2), dimensions={}
  div = f32[6400]{0} divide(p0, broadcast)
  ROOT root = (f32[6400]{0}, f32[6400]{0}) tuple(fusion.1, div)
}"""
    module, changed, _ = mof(text)
    assert changed
    assert fused_root_opcodes(root_fusion(module)) == ["multiply", "divide"]
    assert "div" not in [i.name for i in module.entry.instructions]
    check_numerics(text, module)


def test_sibling_loops_with_different_shapes_are_not_fused():
    _, changed, log = mof(PREFIX + """
fused_computation_1 {
  p0.1 = f32[8,1,5,16,1,2]{5,4,3,2,1,0} parameter(0)
  ROOT mul = f32[8,1,5,16,1,2]{5,4,3,2,1,0} multiply(p0.1, p0.1)
}
fused_computation_2 {
  p0.2 = f32[8,1,5,16,1,2]{5,4,3,2,1,0} parameter(0)
  const.2 = f32[] constant(0)
  ROOT reduce = f32[1,5,1,2]{3,2,1,0} reduce(p0.2, const.2), dimensions={0,3}, to_apply=scalar_add_computation
}
ENTRY entry {
  p0 = f32[8,1,5,16,1,2]{5,4,3,2,1,0} parameter(0)
  fusion.1 = f32[8,1,5,16,1,2]{5,4,3,2,1,0} fusion(p0), kind=kLoop, calls=fused_computation_1
  fusion.2 = f32[1,5,1,2]{3,2,1,0} fusion(p0), kind=kLoop, calls=fused_computation_2
  ROOT root = (f32[8,1,5,16,1,2]{5,4,3,2,1,0}, f32[1,5,1,2]{3,2,1,0}) tuple(fusion.1, fusion.2)
}""")
    assert not changed
    assert refused(log, "loop_shapes")


def test_sibling_loop_and_multi_output_loop():
    text = PREFIX + """
fused_computation_1 {
  p0.1 = f32[8,1,5,16,1,1]{5,4,3,2,1,0} parameter(0)
  mul = f32[8,1,5,16,1,1]{5,4,3,2,1,0} multiply(p0.1, p0.1)
  exp = f32[8,1,5,16,1,1]{5,4,3,2,1,0} exponential(p0.1)
  ROOT tuple = (f32[8,1,5,16,1,1]{5,4,3,2,1,0}, f32[8,1,5,16,1,1]{5,4,3,2,1,0}) tuple(mul, exp)
}
fused_computation_2 {
  p0.2 = f32[8,1,5,16,1,1]{5,4,3,2,1,0} parameter(0)
  const.2 = f32[] constant(0)
  broadcast = f32[8,1,5,16,1,1]{5,4,3,2,1,0} broadcast(const.2), dimensions={}
  ROOT add = f32[8,1,5,16,1,1]{5,4,3,2,1,0} add(p0.2, broadcast)
}
ENTRY entry {
  p0 = f32[8,1,5,16,1,1]{5,4,3,2,1,0} parameter(0)
  fusion.1 = (f32[8,1,5,16,1,1]{5,4,3,2,1,0}, f32[8,1,5,16,1,1]{5,4,3,2,1,0}) fusion(p0), kind=kLoop,
      calls=fused_computation_1
  fusion.2 = f32[8,1,5,16,1,1]{5,4,3,2,1,0} fusion(p0), kind=kLoop, calls=fused_computation_2
  gte0 = f32[8,1,5,16,1,1]{5,4,3,2,1,0} get-tuple-element(fusion.1), index=0
  gte1 = f32[8,1,5,16,1,1]{5,4,3,2,1,0} get-tuple-element(fusion.1), index=1
  ROOT root = (f32[8,1,5,16,1,1]{5,4,3,2,1,0}, f32[8,1,5,16,1,1]{5,4,3,2,1,0},
      f32[8,1,5,16,1,1]{5,4,3,2,1,0}) tuple(gte0, gte1, fusion.2)
}"""
    module, changed, _ = mof(text)
    assert changed
    assert fused_root_opcodes(root_fusion(module)) == ["multiply", "exponential", "add"]
    check_numerics(text, module)


def test_sibling_multi_output_loop_and_multi_output_loop():
    text = PREFIX + """
fused_computation_1 {
  p0.1 = f32[8,16]{1,0} parameter(0)
  mul = f32[8,16]{1,0} multiply(p0.1, p0.1)
  exp = f32[8,16]{1,0} exponential(p0.1)
  ROOT tuple = (f32[8,16]{1,0}, f32[8,16]{1,0}) tuple(mul, exp)
}
fused_computation_2 {
  p0.2 = f32[8,16]{1,0} parameter(0)
  const.2 = f32[] constant(0)
  broadcast = f32[8,16]{1,0} broadcast(const.2), dimensions={}
  add = f32[8,16]{1,0} add(p0.2, broadcast)
  ROOT tuple.1 = (f32[8,16]{1,0}, f32[8,16]{1,0}) tuple(add, broadcast)
}
ENTRY entry {
  p0 = f32[8,16]{1,0} parameter(0)
  fusion.1 = (f32[8,16]{1,0}, f32[8,16]{1,0}) fusion(p0), kind=kLoop, calls=fused_computation_1
  fusion.2 = (f32[8,16]{1,0}, f32[8,16]{1,0}) fusion(p0), kind=kLoop, calls=fused_computation_2
  gte0 = f32[8,16]{1,0} get-tuple-element(fusion.1), index=0
  gte1 = f32[8,16]{1,0} get-tuple-element(fusion.1), index=1
  gte2 = f32[8,16]{1,0} get-tuple-element(fusion.2), index=0
  gte3 = f32[8,16]{1,0} get-tuple-element(fusion.2), index=1
  ROOT root = (f32[8,16]{1,0}, f32[8,16]{1,0}, f32[8,16]{1,0}, f32[8,16]{1,0}) tuple(gte0, gte1, gte2, gte3)
}"""
    module, changed, _ = mof(text)
    assert changed
    fusion = root_fusion(module)
    assert sorted(fused_root_opcodes(fusion)[2:]) == ["add", "broadcast"]
    assert fused_root_opcodes(fusion)[:2] == ["multiply", "exponential"]
    assert all(root_fusion(module, i) is fusion for i in range(4))
    check_numerics(text, module)


def test_sibling_loop_and_multi_output_loop_with_different_shapes():
    _, changed, _ = mof(PREFIX + """
fused_computation_1 {
  p0.1 = f32[8,1,5,16,1,2]{5,4,3,2,1,0} parameter(0)
  mul = f32[8,1,5,16,1,2]{5,4,3,2,1,0} multiply(p0.1, p0.1)
  exp = f32[8,1,5,16,1,2]{5,4,3,2,1,0} exponential(p0.1)
  ROOT tuple = (f32[8,1,5,16,1,2]{5,4,3,2,1,0}, f32[8,1,5,16,1,2]{5,4,3,2,1,0}) tuple(mul, exp)
}
fused_computation_2 {
  p0.2 = f32[8,1,5,16,1,2]{5,4,3,2,1,0} parameter(0)
  const.2 = f32[] constant(0)
  ROOT reduce = f32[1,5,1,2]{3,2,1,0} reduce(p0.2, const.2), dimensions={0,3}, to_apply=scalar_add_computation
}
ENTRY entry {
  p0 = f32[8,1,5,16,1,2]{5,4,3,2,1,0} parameter(0)
  fusion.1 = (f32[8,1,5,16,1,2]{5,4,3,2,1,0}, f32[8,1,5,16,1,2]{5,4,3,2,1,0}) fusion(p0), kind=kLoop,
      calls=fused_computation_1
  fusion.2 = f32[1,5,1,2]{3,2,1,0} fusion(p0), kind=kLoop, calls=fused_computation_2
  gte0 = f32[8,1,5,16,1,2]{5,4,3,2,1,0} get-tuple-element(fusion.1), index=0
  gte1 = f32[8,1,5,16,1,2]{5,4,3,2,1,0} get-tuple-element(fusion.1), index=1
  ROOT root = (f32[8,1,5,16,1,2]{5,4,3,2,1,0}, f32[8,1,5,16,1,2]{5,4,3,2,1,0},
      f32[1,5,1,2]{3,2,1,0}) tuple(gte0, gte1, fusion.2)
}""")
    assert not changed


def test_bitcast_and_loop_fusion_siblings_are_not_fused():
    _, changed, _ = mof("""
HloModule test
fused_computation_1 {
  p0.1 = f32[2048,16000]{1,0} parameter(0)
  bitcast = f32[2048,1,16000]{2,1,0} bitcast(p0.1)
  ROOT exp = f32[2048,1,16000]{2,1,0} exponential(bitcast)
}
ENTRY main {
  param_0 = f32[2048,16000]{1,0} parameter(0)
  fusion = f32[2048,1,16000]{2,1,0} fusion(param_0), kind=kLoop, calls=fused_computation_1
  bitcast = f32[16000,1,2048]{2,1,0} bitcast(param_0)
  ROOT tuple.143 = (f32[16000,1,2048]{2,1,0}, f32[2048,1,16000]{2,1,0}) tuple(bitcast, fusion)
}""")
    assert not changed


COLUMN_AND_ELEMENTWISE = PREFIX + """
fr {
  p = f32[1024,256]{1,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[256]{0} reduce(p, z), dimensions={0}, to_apply=scalar_add_computation
}
fe {
  p = f32[1024,256]{1,0} parameter(0)
  ROOT e = f32[1024,256]{1,0} exponential(p)
}
ENTRY e {
  p0 = f32[1024,256]{1,0} parameter(0)
  r = f32[256]{0} fusion(p0), kind=kInput, calls=fr
  e = f32[1024,256]{1,0} fusion(p0), kind=kLoop, calls=fe
  ROOT t = (f32[256]{0}, f32[1024,256]{1,0}) tuple(r, e)
}"""


def test_column_reduction_and_elementwise_siblings_with_heads_rule():
    p = MultiOutputFusion(column_reduction_rule=True)
    _, changed = run_pass(p, COLUMN_AND_ELEMENTWISE)
    assert not changed
    assert refused(p.decisions, "column_reduction")


def test_column_reduction_and_elementwise_siblings_as_the_measured_xla():
    """jaxlib 0.10.2's XLA fuses them (one kernel reads p0 once), and so do we by default."""
    module, changed, _ = mof(COLUMN_AND_ELEMENTWISE)
    assert changed
    fusion = root_fusion(module)
    assert fused_root_opcodes(fusion) == ["reduce", "exponential"] and fusion.attrs["kind"] == "kInput"
    check_numerics(COLUMN_AND_ELEMENTWISE, module)


def test_row_reduction_and_elementwise_siblings_are_fused():
    text = PREFIX + """
fr {
  p = f32[64,256]{1,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[64]{0} reduce(p, z), dimensions={1}, to_apply=scalar_add_computation
}
fe {
  p = f32[64,256]{1,0} parameter(0)
  ROOT e = f32[64,256]{1,0} exponential(p)
}
ENTRY e {
  p0 = f32[64,256]{1,0} parameter(0)
  e = f32[64,256]{1,0} fusion(p0), kind=kLoop, calls=fe
  r = f32[64]{0} fusion(p0), kind=kInput, calls=fr
  ROOT t = (f32[64]{0}, f32[64,256]{1,0}) tuple(r, e)
}"""
    module, changed, _ = mof(text)
    assert changed
    fusion = root_fusion(module)
    assert fused_root_opcodes(fusion) == ["exponential", "reduce"]
    assert fusion.attrs["kind"] == "kInput"  # an input fusion was merged in
    check_numerics(text, module)


# -- producer-consumer ------------------------------------------------------------------------------
def test_bitcast_producer_and_elementwise_are_not_fused():
    _, changed, _ = mof("""
HloModule test
ENTRY main {
  param_0 = f32[2048,16000]{1,0} parameter(0)
  convert = bf16[2048,16000]{1,0} convert(param_0)
  bitcast = bf16[16000,1,2048]{2,1,0} bitcast(convert)
  ROOT tuple.143 = (bf16[16000,1,2048]{2,1,0}, bf16[2048,16000]{1,0}) tuple(bitcast, convert)
}""")
    assert not changed


ELEMENTWISE_AND_REDUCE = PREFIX + """
ENTRY reduce {
  p0 = f32[32,32,32]{2,1,0} parameter(0)
  c0 = f32[] constant(0)
  exp = f32[32,32,32]{2,1,0} exponential(p0)
  reduce = f32[32,32]{1,0} reduce(exp, c0), dimensions={2}, to_apply=scalar_add_computation
  ROOT root = (f32[32,32]{1,0}, f32[32,32,32]{2,1,0}) tuple(reduce, exp)
}"""


def test_producer_consumer_elementwise_and_reduce():
    module, changed, log = mof(ELEMENTWISE_AND_REDUCE)
    assert changed
    fusion = root_fusion(module, 0)
    assert root_fusion(module, 1) is fusion
    assert fused_root_opcodes(fusion) == ["reduce", "exponential"]
    assert fusion.attrs["kind"] == "kInput"  # ChooseFusionKind: the consumer is a reduction
    assert log[-1] == "fusing producer exp into reduce as an extra output"
    check_numerics(ELEMENTWISE_AND_REDUCE, module)


def test_producer_consumer_loop_fusion_and_reduce():
    text = PREFIX + """
fused_add {
  p0.1 = f32[32,32,32]{2,1,0} parameter(0)
  p1.1 = f32[32,32,32]{2,1,0} parameter(1)
  ROOT add = f32[32,32,32]{2,1,0} add(p0.1, p1.1)
}
ENTRY reduce {
  p0 = f32[32,32,32]{2,1,0} parameter(0)
  p1 = f32[32,32,32]{2,1,0} parameter(1)
  c0 = f32[] constant(0)
  add = f32[32,32,32]{2,1,0} fusion(p0, p1), kind=kLoop, calls=fused_add
  reduce = f32[32,32]{1,0} reduce(add, c0), dimensions={2}, to_apply=scalar_add_computation
  ROOT root = (f32[32,32]{1,0}, f32[32,32,32]{2,1,0}) tuple(reduce, add)
}"""
    module, changed, _ = mof(text)
    assert changed
    assert fused_root_opcodes(root_fusion(module)) == ["reduce", "add"]
    assert "fused_add" not in [c.name for c in module.computations]
    check_numerics(text, module)


def test_producer_consumer_loop_fusion_and_reduce_fusion():
    text = PREFIX + """
fused_select {
  p1.1 = f32[32,32,32]{2,1,0} parameter(1)
  c0 = f32[] constant(0)
  broadcast = f32[32,32,32]{2,1,0} broadcast(c0), dimensions={}
  greater-than = pred[32,32,32]{2,1,0} compare(p1.1, broadcast), direction=GT
  p0.1 = f32[32,32,32]{2,1,0} parameter(0)
  ROOT select = f32[32,32,32]{2,1,0} select(greater-than, p0.1, broadcast)
}
fused_reduce {
  p0.2 = f32[32,32,32]{2,1,0} parameter(0)
  c1 = f32[] constant(0)
  r1 = f32[32,32]{1,0} reduce(p0.2, c1), dimensions={2}, to_apply=scalar_add_computation
  mul = f32[32,32,32]{2,1,0} multiply(p0.2, p0.2)
  r2 = f32[32,32]{1,0} reduce(mul, c1), dimensions={2}, to_apply=scalar_add_computation
  ROOT tuple = (f32[32,32]{1,0}, f32[32,32]{1,0}) tuple(r1, r2)
}
ENTRY reduce {
  p0 = f32[32,32,32]{2,1,0} parameter(0)
  p1 = f32[32,32,32]{2,1,0} parameter(1)
  select = f32[32,32,32]{2,1,0} fusion(p0, p1), kind=kLoop, calls=fused_select
  fusion = (f32[32,32]{1,0}, f32[32,32]{1,0}) fusion(select), kind=kInput, calls=fused_reduce
  gte0 = f32[32,32]{1,0} get-tuple-element(fusion), index=0
  gte1 = f32[32,32]{1,0} get-tuple-element(fusion), index=1
  ROOT root = (f32[32,32]{1,0}, f32[32,32]{1,0}, f32[32,32,32]{2,1,0}) tuple(gte1, gte1, select)
}"""
    module, changed, _ = mof(text)
    assert changed
    fusion = root_fusion(module)
    assert fused_root_opcodes(fusion) == ["reduce", "reduce", "select"]
    assert root_fusion(module, 2) is fusion
    check_numerics(text, module)


def test_loop_reduce_fusion_consumer_is_not_a_multi_output_root():
    _, changed, log = mof(PREFIX + """
fused_element_wise {
  p0.1 = f32[2,2,2]{2,1,0} parameter(0)
  p1.1 = f32[2,2,2]{2,1,0} parameter(1)
  ROOT root = f32[2,2,2]{2,1,0} add(p0.1, p1.1)
}
fused_reduce {
  p0.2 = f32[2,2,2]{2,1,0} parameter(0)
  mul = f32[2,2,2]{2,1,0} multiply(p0.2, p0.2)
  broadcast = f32[2,2,2,2]{3,2,1,0} broadcast(mul), dimensions={3,2,1}
  c1 = f32[] constant(0)
  ROOT reduce = f32[2,2]{1,0} reduce(broadcast, c1), dimensions={1,3}, to_apply=scalar_add_computation
}
ENTRY reduce {
  p0 = f32[2,2,2]{2,1,0} parameter(0)
  p1 = f32[2,2,2]{2,1,0} parameter(1)
  element_wise = f32[2,2,2]{2,1,0} fusion(p0, p1), kind=kLoop, calls=fused_element_wise
  fusion = f32[2,2]{1,0} fusion(element_wise), kind=kLoop, calls=fused_reduce
  ROOT root = (f32[2,2]{1,0}, f32[2,2,2]{2,1,0}) tuple(fusion, element_wise)
}""")
    assert not changed
    assert refused(log, "loop_shapes")


def test_physically_transposing_producer_is_not_fused():
    _, changed, _ = mof(PREFIX + """
mixed_input_layouts_computation {
  p0.1 = f16[128,32,32,1024]{3,2,1,0} parameter(0)
  p1.1 = f16[128,1024,32,32]{3,2,1,0} parameter(1)
  transpose = f16[128,32,32,1024]{3,2,1,0} transpose(p1.1), dimensions={0,2,3,1}
  c0 = f16[] constant(0)
  broadcast = f16[128,32,32,1024]{3,2,1,0} broadcast(c0), dimensions={}
  greater-than = pred[128,32,32,1024]{3,2,1,0} compare(transpose, broadcast), direction=GT
  ROOT root = f16[128,32,32,1024]{3,2,1,0} select(greater-than, p0.1, broadcast)
}
fused_reduce {
  p0.2 = f16[128,32,32,1024]{3,2,1,0} parameter(0)
  convert = f32[128,32,32,1024]{3,2,1,0} convert(p0.2)
  c0.2 = f32[] constant(0)
  ROOT reduce = f32[1024]{0} reduce(convert, c0.2), dimensions={0,1,2}, to_apply=scalar_add_computation
}
ENTRY reduce {
  p0 = f16[128,32,32,1024]{3,2,1,0} parameter(0)
  p1 = f16[128,1024,32,32]{3,2,1,0} parameter(1)
  loop_fusion = f16[128,32,32,1024]{3,2,1,0} fusion(p0, p1), kind=kLoop, calls=mixed_input_layouts_computation
  reduce_fusion = f32[1024]{0} fusion(loop_fusion), kind=kInput, calls=fused_reduce
  ROOT root = (f32[1024]{0}, f16[128,32,32,1024]{3,2,1,0}) tuple(reduce_fusion, loop_fusion)
}""")
    assert not changed


CYCLES = PREFIX + """
fused_add {
  p0 = f32[32,32,32]{2,1,0} parameter(0)
  p1 = f32[32,32,32]{2,1,0} parameter(1)
  ROOT add = f32[32,32,32]{2,1,0} add(p0, p1)
}
fused_mul {
  p2 = f32[64,64,64]{2,1,0} parameter(0)
  p3 = f32[64,64,64]{2,1,0} parameter(1)
  ROOT multiply = f32[64,64,64]{2,1,0} multiply(p2, p3)
}
fused_reduce_1 {
  p4 = f32[32,32,32]{2,1,0} parameter(0)
  p5 = f32[64,64,64]{2,1,0} parameter(1)
  slice = f32[32,32,32]{2,1,0} slice(p5), slice={[0:32], [0:32], [0:32]}
  add = f32[32,32,32]{2,1,0} add(p4, slice)
  c0 = f32[] constant(0)
  ROOT r1 = f32[32,32]{1,0} reduce(add, c0), dimensions={2}, to_apply=scalar_add_computation
}
fused_reduce_2 {
  p6 = f32[32,32,32]{2,1,0} parameter(0)
  p7 = f32[64,64,64]{2,1,0} parameter(1)
  c0 = f32[] constant(0)
  pad = f32[64,64,64]{2,1,0} pad(p6, c0), padding=16_16x16_16x16_16
  mul = f32[64,64,64]{2,1,0} multiply(pad, p7)
  ROOT r1 = f32[64,64]{1,0} reduce(mul, c0), dimensions={2}, to_apply=scalar_add_computation
}
ENTRY reduce {
  p8 = f32[32,32,32]{2,1,0} parameter(0)
  p9 = f32[64,64,64]{2,1,0} parameter(1)
  add = f32[32,32,32]{2,1,0} fusion(p8, p8), kind=kLoop, calls=fused_add
  mul = f32[64,64,64]{2,1,0} fusion(p9, p9), kind=kLoop, calls=fused_mul
  reduce1 = f32[32,32]{1,0} fusion(add, mul), kind=kInput, calls=fused_reduce_1
  reduce2 = f32[64,64]{1,0} fusion(add, mul), kind=kInput, calls=fused_reduce_2
  ROOT root = (f32[32,32,32]{2,1,0}, f32[32,32]{1,0}, f32[64,64]{1,0}, f32[64,64,64]{2,1,0}) tuple(add,
      reduce1, reduce2, mul)
}"""


def test_producer_consumer_fusion_avoids_cycles():
    module, changed, log = mof(CYCLES)
    assert changed
    assert count_mofs(module) == 1
    assert refused(log, "cycle")
    check_numerics(CYCLES, module)


def test_prefers_fusing_the_producer_into_a_fusion_consumer():
    text = PREFIX + """
fused_add {
  p0 = f32[32,32,32]{2,1,0} parameter(0)
  p1 = f32[32,32,32]{2,1,0} parameter(1)
  ROOT add = f32[32,32,32]{2,1,0} add(p0, p1)
}
fused_reduce {
  p0 = f32[32,32,32]{2,1,0} parameter(0)
  p1 = f32[64,64,64]{2,1,0} parameter(1)
  slice = f32[32,32,32]{2,1,0} slice(p1), slice={[0:32], [0:32], [0:32]}
  add = f32[32,32,32]{2,1,0} add(p0, slice)
  c0 = f32[] constant(0)
  ROOT r1 = f32[32,32]{1,0} reduce(add, c0), dimensions={2}, to_apply=scalar_add_computation
}
ENTRY reduce {
  p0 = f32[32,32,32]{2,1,0} parameter(0)
  p1 = f32[64,64,64]{2,1,0} parameter(1)
  add = f32[32,32,32]{2,1,0} fusion(p0, p0), kind=kLoop, calls=fused_add
  c0 = f32[] constant(0)
  reduce2 = f32[32,32]{1,0} reduce(add, c0), dimensions={2}, to_apply=scalar_add_computation
  reduce = f32[32,32]{1,0} fusion(add, p1), kind=kInput, calls=fused_reduce
  ROOT root = (f32[32,32,32]{2,1,0}, f32[32,32]{1,0}, f32[32,32]{1,0}) tuple(add, reduce, reduce2)
}"""
    module, changed, _ = mof(text)
    assert changed
    assert count_mofs(module) == 1
    check_numerics(text, module)


def test_avoids_fusions_over_the_operand_limit():
    n = 200
    shape = "f32[10,100]"
    lines = [f"  p{i} = {shape} parameter({i})" for i in range(n)]
    comps = []
    lines.append(f"  sum1 = {shape} fusion(p0, p1), kind=kLoop, calls=mul1")
    comps.append(f"mul1 {{\n  a = {shape} parameter(0)\n  b = {shape} parameter(1)\n"
                 f"  ROOT m = {shape} multiply(a, b)\n}}")
    for i in range(2, n):
        comps.append(f"mul{i} {{\n  a = {shape} parameter(0)\n  b = {shape} parameter(1)\n"
                     f"  ROOT m = {shape} multiply(a, b)\n}}")
        lines.append(f"  g{i} = {shape} fusion(p{i - 1}, p{i}), kind=kLoop, calls=mul{i}")
        lines.append(f"  sum{i} = {shape} add(sum{i - 1}, g{i})")
    lines[-1] = lines[-1].replace(f"  sum{n - 1} =", f"  ROOT sum{n - 1} =")
    text = "HloModule large\n" + "\n".join(comps) + "\nENTRY e {\n" + "\n".join(lines) + "\n}\n"
    module, changed, _ = mof(text)
    assert changed
    for instr in module.entry.instructions:
        outputs = len(instr.shape.tuple_shapes) + 1 if instr.shape.is_tuple else 1
        assert len(instr.operands) + outputs <= 96, instr.name


def test_multiple_dynamic_update_slices_are_not_fused():
    _, changed, log = mof("""
HloModule dus_mof
fusion.1 {
  p.0 = f16[50,96,1024]{2,1,0} parameter(0)
  p.1 = f16[1,96,1024]{2,1,0} parameter(1)
  c.0 = s32[] constant(0)
  ROOT %dynamic-update-slice = f16[50,96,1024]{2,1,0} dynamic-update-slice(p.0, p.1, c.0, c.0, c.0)
}
fusion.2 {
  p.0 = f16[50,96,1024]{2,1,0} parameter(0)
  p.1 = f16[1,96,1024]{2,1,0} parameter(1)
  c.0 = s32[] constant(0)
  ROOT %dynamic-update-slice = f16[50,96,1024]{2,1,0} dynamic-update-slice(p.0, p.1, c.0, c.0, c.0)
}
ENTRY entry {
  p.00 = f16[50,96,1024]{2,1,0} parameter(0)
  p.01 = f16[50,96,1024]{2,1,0} parameter(1)
  p.1 = f16[1,96,1024]{2,1,0} parameter(2)
  f1 = f16[50,96,1024] fusion(p.00, p.1), kind=kLoop, calls=fusion.1
  f2 = f16[50,96,1024] fusion(p.01, p.1), kind=kLoop, calls=fusion.2
  ROOT tuple = (f16[50,96,1024],f16[50,96,1024]) tuple(f1, f2)
}""")
    assert not changed
    assert refused(log, "multiple_dus")


def _ten_reductions(dim: int) -> str:
    comps = "".join(f"""
fused_computation{i} {{
  p0 = f32[64,64] parameter(0)
  p1 = f32[64,64] parameter(1)
  p2 = f32[] parameter(2)
  add = f32[64,64] add(p0, p1)
  ROOT reduce = f32[64] reduce(add, p2), dimensions={{{dim}}}, to_apply=scalar_add_computation
}}""" for i in range(10))
    params = "\n".join(f"  param{i} = f32[64,64] parameter({i})" for i in range(10))
    outs = "\n".join(f"  out{i} = f32[64] fusion(param{i}, param{(i + 1) % 10}, zero), kind=kInput, "
                     f"calls=fused_computation{i}" for i in range(10))
    shapes = ", ".join(["f32[64]"] * 10)
    names = ", ".join(f"out{i}" for i in range(10))
    return PREFIX + comps + f"""
ENTRY computation {{
  zero = f32[] constant(0)
{params}
{outs}
  ROOT out = ({shapes}) tuple({names})
}}"""


def test_shared_memory_budget_limits_column_reductions_to_pairs():
    module, changed, log = mof(_ten_reductions(0))
    assert changed
    assert count_mofs(module) == 5
    assert refused(log, "shared_memory")


def test_do_not_group_too_many_row_reductions():
    module, changed, log = mof(_ten_reductions(1))
    assert changed
    assert count_mofs(module) == 2
    assert refused(log, "unnested_reductions")


def test_no_fusion_over_the_shared_memory_budget():
    _, changed, log = mof("""
HloModule xla_computation_update_step.10931
%scalar_add_computation.1 (scalar_lhs.1: f64[], scalar_rhs.1: f64[]) -> f64[] {
  %scalar_lhs.1 = f64[] parameter(0)
  %scalar_rhs.1 = f64[] parameter(1)
  ROOT %add.1257 = f64[] add(f64[] %scalar_lhs.1, f64[] %scalar_rhs.1)
}
%fused_computation.1 (param_0.8: f64[64,64], param_1.11: f64[64,64], param_2.9: f64[64,64]) -> (f64[64],
    f64[64]) {
  %param_0.8 = f64[64,64]{1,0} parameter(0)
  %param_1.11 = f64[64,64]{1,0} parameter(1)
  %multiply.2 = f64[64,64]{1,0} multiply(f64[64,64]{1,0} %param_0.8, f64[64,64]{1,0} %param_1.11)
  %constant_5217.3 = f64[] constant(0)
  %broadcast.1 = f64[64,64]{1,0} broadcast(f64[] %constant_5217.3), dimensions={}
  %multiply.0 = f64[64,64]{1,0} multiply(f64[64,64]{1,0} %multiply.2, f64[64,64]{1,0} %broadcast.1)
  %reduce.0 = f64[64]{0} reduce(f64[64,64]{1,0} %multiply.0, f64[] %constant_5217.3), dimensions={0},
      to_apply=%scalar_add_computation.1
  %param_2.9 = f64[64,64]{1,0} parameter(2)
  %multiply.1514 = f64[64,64]{1,0} multiply(f64[64,64]{1,0} %param_2.9, f64[64,64]{1,0} %param_1.11)
  %constant_5217.1 = f64[] constant(0)
  %broadcast.0 = f64[64,64]{1,0} broadcast(f64[] %constant_5217.1), dimensions={}
  %multiply.1341 = f64[64,64]{1,0} multiply(f64[64,64]{1,0} %multiply.1514, f64[64,64]{1,0} %broadcast.0)
  %reduce.630 = f64[64]{0} reduce(f64[64,64]{1,0} %multiply.1341, f64[] %constant_5217.1),
      dimensions={0}, to_apply=%scalar_add_computation.1
  ROOT %tuple = (f64[64]{0}, f64[64]{0}) tuple(f64[64]{0} %reduce.0, f64[64]{0} %reduce.630)
}
%fused_computation.2 (param_0.7: f64[64,64], param_1.9: f64[64,64]) -> f64[64] {
  %param_0.7 = f64[64,64]{1,0} parameter(0)
  %param_1.9 = f64[64,64]{1,0} parameter(1)
  %multiply.1 = f64[64,64]{1,0} multiply(f64[64,64]{1,0} %param_0.7, f64[64,64]{1,0} %param_1.9)
  %constant_5217.2 = f64[] constant(0)
  ROOT %reduce.740 = f64[64]{0} reduce(f64[64,64]{1,0} %multiply.1, f64[] %constant_5217.2),
      dimensions={0}, to_apply=%scalar_add_computation.1
}
ENTRY %reproducer (param_0.1090: f64[64,64], param_1.1377: f64[64,64],
    param_2.1948: f64[64,64]) -> (f64[64], f64[64], f64[64]) {
  %param_0.1090 = f64[64,64]{1,0} parameter(0)
  %param_1.1377 = f64[64,64]{1,0} parameter(1)
  %param_2.1948 = f64[64,64]{1,0} parameter(2)
  %fusion.1 = (f64[64]{0}, f64[64]{0}) fusion(%param_0.1090, %param_1.1377, %param_2.1948), kind=kInput,
      calls=%fused_computation.1
  %get-tuple-element = f64[64]{0} get-tuple-element(%fusion.1), index=0
  %fusion.2 = f64[64]{0} fusion(%param_0.1090, %param_1.1377), kind=kInput, calls=%fused_computation.2
  %get-tuple-element.1 = f64[64]{0} get-tuple-element(%fusion.1), index=1
  ROOT %tuple.428 = (f64[64]{0}, f64[64]{0}, f64[64]{0}) tuple(%get-tuple-element, %fusion.2,
      %get-tuple-element.1)
}""")
    assert not changed
    assert refused(log, "shared_memory")


def test_a_fusion_read_by_a_conditional_is_not_fused():
    _, changed, _ = mof("""
HloModule module
no_op {
  arg_empty_tuple = () parameter(0)
  ROOT tuple = () tuple()
}
fused_computation {
  param_0 = f32[] parameter(0)
  ROOT convert = s32[] convert(param_0)
}
ENTRY main {
  param_0 = f32[] parameter(0)
  fusion = s32[] fusion(param_0), kind=kLoop, calls=fused_computation
  tuple = () tuple()
  conditional = () conditional(fusion, tuple, tuple), branch_computations={no_op, no_op}
  constant = f32[] constant(1)
  ROOT root = f32[] add(param_0, constant)
}""")
    assert not changed


SLICED = """
HloModule module
fused_computation_1 {
  p0.1 = f32[100,200]{1,0} parameter(0)
  slice.0 = f32[50,100]{1,0} slice(p0.1), slice={[0:50],[%s]}
  mul = f32[50,100]{1,0} multiply(slice.0, slice.0)
  exp = f32[50,100]{1,0} exponential(slice.0)
  ROOT tuple = (f32[50,100]{1,0}, f32[50,100]{1,0}) tuple(mul, exp)
}
fused_computation_2 {
  p0.2 = f32[100,200]{1,0} parameter(0)
  slice.1 = f32[50,100]{1,0} slice(p0.2), slice={[%s],[%s]}
  const.2 = f32[] constant(0)
  broadcast = f32[50,100]{1,0} broadcast(const.2), dimensions={}
  ROOT add = f32[50,100]{1,0} add(slice.1, broadcast)
}
ENTRY entry {
  p0 = f32[100,200]{1,0} parameter(0)
  fusion.1 = (f32[50,100]{1,0}, f32[50,100]{1,0}) fusion(p0), kind=kLoop, calls=fused_computation_1
  gte0 = f32[50,100]{1,0} get-tuple-element(fusion.1), index=0
  gte1 = f32[50,100]{1,0} get-tuple-element(fusion.1), index=1
  fusion.2 = f32[50,100]{1,0} fusion(p0), kind=kLoop, calls=fused_computation_2
  ROOT root = (f32[50,100]{1,0}, f32[50,100]{1,0}, f32[50,100]{1,0}) tuple(gte0, gte1, fusion.2)
}"""


def test_siblings_reading_non_overlapping_slices_are_not_fused():
    _, changed, log = mof(SLICED % ("0:100", "0:50", "100:200"))
    assert not changed
    assert refused(log, "non_overlapping_slices")


def test_siblings_reading_overlapping_slices_are_fused():
    text = SLICED % ("50:150", "30:80", "20:120")
    module, changed, _ = mof(text)
    assert changed
    assert fused_root_opcodes(root_fusion(module)) == ["multiply", "exponential", "add"]
    check_numerics(text, module)


# -- transposes ---------------------------------------------------------------------------------------
def test_multiple_transposes():
    text = """
HloModule module
fused_computation {
  param_0.1 = f32[16,32]{1,0} parameter(0)
  s.1 = f32[16,32]{1,0} sqrt(param_0.1)
  ROOT t.1 = f32[32,16]{1,0} transpose(s.1), dimensions={1,0}
}
ENTRY main {
  p = f32[16,32]{1,0} parameter(0)
  fusion = f32[32,16]{1,0} fusion(p), kind=kInput, calls=fused_computation
  t1 = f32[32,16]{1,0} transpose(p), dimensions={1,0}
  ROOT t = (f32[32,16]{1,0}, f32[32,16]{1,0}) tuple(fusion, t1)
}"""
    module, changed, _ = mof(text)
    assert changed
    fusion = root_fusion(module)
    assert fused_root_opcodes(fusion) == ["transpose", "transpose"]
    assert fusion.attrs["kind"] == "kInput" and [o.name for o in fusion.operands] == ["p"]
    check_numerics(text.replace("f32[16,32]", "f32[16,32]"), module)


def test_tiled_reduce_and_transpose_are_not_fused():
    _, changed, log = mof("""
HloModule module
add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}
fused_computation {
  param_0.1 = f32[16,32]{1,0} parameter(0)
  s.1 = f32[16,32]{1,0} sqrt(param_0.1)
  ROOT t.1 = f32[32,16]{1,0} transpose(s.1), dimensions={1,0}
}
ENTRY main {
  p = f32[16,32]{1,0} parameter(0)
  fusion = f32[32,16]{1,0} fusion(p), kind=kInput, calls=fused_computation
  z = f32[] constant(0)
  r1 = f32[32]{0} reduce(p, z), dimensions={0}, to_apply=add
  ROOT t = (f32[32,16]{1,0}, f32[32]{0}) tuple(fusion, r1)
}""")
    assert not changed


def test_incompatible_transposes_are_not_fused():
    _, changed, _ = mof("""
HloModule module
fused_computation {
  param_0.1 = f32[18,16,32]{2,1,0} parameter(0)
  param_1.1 = f32[32,16,18]{2,1,0} parameter(1)
  s.1 = f32[18,16,32]{2,1,0} sqrt(param_0.1)
  t.1 = f32[32,16,18]{2,1,0} transpose(s.1), dimensions={2,1,0}
  sub.1 = f32[32,16,18]{2,1,0} subtract(t.1, param_1.1)
  exp.1 = f32[32,16,18]{2,1,0} exponential(sub.1)
  ROOT add.1 = f32[32,16,18]{2,1,0} add(exp.1, exp.1)
}
fused_computation.2 {
  param_0.2 = f32[18,16,32]{2,1,0} parameter(0)
  s.2 = f32[18,16,32]{2,1,0} sqrt(param_0.2)
  ROOT t.2 = f32[18,32,16]{2,1,0} transpose(s.2), dimensions={0,2,1}
}
ENTRY main {
  p = f32[18,16,32]{2,1,0} parameter(0)
  p2 = f32[32,16,18]{2,1,0} parameter(1)
  fusion = f32[32,16,18]{2,1,0} fusion(p, p2), kind=kLoop, calls=fused_computation
  fusion2 = f32[18,32,16]{2,1,0} fusion(p), kind=kInput, calls=fused_computation.2
  ROOT t = (f32[32,16,18]{2,1,0}, f32[18,32,16]{2,1,0}) tuple(fusion, fusion2)
}""")
    assert not changed


def test_transpose_and_elementwise_input():
    text = """
HloModule module
fused_computation {
  param_0.1 = f32[1,16,32]{2,1,0} parameter(0)
  s.1 = f32[1,16,32]{2,1,0} sqrt(param_0.1)
  t.1 = f32[1,32,16]{2,1,0} transpose(s.1), dimensions={0,2,1}
  ROOT out = f32[32,16,1]{2,1,0} bitcast(t.1)
}
ENTRY main {
  p = f32[1,16,32]{2,1,0} parameter(0)
  fusion = f32[32,16,1]{2,1,0} fusion(p), kind=kInput, calls=fused_computation
  c1 = f32[1,16,32]{2,1,0} exponential(p)
  ROOT t = (f32[32,16,1]{2,1,0}, f32[1,16,32]{2,1,0}) tuple(fusion, c1)
}"""
    module, changed, _ = mof(text)
    assert changed
    assert fused_root_opcodes(root_fusion(module)) == ["bitcast", "exponential"]
    check_numerics(text, module)


# -- reductions with loops, custom fusions ----------------------------------------------------------
def test_reduce_and_loop_become_one_input_fusion():
    text = """
HloModule module
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
fused_reduction {
  p = f32[10,20] parameter(0)
  z = f32[] constant(0)
  e = f32[10,20] exponential(p)
  b = f32[200] bitcast(e)
  ROOT r = f32[] reduce(b, z), dimensions={0}, to_apply=add
}
fused_elementwise {
  p = f32[10,20] parameter(0)
  ROOT r = f32[10,20] sqrt(p)
}
ENTRY computation {
  p = f32[10,20] parameter(0)
  o1 = f32[10,20] fusion(p), kind=kLoop, calls=fused_elementwise
  o2 = f32[] fusion(p), kind=kInput, calls=fused_reduction
  ROOT out = (f32[10,20], f32[]) tuple(o1, o2)
}"""
    module, changed, _ = mof(text)
    assert changed
    fusion = root_fusion(module)
    assert fusion.name == "o1" and fusion.attrs["kind"] == "kInput"
    assert fusion.fused_computation().name == "fused_elementwise"
    assert fused_root_opcodes(fusion) == ["sqrt", "reduce"]
    check_numerics(text, module)


CUSTOM = """
HloModule module
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
custom_gemm {
  p0 = f32[64,32] parameter(0)
  p1 = f32[32,128] parameter(1)
  ROOT d = f32[64,128] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
fused_elementwise {
  p = f32[64,128] parameter(0)
  ROOT r = f32[64,128] sqrt(p)
}
fused_reduction {
  p = f32[64,128] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[64] reduce(p, z), dimensions={1}, to_apply=add
}
ENTRY computation {
  p0 = f32[64,32] parameter(0)
  p1 = f32[32,128] parameter(1)
  gemm = f32[64,128] fusion(p0, p1), kind=kCustom, calls=custom_gemm,
    backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  o1 = f32[64,128] fusion(gemm), kind=kLoop, calls=fused_elementwise
  o2 = f32[64] fusion(gemm), kind=kInput, calls=fused_reduction
  ROOT out = (f32[64,128], f32[64]) tuple(o1, o2)
}"""


def test_consumers_of_a_custom_fusion_are_sibling_fused():
    module, changed, _ = mof(CUSTOM)
    assert changed
    gemm = module.entry.instruction("gemm")
    assert gemm.shape.is_array and gemm.fused_computation().name == "custom_gemm"
    assert len(gemm.users) == 1
    fusion = gemm.users[0]
    assert fusion.attrs["kind"] == "kInput" and fused_root_opcodes(fusion) == ["sqrt", "reduce"]


def test_custom_fusion_is_never_a_producer():
    _, changed, _ = mof("""
HloModule module
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
triton_gemm {
  p0 = f32[64,32] parameter(0)
  p1 = f32[32,128] parameter(1)
  ROOT d = f32[64,128] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
fused_reduction {
  p = f32[64,128] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[64] reduce(p, z), dimensions={1}, to_apply=add
}
ENTRY computation {
  p0 = f32[64,32] parameter(0)
  p1 = f32[32,128] parameter(1)
  gemm = f32[64,128] fusion(p0, p1), kind=kCustom, calls=triton_gemm,
    backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  r = f32[64] fusion(gemm), kind=kInput, calls=fused_reduction
  ROOT out = (f32[64,128], f32[64]) tuple(gemm, r)
}""")
    assert not changed


def test_computations_called_by_reduce_are_not_visited_but_while_bodies_are():
    text = PREFIX + """
fa {
  p = f32[64] parameter(0)
  ROOT a = f32[64] add(p, p)
}
fb {
  p = f32[64] parameter(0)
  ROOT m = f32[64] multiply(p, p)
}
body {
  s = (s32[], f32[64], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[64] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[64] fusion(x), kind=kLoop, calls=fa
  z = f32[64] fusion(x), kind=kLoop, calls=fb
  ROOT r = (s32[], f32[64], f32[64]) tuple(j, y, z)
}
cond {
  s = (s32[], f32[64], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
ENTRY e {
  p0 = f32[64] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[64], f32[64]) tuple(z, p0, p0)
  ROOT w = (s32[], f32[64], f32[64]) while(t), condition=cond, body=body
}"""
    module, changed, _ = mof(text)
    assert changed
    body = module.computation("body")
    assert fused_root_opcodes(body.root.operands[1].operands[0]) == ["add", "multiply"]
    check_numerics(text, module)


# -- the cost model ---------------------------------------------------------------------------------
def test_cost_model_refuses_a_slower_producer_consumer_fusion():
    _, changed, log = mof("""
HloModule m
region_3.63 {
  Arg_0.64 = f32[] parameter(0)
  Arg_1.65 = f32[] parameter(1)
  ROOT add.66 = f32[] add(Arg_0.64, Arg_1.65)
}
fused_computation.29 {
  param_0.161 = f32[5,32,32,1]{3,2,1,0} parameter(0)
  multiply.208 = f32[5,32,32,1]{3,2,1,0} multiply(param_0.161, param_0.161)
  bitcast.67 = f32[5,32,32]{2,1,0} bitcast(multiply.208)
  constant.265 = f32[] constant(0)
  reduce-window.81 = f32[5,30,31]{2,1,0} reduce-window(bitcast.67, constant.265), window={size=1x3x2},
      to_apply=region_3.63
  constant.264 = f32[] constant(0.166666672)
  broadcast.204 = f32[5,30,31]{2,1,0} broadcast(constant.264), dimensions={}
  multiply.205 = f32[5,30,31]{2,1,0} multiply(reduce-window.81, broadcast.204)
  constant.263 = f32[] constant(0)
  reduce-window.80 = f32[5,30,31]{2,1,0} reduce-window(multiply.205, constant.263),
      window={size=1x2x3 pad=0_0x0_1x1_1}, to_apply=region_3.63
  constant.262 = f32[] constant(0.0138888899)
  broadcast.201 = f32[5,30,31]{2,1,0} broadcast(constant.262), dimensions={}
  multiply.204 = f32[5,30,31]{2,1,0} multiply(reduce-window.80, broadcast.201)
  constant.261 = f32[] constant(0)
  reduce-window.78 = f32[5,30,31]{2,1,0} reduce-window(multiply.204, constant.261),
      window={size=1x1x2 pad=0_0x0_0x0_1}, to_apply=region_3.63
  constant.113 = f32[] constant(0.5)
  broadcast.137 = f32[5,30,31]{2,1,0} broadcast(constant.113), dimensions={}
  multiply.125 = f32[5,30,31]{2,1,0} multiply(reduce-window.78, broadcast.137)
  constant.114 = f32[] constant(0)
  ROOT reduce-window.17 = f32[5,30,31]{2,1,0} reduce-window(multiply.125, constant.114),
      window={size=1x2x1 pad=0_0x0_1x0_0}, to_apply=region_3.63
}
fused_computation.4 {
  param_0.172 = f32[5,30,31]{2,1,0} parameter(0)
  constant.315 = f32[] constant(0.125)
  broadcast.242 = f32[5,30,31]{2,1,0} broadcast(constant.315), dimensions={}
  multiply.250 = f32[5,30,31]{2,1,0} multiply(param_0.172, broadcast.242)
  constant.314 = f32[] constant(0)
  reduce-window.100 = f32[5,30,31]{2,1,0} reduce-window(multiply.250, constant.314),
      window={size=1x3x3 pad=0_0x1_1x1_1}, to_apply=region_3.63
  constant.79 = f32[] constant(0.055555556)
  broadcast.85 = f32[5,30,31]{2,1,0} broadcast(constant.79), dimensions={}
  multiply.80 = f32[5,30,31]{2,1,0} multiply(reduce-window.100, broadcast.85)
  constant.81 = f32[] constant(0)
  reduce-window.1 = f32[5,30,31]{2,1,0} reduce-window(multiply.80, constant.81),
      window={size=1x3x3 pad=0_0x1_1x1_1}, to_apply=region_3.63
  constant.80 = f32[] constant(0.111111112)
  broadcast.86 = f32[5,30,31]{2,1,0} broadcast(constant.80), dimensions={}
  multiply.79 = f32[5,30,31]{2,1,0} multiply(reduce-window.1, broadcast.86)
  bitcast.26 = f32[5,930]{1,0} bitcast(multiply.79)
  ROOT reduce.8 = f32[5]{0} reduce(bitcast.26, constant.81), dimensions={1}, to_apply=region_3.63
}
fused_computation.15 {
  constant.108 = f32[] constant(0.5)
  broadcast.105 = f32[5,5,30,31]{3,2,1,0} broadcast(constant.108), dimensions={}
  param_3.126 = f32[5,30,31]{2,1,0} parameter(3)
  constant.295 = f32[] constant(0.25)
  broadcast.234 = f32[5,30,31]{2,1,0} broadcast(constant.295), dimensions={}
  multiply.242 = f32[5,30,31]{2,1,0} multiply(param_3.126, broadcast.234)
  broadcast.233 = f32[5,5,30,31]{3,2,1,0} broadcast(multiply.242), dimensions={0,2,3}
  param_2.154 = f32[5,30,31]{2,1,0} parameter(2)
  multiply.241 = f32[5,30,31]{2,1,0} multiply(param_2.154, broadcast.234)
  broadcast.232 = f32[5,5,30,31]{3,2,1,0} broadcast(multiply.241), dimensions={1,2,3}
  multiply.240 = f32[5,5,30,31]{3,2,1,0} multiply(broadcast.233, broadcast.232)
  param_1.188 = f32[5,5,30,31]{3,2,1,0} parameter(1)
  constant.294 = f32[] constant(0.159154937)
  broadcast.231 = f32[5,5,30,31]{3,2,1,0} broadcast(constant.294), dimensions={}
  multiply.239 = f32[5,5,30,31]{3,2,1,0} multiply(param_1.188, broadcast.231)
  param_0.164 = f32[5,5,30,31]{3,2,1,0} parameter(0)
  add.19 = f32[5,5,30,31]{3,2,1,0} add(multiply.239, param_0.164)
  constant.293 = f32[] constant(0)
  reduce-window.90 = f32[5,5,30,31]{3,2,1,0} reduce-window(add.19, constant.293),
      window={size=1x1x1x2 pad=0_0x0_0x0_0x0_1}, to_apply=region_3.63
  constant.292 = f32[] constant(0.5)
  broadcast.230 = f32[5,5,30,31]{3,2,1,0} broadcast(constant.292), dimensions={}
  multiply.238 = f32[5,5,30,31]{3,2,1,0} multiply(reduce-window.90, broadcast.230)
  constant.291 = f32[] constant(0)
  reduce-window.89 = f32[5,5,30,31]{3,2,1,0} reduce-window(multiply.238, constant.291),
      window={size=1x1x2x1 pad=0_0x0_0x0_1x0_0}, to_apply=region_3.63
  constant.290 = f32[] constant(0.25)
  broadcast.229 = f32[5,5,30,31]{3,2,1,0} broadcast(constant.290), dimensions={}
  multiply.237 = f32[5,5,30,31]{3,2,1,0} multiply(reduce-window.89, broadcast.229)
  multiply.236 = f32[5,5,30,31]{3,2,1,0} multiply(multiply.237, multiply.237)
  subtract.10 = f32[5,5,30,31]{3,2,1,0} subtract(multiply.240, multiply.236)
  constant.289 = f32[] constant(0)
  broadcast.228 = f32[5,5,30,31]{3,2,1,0} broadcast(constant.289), dimensions={}
  maximum.6 = f32[5,5,30,31]{3,2,1,0} maximum(subtract.10, broadcast.228)
  sqrt.6 = f32[5,5,30,31]{3,2,1,0} sqrt(maximum.6)
  constant.110 = f32[] constant(0)
  broadcast.107 = f32[5,5,30,31]{3,2,1,0} broadcast(constant.110), dimensions={}
  compare.4 = pred[5,5,30,31]{3,2,1,0} compare(sqrt.6, broadcast.107), direction=EQ
  constant.243 = f32[] constant(0.159154937)
  broadcast.193 = f32[5,5,30,31]{3,2,1,0} broadcast(constant.243), dimensions={}
  multiply.194 = f32[5,5,30,31]{3,2,1,0} multiply(param_1.188, broadcast.193)
  add.15 = f32[5,5,30,31]{3,2,1,0} add(multiply.194, param_0.164)
  constant.242 = f32[] constant(0)
  reduce-window.66 = f32[5,5,30,31]{3,2,1,0} reduce-window(add.15, constant.242),
      window={size=1x1x1x2 pad=0_0x0_0x0_0x0_1}, to_apply=region_3.63
  constant.241 = f32[] constant(0.5)
  broadcast.192 = f32[5,5,30,31]{3,2,1,0} broadcast(constant.241), dimensions={}
  multiply.193 = f32[5,5,30,31]{3,2,1,0} multiply(reduce-window.66, broadcast.192)
  constant.240 = f32[] constant(0)
  reduce-window.65 = f32[5,5,30,31]{3,2,1,0} reduce-window(multiply.193, constant.240),
      window={size=1x1x2x1 pad=0_0x0_0x0_1x0_0}, to_apply=region_3.63
  constant.239 = f32[] constant(0.25)
  broadcast.191 = f32[5,5,30,31]{3,2,1,0} broadcast(constant.239), dimensions={}
  multiply.192 = f32[5,5,30,31]{3,2,1,0} multiply(reduce-window.65, broadcast.191)
  compare.3 = pred[5,5,30,31]{3,2,1,0} compare(multiply.192, broadcast.107), direction=EQ
  and.1 = pred[5,5,30,31]{3,2,1,0} and(compare.4, compare.3)
  constant.109 = f32[] constant(1.57079637)
  broadcast.104 = f32[5,5,30,31]{3,2,1,0} broadcast(constant.109), dimensions={}
  atan2.1 = f32[5,5,30,31]{3,2,1,0} atan2(sqrt.6, multiply.192)
  select.4 = f32[5,5,30,31]{3,2,1,0} select(and.1, broadcast.104, atan2.1)
  constant.107 = f32[] constant(0.159154937)
  broadcast.106 = f32[5,5,30,31]{3,2,1,0} broadcast(constant.107), dimensions={}
  multiply.100 = f32[5,5,30,31]{3,2,1,0} multiply(select.4, broadcast.106)
  ROOT subtract.3 = f32[5,5,30,31]{3,2,1,0} subtract(broadcast.105, multiply.100)
}
ENTRY e {
  Arg_0.1 = f32[5,32,32,1]{3,2,1,0} parameter(0)
  p1 = f32[5,5,30,31]{3,2,1,0} parameter(1)
  p2 = f32[5,5,30,31]{3,2,1,0} parameter(2)
  p3 = f32[5,30,31]{2,1,0} parameter(3)
  fusion.29 = f32[5,30,31]{2,1,0} fusion(Arg_0.1), kind=kLoop, calls=fused_computation.29
  fusion.15 = f32[5,5,30,31]{3,2,1,0} fusion(p2, p1, p3, fusion.29), kind=kLoop, calls=fused_computation.15
  ROOT fusion.4 = f32[5]{0} fusion(fusion.29), kind=kInput, calls=fused_computation.4
}""", cost_model=True)
    assert not changed
    assert refused(log, "slower")


# -- determinism --------------------------------------------------------------------------------------
def test_output_does_not_depend_on_the_hash_seed():
    code = ("import sys; sys.path.insert(0, 'tests/helpers'); "
            "from hlo_common.hlo.parser import parse_module; "
            "from hlo_common.hlo.printer import print_module; "
            "from hlo_opt.passes.multi_output_fusion import MultiOutputFusion; "
            "m = parse_module(sys.stdin.read()); p = MultiOutputFusion(cost_model=False); p.run(m); "
            "print(print_module(m)); print(chr(10).join(p.decisions))")
    text = CYCLES + "\n" + ""
    outs = set()
    for seed in ("0", "1", "4242"):
        proc = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True, text=True,
                              env=dict(os.environ, PYTHONHASHSEED=seed), timeout=120)
        assert proc.returncode == 0, proc.stderr
        outs.add(proc.stdout)
    assert len(outs) == 1


# -- the CLI: decision log, --verify-each, the full pipeline ------------------------------------------
def run_cli(args, capsys):
    try:
        cli.main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_decision_log_next_to_dumps(tmp_path, capsys):
    src = tmp_path / "m.hlo"
    src.write_text(CYCLES)
    code, _out, err = run_cli([str(src), "--passes", "multi_output_fusion", "--dump-to", str(tmp_path / "d")],
                              capsys)
    assert code == 0, err
    lines = (tmp_path / "d" / "module_0000.test_module.multi_output_fusion_dump.txt").read_text().splitlines()
    assert sum(ln.startswith("fusing producer ") for ln in lines) == 1
    assert any(ln.startswith("not fusing producer ") and ln.endswith("[cycle]") for ln in lines)


def test_verify_each_names_the_step(tmp_path, capsys, monkeypatch):
    from hlo_opt.fusion.multi_output_editing import MultiOutputEditor
    from hlo_common.hlo.shape import Shape

    original = MultiOutputEditor.fuse_instruction_into_multi_output

    def broken(self, fusion, instr):  # a planted bad edit: the fusion's shape no longer matches
        created = original(self, fusion, instr)
        fusion.shape = Shape.tuple_of([Shape.array("f32", (4,))])
        return created

    monkeypatch.setattr(MultiOutputEditor, "fuse_instruction_into_multi_output", broken)
    src = tmp_path / "m.hlo"
    src.write_text(ELEMENTWISE_AND_REDUCE)
    code, _out, err = run_cli([str(src), "--passes", "multi_output_fusion", "--verify-each"], capsys)
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.startswith("hlo-opt: error:")]
    assert len(lines) == 1, err
    assert "multi_output_fusion: fusing producer %exp into %reduce (rule producer_consumer) breaks " \
        "the verifier" in lines[0]


def test_gpu_pipeline_forms_a_producer_consumer_fusion_and_disable_pass_turns_it_off(tmp_path, capsys):
    src = tmp_path / "m.hlo"
    src.write_text(ELEMENTWISE_AND_REDUCE)
    code, fused, err = run_cli([str(src), "--verify-each"], capsys)
    assert code == 0, err
    entry = fused[fused.index("ENTRY"):]
    assert entry.count(" fusion(") == 1 and "kind=kInput" in entry
    # rename_fusions: the heroes of both outputs, sorted
    assert "input_exponential_reduce_fusion = (f32[32,32]{1,0}, f32[32,32,32]{2,1,0}) fusion(%p0)" in entry
    check_numerics(ELEMENTWISE_AND_REDUCE, parse_module(fused))
    code, unfused, err = run_cli([str(src), "--disable-pass", "multi_output_fusion"], capsys)
    assert code == 0, err
    entry = unfused[unfused.index("ENTRY"):]
    # exp is its own kernel again (fusion-wrapper's one-op fusion), and the reduce another
    assert "%wrapped_exponential = f32[32,32,32]{2,1,0} fusion(%p0), kind=kLoop" in entry
    assert "= f32[32,32]{1,0} fusion(%wrapped_exponential), kind=kInput" in entry


SHARED_BODY = """
HloModule m
f1 {
  p = f32[8,16] parameter(0)
  a = f32[8,16] add(p, p)
  ROOT t = (f32[8,16], f32[8,16]) tuple(a, p)
}
f2 {
  p = f32[8,16] parameter(0)
  m = f32[8,16] multiply(p, p)
  e = f32[8,16] exponential(m)
  ROOT t = (f32[8,16], f32[8,16]) tuple(m, e)
}
ENTRY e {
  p0 = f32[8,16] parameter(0)
  x = (f32[8,16], f32[8,16]) fusion(p0), kind=kLoop, calls=f1
  g = f32[8,16] get-tuple-element(x), index=0
  n = f32[8,16] negate(g)
  y = (f32[8,16], f32[8,16]) fusion(p0), kind=kLoop, calls=f2
  gy = f32[8,16] get-tuple-element(y), index=1
  r = (f32[8,16], f32[8,16]) tuple(n, gy)
  ROOT y2 = (f32[8,16], f32[8,16]) fusion(p0), kind=kLoop, calls=f1
}"""


def test_a_body_shared_with_another_fusion_is_copied_before_it_grows():
    module, changed, _ = mof(SHARED_BODY)
    assert changed
    x, y2 = module.entry.instruction("x"), module.entry.instruction("y2")
    assert fused_root_opcodes(y2) == ["add", "parameter"]  # y2's body is untouched
    assert x.fused_computation() is not y2.fused_computation()
    # y's unused output `m` is not kept; `e` is
    assert fused_root_opcodes(x) == ["add", "parameter", "exponential"]
    check_numerics(SHARED_BODY, module)


def test_reachability_follows_merges_and_grows():
    from hlo_opt.fusion.multi_output_editing import Reachability
    from hlo_common.hlo.shape import Shape

    module = parse_module("""
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  x = f32[4] negate(p)
  y = f32[4] exponential(p)
  z = f32[4] add(x, x)
  ROOT w = f32[4] abs(y)
}""")
    comp = module.entry
    p, x, y, z, w = (comp.instruction(n) for n in "pxyzw")
    reach = Reachability(comp)
    assert reach.is_reachable(p, z) and reach.is_reachable(x, z) and not reach.is_reachable(z, x)
    assert not reach.is_connected(x, y) and not reach.is_connected(z, w)
    new = [HloInstruction(f"g{k}", "get-tuple-element", Shape.array("f32", (4,))) for k in range(200)]
    reach.merge(x, y, new)  # y merged into x: whatever y reached, x reaches now
    assert reach.is_reachable(x, w) and reach.is_reachable(p, w)
    assert not reach.is_reachable(z, w) and not reach.is_connected(z, w)
    assert all(reach.is_reachable(x, g) and not reach.is_reachable(g, x) for g in new)


def test_multi_output_consumer_whose_tuple_is_read_whole_takes_no_more_outputs():
    text = """
HloModule m
fm {
  p = f32[64] parameter(0)
  a = f32[64] add(p, p)
  b = f32[64] multiply(p, p)
  ROOT t = (f32[64], f32[64]) tuple(a, b)
}
ENTRY e {
  p0 = f32[64] parameter(0)
  x = f32[64] exponential(p0)
  m = (f32[64], f32[64]) fusion(x), kind=kLoop, calls=fm
  n = f32[64] negate(x)
  ROOT t = ((f32[64], f32[64]), f32[64]) tuple(m, n)
}"""
    module, changed, log = mof(text)
    assert refused(log, "not_mof_root")
    assert module.entry.instruction("m").shape.tuple_shapes == module.entry.root.operands[0].shape.tuple_shapes
    check_numerics(text, module)
