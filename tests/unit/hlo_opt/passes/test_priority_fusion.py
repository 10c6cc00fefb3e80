"""PriorityFusion ("priority-fusion"): cases of XLA's priority_fusion_test.cc with their expected
fusion structure, control flow, scalar constants, the decision log, determinism, --disable-pass
and the --verify-each error of a planted bad decision."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from numerics_testlib import check_same_results
from pass_testlib import check_pass, run_pass

from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
from hlo_common.hlo.parser import parse_module
from hlo_opt import cli

ROOT = Path(__file__).resolve().parents[4]

ADD = """
add {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT add = f32[] add(p0, p1)
}
"""


def fusion_kinds(module) -> list[str]:
    """Emitter kinds of the fusions of the entry computation, sorted."""
    return sorted(FusionAnalysis.of_fusion(i).emitter_kind for i in module.entry.instructions
                  if i.opcode == "fusion")


def run_cli(args, capsys):
    try:
        cli.main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


# -- XLA's priority_fusion_test.cc ------------------------------------------------------------------
def test_fuse_with_shared_argument():
    text = """
HloModule test_module
ENTRY main {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  subtract = f32[] subtract(p0, p1)
  compare = pred[] compare(subtract, subtract), direction=NE
  add = f32[] add(p0, p1)
  abs = f32[] abs(subtract)
  ROOT select = f32[] select(compare, add, abs)
}
// CHECK:      ENTRY
// CHECK-NEXT:   %p0 = f32[] parameter(0)
// CHECK-NEXT:   %p1 = f32[] parameter(1)
// CHECK-NEXT:   ROOT %{{.*}} = f32[] fusion(%p{{[01]}}, %p{{[01]}}), kind=kLoop
"""
    module = check_pass("priority-fusion", text)
    check_same_results(text, module)


def test_fusion_in_called_computation():
    text = """
HloModule test_module
stream {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  subtract = f32[] subtract(p0, p1)
  compare = pred[] compare(subtract, subtract), direction=NE
  add = f32[] add(p0, p1)
  abs = f32[] abs(subtract)
  ROOT select = f32[] select(compare, add, abs)
}
ENTRY main {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT called = f32[] call(a, b), to_apply=stream
}
"""
    module = check_pass("priority-fusion", text)
    root = module.entry.root
    assert root.opcode == "call"
    called_root = root.attrs["to_apply"].root
    assert called_root.opcode == "fusion" and called_root.attrs["kind"] == "kLoop"


def test_fusion_fusion_with_duplication():
    text = """
HloModule test_module
square {
  p = f32[16384]{0} parameter(0)
  ROOT m = f32[16384]{0} multiply(p, p)
}
exp {
  p = f32[16384]{0} parameter(0)
  ROOT e = f32[16384]{0} exponential(p)
}
log {
  p = f32[16384]{0} parameter(0)
  ROOT l = f32[16384]{0} log(p)
}
ENTRY main {
  p = f32[16384]{0} parameter(0)
  s = f32[16384]{0} fusion(p), kind=kLoop, calls=square
  e = f32[16384]{0} fusion(s), kind=kLoop, calls=exp
  l = f32[16384]{0} fusion(s), kind=kInput, calls=log
  ROOT t = (f32[16384], f32[16384]) tuple(l, e)
}
// CHECK: ENTRY
// CHECK-NEXT: %[[PARAM:.*]] = f32[16384]{0} parameter(0)
// CHECK-DAG: %[[FUSION_0:l]] = f32[16384]{0} fusion(%[[PARAM]])
// CHECK-DAG: %[[FUSION_1:e]] = f32[16384]{0} fusion(%[[PARAM]])
// CHECK: ROOT {{.*}} tuple(%[[FUSION_0]], %[[FUSION_1]])
"""
    module = check_pass("priority-fusion", text)
    check_same_results(text, module)


def test_fuse_broadcast_into_bitcast_consumers():
    text = """
HloModule test_module
ENTRY main {
  param_0 = f32[96]{0} parameter(0)
  broadcast = f32[8,96,128,7]{3,2,1,0} broadcast(param_0), dimensions={1}
  bitcast.6079.2 = f32[8,24,4,128,7]{4,3,2,1,0} bitcast(broadcast)
  ROOT transpose.1990.2 = f32[8,24,128,7,4]{4,3,2,1,0} transpose(bitcast.6079.2), dimensions={0,1,3,4,2}
}
// CHECK:      ENTRY
// CHECK-NEXT: %[[PARAM:.*]] = f32[96]{0} parameter(0)
// CHECK-NEXT: ROOT %{{.*}} fusion(%[[PARAM]])
"""
    check_pass("priority-fusion", text)


def test_fuse_widening_convert_into_consumers():
    text = """
HloModule test_module
ENTRY main {
  p = f16[512]{0} parameter(0)
  a = f16[512]{0} add(p, p)
  c = f32[512]{0} convert(a)
  s = f32[512]{0} multiply(c, c)
  bc = s32[512]{0} bitcast(c)
  ROOT t = (f32[512], s32[512]) tuple(s, bc)
}
// CHECK:      ENTRY
// CHECK-NEXT: %[[PARAM:.*]] = f16[512]{0} parameter(0)
// CHECK-NEXT: %{{.*}} = f32[512]{0} fusion(%[[PARAM]]), kind=kLoop
// CHECK-NEXT: %{{.*}} = f32[512]{0} fusion(%[[PARAM]]), kind=kLoop
// CHECK-NEXT: %{{.*}} = s32[512]{0} bitcast(
// CHECK-NEXT: ROOT %{{.*}} = (f32[512]{0}, s32[512]{0}) tuple(
"""
    module = check_pass("priority-fusion", text)
    f32_fusion, bitcast = module.entry.root.operands
    assert f32_fusion.fused_computation().root.opcode == "multiply"
    assert bitcast.opcode == "bitcast" and bitcast.operands[0].fused_computation().root.opcode == "convert"



def test_do_not_fuse_bit_width_changing_bitcast():
    check_pass("priority-fusion", """
HloModule m
ENTRY main {
  p0 = s8[3,5,2]{2,1,0} parameter(0)
  neg = s8[3,5,2]{2,1,0} negate(p0)
  bitcast = s16[3,5]{1,0} bitcast(neg)
  mul = s8[3,5,2]{2,1,0} add(neg, neg)
  ROOT result = (s16[3,5]{1,0}, s8[3,5,2]{2,1,0}) tuple(bitcast, mul)
}
""", changed=False)


CONVERT_INTO_REDUCE = """
HloModule test_module
""" + ADD + """
ENTRY main {
  param_0_0.79 = bf16[1024,8192]{1,0} parameter(0)
  param_1_0.79 = bf16[1024,8192]{1,0} parameter(1)
  param_2.483 = f32[8192]{0} parameter(2)
  param_4.2892 = bf16[1024,8192]{1,0} parameter(3)
  convert.21854 = f32[1024,8192]{1,0} convert(param_0_0.79)
  convert.21855 = f32[1024,8192]{1,0} convert(param_1_0.79)
  constant_7773 = f32[] constant(0)
  broadcast.14555 = f32[1024,8192]{1,0} broadcast(param_2.483), dimensions={1}
  multiply.6906 = f32[1024,8192]{1,0} multiply(broadcast.14555, convert.21854)
  reduce.4813 = f32[1024]{0} reduce(multiply.6906, constant_7773), dimensions={1}, to_apply=add
  convert.13970 = bf16[1024]{0} convert(reduce.4813)
  convert.21534 = f32[1024,8192]{1,0} convert(param_4.2892)
  multiply.6910.clone.1 = f32[1024,8192]{1,0} multiply(broadcast.14555, convert.21534)
  reduce.4811.clone.1 = f32[1024]{0} reduce(multiply.6910.clone.1, constant_7773), dimensions={1},
      to_apply=add
  convert.13967.clone.1 = bf16[1024]{0} convert(reduce.4811.clone.1)
  multiply.6908.clone.1 = f32[1024,8192]{1,0} multiply(broadcast.14555, convert.21855)
  reduce.4812.clone.1 = f32[1024]{0} reduce(multiply.6908.clone.1, constant_7773), dimensions={1},
      to_apply=add
  convert.13969.clone.1 = bf16[1024]{0} convert(reduce.4812.clone.1)
  ROOT fusion.241 = (bf16[1024]{0}, bf16[1024]{0}, bf16[1024]{0}) tuple(convert.13970,
      convert.13967.clone.1, convert.13969.clone.1)
}
// CHECK-COUNT-3: ROOT {{.*}} convert(
// CHECK: ENTRY %main
// CHECK-COUNT-3: fusion(
// CHECK-NOT: fusion(
"""


def test_convert_fused_into_reduce():
    module = check_pass("priority-fusion", CONVERT_INTO_REDUCE)
    assert fusion_kinds(module) == ["reduction"] * 3


def test_reduction_epilogue_fusion_regression():
    text = """
HloModule test_module
""" + ADD + """
ENTRY main {
  param_1.15162 = f32[2752]{0} parameter(1)
  convert.44829 = bf16[2752]{0} convert(param_1.15162)
  bitcast.24686 = bf16[1,1,2752]{2,1,0} bitcast(convert.44829)
  convert.44468 = f32[1,1,2752]{2,1,0} convert(bitcast.24686)
  constant_13722 = bf16[] constant(1)
  convert.17451 = f32[] convert(constant_13722)
  broadcast.17565 = f32[1,1,2752]{2,1,0} broadcast(convert.17451), dimensions={}
  negate.167 = f32[1,1,2752]{2,1,0} negate(convert.44468)
  exponential.569 = f32[1,1,2752]{2,1,0} exponential(negate.167)
  add.1850 = f32[1,1,2752]{2,1,0} add(broadcast.17565, exponential.569)
  divide.1376 = f32[1,1,2752]{2,1,0} divide(broadcast.17565, add.1850)
  multiply.9709 = f32[1,1,2752]{2,1,0} multiply(convert.44468, divide.1376)
  param_0.15005 = f32[2752]{0} parameter(0)
  convert.44826 = bf16[2752]{0} convert(param_0.15005)
  bitcast.24683 = bf16[1,1,2752]{2,1,0} bitcast(convert.44826)
  convert.44467 = f32[1,1,2752]{2,1,0} convert(bitcast.24683)
  multiply.9708 = f32[1,1,2752]{2,1,0} multiply(multiply.9709, convert.44467)
  convert.16959 = bf16[1,1,2752]{2,1,0} convert(multiply.9708)
  fusion.3203 = bf16[2752]{0} bitcast(convert.16959)
  convert.15093 = f32[2752]{0} convert(fusion.3203)
  broadcast.13841 = f32[8192,2752]{1,0} broadcast(convert.15093), dimensions={1}
  param_0.15525 = bf16[8192,2752]{1,0} parameter(2)
  convert.13738 = f32[8192,2752]{1,0} convert(param_0.15525)
  multiply.6422 = f32[8192,2752]{1,0} multiply(broadcast.13841, convert.13738)
  constant_14382 = f32[] constant(0)
  fusion.339 = f32[8192]{0} reduce(multiply.6422, constant_14382), dimensions={1}, to_apply=add
  convert.44633 = bf16[8192]{0} convert(fusion.339)
  ROOT bitcast.24487 = bf16[1,1,8192]{2,1,0} bitcast(convert.44633)
}
// CHECK: ENTRY
// CHECK: ROOT {{.*}} bitcast({{.*}}fusion{{.*}})
"""
    module = check_pass("priority-fusion", text)
    assert fusion_kinds(module) == ["loop", "reduction"]


def test_do_not_change_reduction_fusion_to_loop_fusion():
    check_pass("priority-fusion", """
HloModule test_module
""" + ADD + """
fused_computation {
  p0 = f32[16,64]{1,0} parameter(0)
  zero = f32[] constant(0.0)
  ROOT reduce = f32[16]{0} reduce(p0, zero), dimensions={1}, to_apply=add
}
ENTRY main {
  param0 = f32[16,64]{1,0} parameter(0)
  fusion = f32[16]{0} fusion(param0), kind=kLoop, calls=fused_computation
  ROOT slice = f32[8]{0} slice(fusion), slice={[0:8]}
}
""", changed=False)


def test_do_not_fuse_reduce_into_reduce():
    check_pass("priority-fusion", """
HloModule test_module
""" + ADD + """
ENTRY main {
  p0 = f32[8,4,128,226]{3,2,1,0} parameter(0)
  c0 = f32[] constant(0)
  r0 = f32[8,4,128]{2,1,0} reduce(p0, c0), dimensions={3}, to_apply=add
  ROOT r1 = f32[8,4]{1,0} reduce(r0, c0), dimensions={2}, to_apply=add
}
// CHECK: ROOT {{.*}} reduce(
// CHECK: ROOT {{.*}} reduce(
""")


def test_dont_fuse_into_first_operand_of_scatter():
    text = """
HloModule test_module
add {
  lhs = s32[] parameter(0)
  rhs = s32[] parameter(1)
  ROOT add = s32[] add(lhs, rhs)
}
ENTRY FuseIntoScatter {
  p0 = s32[3,3] parameter(0)
  operand = s32[3,3] add(p0, p0)
  p1 = s32[2,1] parameter(1)
  indices = s32[2,1] add(p1, p1)
  p2 = s32[2,3] parameter(2)
  updates = s32[2,3] add(p2, p2)
  scatter = s32[3,3] scatter(operand, indices, updates), to_apply=add, update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1
  ROOT add = s32[3,3] add(scatter, scatter)
}
"""
    module = check_pass("priority-fusion", text)
    root = module.entry.root
    assert root.opcode == "add" and [o.opcode for o in root.operands] == ["fusion", "fusion"]
    scatter_fusion = root.operands[0]
    assert scatter_fusion.attrs["kind"] == "kInput"
    fused = scatter_fusion.fused_computation().root
    assert fused.opcode == "scatter"
    assert [o.opcode for o in fused.operands] == ["parameter", "add", "add"]


def test_dont_fuse_constant_into_first_operand_of_scatter():
    text = """
HloModule test_module
add {
  lhs = s32[] parameter(0)
  rhs = s32[] parameter(1)
  ROOT add = s32[] add(lhs, rhs)
}
ENTRY FuseIntoScatter {
  operand = s32[1] constant({0})
  indices = s32[24,1] parameter(0)
  constant = s32[] constant(1)
  updates = s32[24,1] broadcast(constant), dimensions={}
  ROOT scatter = s32[1] scatter(operand, indices, updates), to_apply=add, update_window_dims={1},
      inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1
}
"""
    module = check_pass("priority-fusion", text)
    root = module.entry.root
    assert root.opcode == "fusion" and root.attrs["kind"] == "kInput"
    assert [o.opcode for o in root.operands] == ["constant", "parameter"]
    fused = root.fused_computation().root
    assert fused.opcode == "scatter"
    assert [o.opcode for o in fused.operands] == ["parameter", "parameter", "broadcast"]
    assert fused.operands[2].operands[0].opcode == "constant"


# -- control flow, constants, softmax -----------------------------------------------------------------
def test_while_body_and_condition_are_fused():
    text = """
HloModule m
cond {
  s = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x = f32[64] get-tuple-element(s), index=1
  e = f32[64] exponential(x)
  h = f32[] constant(0.5)
  hb = f32[64] broadcast(h), dimensions={}
  y = f32[64] multiply(e, hb)
  ROOT t = (s32[], f32[64]) tuple(i2, y)
}
ENTRY e {
  p = f32[64] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[64]) tuple(z, p)
  w = (s32[], f32[64]) while(init), condition=cond, body=body
  ROOT r = f32[64] get-tuple-element(w), index=1
}
"""
    module = check_pass("priority-fusion", text)
    body = module.computation("body")
    assert [i.opcode for i in body.instructions if i.opcode not in ("parameter", "get-tuple-element")] \
        == ["fusion", "fusion", "tuple"]
    cond = module.computation("cond")
    assert cond.root.opcode == "fusion"  # compare(i, constant): the scalar constant fused
    check_same_results(text, module)


def test_conditional_branches_are_fused_reducers_are_not():
    text = """
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  ROOT n = f32[] negate(s)
}
on_true {
  x = f32[64] parameter(0)
  e = f32[64] exponential(x)
  ROOT l = f32[64] log(e)
}
on_false {
  x = f32[64] parameter(0)
  a = f32[64] abs(x)
  ROOT n = f32[64] negate(a)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[64] parameter(1)
  c = f32[64] conditional(p, x, x), true_computation=on_true, false_computation=on_false
  z = f32[] constant(0)
  ROOT r = f32[] reduce(c, z), dimensions={0}, to_apply=add
}
"""
    module = check_pass("priority-fusion", text)
    for name in ("on_true", "on_false"):
        branch = module.computation(name)
        assert branch.root.opcode == "fusion"
        assert [i.opcode for i in branch.instructions] == ["parameter", "fusion"]
    reducer = module.computation("add")
    assert [i.opcode for i in reducer.instructions] == ["parameter", "parameter", "add", "negate"]
    check_same_results(text, module)


SOFTMAX = (ROOT / "testdata" / "softmax.hlo").read_text()


def test_softmax_three_fusions_like_xla():
    """XLA without Triton softmax: reduce(max) | reduce(sum) with its prologue | loop epilogue."""
    module = check_pass("priority-fusion", SOFTMAX + """
// CHECK: ENTRY
// CHECK-NEXT: %x = f32[4,8]{1,0} parameter(0)
// CHECK-NEXT: %[[MAX:.*]] = f32[4]{0} fusion(%x), kind=kInput
// CHECK-NEXT: %[[SUM:.*]] = f32[4]{0} fusion(%x, %[[MAX]]), kind=kInput
// CHECK-NEXT: ROOT {{.*}} = f32[4,8]{1,0} fusion({{.*}}), kind=kLoop
""")
    assert fusion_kinds(module) == ["loop", "reduction", "reduction"]
    check_same_results(SOFTMAX, module)


def test_scalar_constants_fused_last_large_constants_not():
    text = """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[] constant(2)
  big = f32[4] constant({1, 2, 3, 4})
  b = f32[4] broadcast(c), dimensions={}
  m = f32[4] multiply(p, b)
  ROOT a = f32[4] add(m, big)
}
// CHECK: %fused_computation{{.*}}
// CHECK: constant(2)
// CHECK: ENTRY
// CHECK: %big = f32[4]{0} constant({1, 2, 3, 4})
// CHECK: ROOT {{.*}} fusion(
"""
    module = check_pass("priority-fusion", text)
    assert [i.opcode for i in module.entry.instructions] == ["parameter", "constant", "fusion"]
    check_same_results(text, module)


# -- log, determinism, CLI -----------------------------------------------------------------------------
def test_decision_log_next_to_dumps(tmp_path, capsys):
    src = tmp_path / "softmax.hlo"
    src.write_text(SOFTMAX)
    code, _out, err = run_cli([str(src), "--passes", "priority-fusion", "--dump-to", str(tmp_path / "d"),
                               "--dump-pass-re", "priority-fusion"], capsys)
    assert code == 0, err
    log = (tmp_path / "d" / "module_0000.softmax.priority_fusion_dump.txt").read_text()
    lines = log.splitlines()
    assert lines[0] == "computation main"
    assert any(ln.startswith("update_priority producer=shifted consumers=e us_unfused=") for ln in lines)
    assert 'producer_ineligible producer=row_max reason="cannot fuse into max_b: fusion into output of a ' \
        'reduce fusion would create a loop fusion [reduction_becomes_loop]"' in lines
    assert lines[-2].startswith("fusion fusion=") and "producer=ninf consumer=row_max kind=kInput " \
        "rule=scalar-constant" in lines[-2]
    for ln in lines:
        assert ln.split(" ")[0] in ("computation", "update_priority", "fusion", "producer_ineligible")
    # without a pass regex that selects the pass there is no log (XLA's DumpingEnabledForHloPass)
    code, _out, err = run_cli([str(src), "--passes", "priority-fusion", "--dump-to", str(tmp_path / "e")],
                              capsys)
    assert code == 0, err
    assert not list((tmp_path / "e").glob("*priority_fusion_dump*"))


def test_deterministic_across_hash_seeds(tmp_path):
    src = ROOT / "testdata" / "transformer_layer.hlo"
    outs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        res = subprocess.run([sys.executable, "-m", "hlo_opt.cli", str(src), "--passes",
                              "priority-fusion"], capture_output=True, text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        outs.add(res.stdout)
    assert len(outs) == 1
    assert "fusion(" in outs.pop()


def test_disable_pass_gives_the_unfused_pipeline(tmp_path, capsys):
    src = tmp_path / "softmax.hlo"
    src.write_text(SOFTMAX)
    # normalization-fusion (before priority fusion) would make the softmax one kCustom fusion
    code, fused, err = run_cli([str(src), "--disable-pass", "normalization-fusion", "--dump-to",
                                str(tmp_path / "on"), "--dump-pass-re", ".*"], capsys)
    assert code == 0, err
    assert "kind=kInput" in fused
    assert (tmp_path / "on" / "module_0000.softmax.priority_fusion_dump.txt").exists()
    code, unfused, err = run_cli([str(src), "--disable-pass", "priority-fusion", "--disable-pass",
                                  "multi_output_fusion", "--disable-pass", "normalization-fusion",
                                  "--dump-to", str(tmp_path / "off"), "--dump-pass-re", ".*"], capsys)
    assert code == 0, err
    entry = unfused[unfused.index("ENTRY"):]
    # Unfused, every compute op is its own kernel: fusion-wrapper gives each a one-op fusion.
    fusions = re.findall(r"%(\S+) = \S+ fusion\(", entry)
    assert fusions and all(name.startswith("wrapped_") for name in fusions), fusions
    assert "wrapped_reduce" in entry and "wrapped_divide" in entry
    assert not (tmp_path / "off" / "module_0000.softmax.priority_fusion_dump.txt").exists()
    check_same_results(SOFTMAX, parse_module(unfused))
    check_same_results(SOFTMAX, parse_module(fused))


def test_verify_each_names_producer_consumer_and_rule(tmp_path, capsys, monkeypatch):
    from hlo_opt.fusion.fusion_utils import FusionEditor
    from hlo_common.hlo.shape import Shape

    original = FusionEditor.fuse_producer_into_consumer

    def broken(self, producer, consumer, kind=None):  # a planted bad decision: wrong fusion shape
        fusion = original(self, producer, consumer, kind)
        if producer.name == "shifted":
            fusion.shape = Shape.array("f32", (4,))
        return fusion

    monkeypatch.setattr(FusionEditor, "fuse_producer_into_consumer", broken)
    src = tmp_path / "softmax.hlo"
    src.write_text(SOFTMAX)
    code, _out, err = run_cli([str(src), "--passes", "priority-fusion", "--verify-each"], capsys)
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.startswith("hlo-opt: error:")]
    assert len(lines) == 1, err
    assert "priority-fusion: fusing %shifted into %e (rule max-benefit" in lines[0]
    assert "breaks the verifier" in lines[0]


def test_module_numbers_unchanged_on_transformer_layer():
    text = (ROOT / "testdata" / "transformer_layer.hlo").read_text()
    module, changed = run_pass("priority-fusion", text)
    assert changed
    check_same_results(text, module)


def test_device_of_the_run_reaches_the_cost_model():
    from hlo_common.gpu.device import A100
    from hlo_opt.gpu_model import GpuPerformanceModel
    from hlo_common.hlo_pass.pipeline import HloPassPipeline, RunOptions
    from hlo_opt.passes.priority_fusion import PriorityFusion

    seen = []

    def factory(device):
        seen.append(device)
        return GpuPerformanceModel(device)

    module = parse_module(SOFTMAX)
    HloPassPipeline("t", [PriorityFusion(model_factory=factory)]).run_with(module, RunOptions(device=A100))
    assert seen and all(d is A100 for d in seen)


def test_only_priority_fusion_disabled(tmp_path, capsys):
    src = tmp_path / "softmax.hlo"
    src.write_text(SOFTMAX)
    code, out, err = run_cli([str(src), "--disable-pass", "priority-fusion", "--dump-to", str(tmp_path / "d"),
                              "--dump-pass-re", ".*"], capsys)
    assert code == 0, err
    assert not list((tmp_path / "d").glob("*priority_fusion*"))
    check_same_results(SOFTMAX, parse_module(out))
