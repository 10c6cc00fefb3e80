"""GpuHloCostAnalysis against the figures of XLA's gpu_hlo_cost_analysis_test.cc (ported cases).

XLA's tests run without a device, so every elementwise op costs the default 3 flops; here that
is `op_profile={}`. Differences from XLA are asserted as ours with a comment saying why.
"""

from __future__ import annotations

import pytest

from hlo_opt.gpu_model import GpuHloCostAnalysis, GpuPerformanceModel, flops_per_element
from hlo_common.hlo.ir import parse_module


def analyze(text: str, **kw):
    m = parse_module(text)
    return m, GpuHloCostAnalysis(op_profile={}, **kw)


def test_reduce_window_with_overlaps_repeated_reads():
    m, a = analyze("""
add { a0 = f32[] parameter(0) a1 = f32[] parameter(1) ROOT _ = f32[] add(a0, a1) }
ENTRY entry { p0 = f32[8,8] parameter(0) c0 = f32[] constant(0)
  ROOT r = f32[3,4] reduce-window(p0, c0), window={size=4x5 stride=2x1}, to_apply=add }""")
    root = m.entry.root
    n_out = 3 * 4
    assert a.flop_count(root) == 3 * n_out * (4 * 5 - 1)
    assert a.operand_bytes_accessed(root, 0) == 4 * n_out * 4 * 5
    assert a.operand_bytes_accessed(root, 1) == 4
    assert a.output_bytes_accessed(root) == 4 * n_out


def test_broadcast_with_repeats():
    m, a = analyze("""
f { p1 = s8[] parameter(0) c1 = s8[] constant(0) a1 = s8[] add(p1, c1)
  b1 = s8[10000] broadcast(a1), dimensions={} b2 = s8[10000] broadcast(c1), dimensions={}
  ROOT r1 = s8[10000] add(b1, b2) }
ENTRY e { p0 = s8[] parameter(0) ROOT r0 = s8[10000] fusion(p0), kind=kInput, calls=f }""")
    root = m.entry.root
    assert a.output_bytes_accessed(root) == 10000
    assert a.operand_bytes_accessed(root, 0) == 10000
    assert a.bytes_accessed(root) == 2 * 10000


def test_without_repeats_counts_each_input_once():
    m, a = analyze("""
f { p1 = s8[] parameter(0) a1 = s8[] add(p1, p1) b1 = s8[10000] broadcast(a1), dimensions={}
  a2 = s8[10000] add(b1, b1) slice1 = s8[8000] slice(a2), slice={[0:8000]}
  slice2 = s8[8000] slice(a2), slice={[2000:10000]} c = s8[10000] constant({...})
  slicec1 = s8[8000] slice(c), slice={[0:8000]} slicec2 = s8[8000] slice(c), slice={[2000:10000]}
  a3 = s8[8000] add(slice1, slice2) a4 = s8[8000] add(slicec1, slicec2) ROOT a5 = s8[8000] add(a3, a4) }
ENTRY e { p0 = s8[] parameter(0) ROOT r0 = s8[8000] fusion(p0), kind=kInput, calls=f }""",
                   count_multiple_input_accesses=False)
    root = m.entry.root
    assert a.output_bytes_accessed(root) == 8000
    assert a.operand_bytes_accessed(root, 0) == 1
    assert a.bytes_accessed(root) == 1 + 8000 + 10000  # operand + output + constant


def test_broadcast_flops_and_ir_size():
    m, a = analyze("""
f { i0 = f32[1024] iota(), iota_dimension=0 m0 = f32[1024] add(i0, i0) s0 = f32[1024] multiply(m0, m0)
  b0 = f32[1024,1024] broadcast(s0), dimensions={0} ROOT r0 = f32[1024,1024] negate(b0) }
ENTRY e { ROOT r = f32[1024,1024] fusion(), kind=kInput, calls=f }""")
    root = m.entry.root
    n = 1024 * 1024
    assert a.output_bytes_accessed(root) == n * 4
    assert a.bytes_accessed(root) == n * 4
    assert a.flop_count(root) == n * 3 * 3
    assert a.ir_size(root) == 5


@pytest.mark.parametrize("hlo,operand_bytes,ir", [
    ("""f { p1 = s8[100000000] parameter(0) i1 = s8[100000000] iota(), iota_dimension=0
  a1 = s8[100000000] add(p1, i1) ROOT r1 = s8[1] slice(a1), slice={[0:1]} }
ENTRY e { p0 = s8[100000000] parameter(0) ROOT r0 = s8[1] fusion(p0), kind=kInput, calls=f }""", 1, 4),
    ("""f { p1 = s8[100] parameter(0) i1 = s8[100] iota(), iota_dimension=0 a1 = s8[100] add(p1, i1)
  slice1 = s8[1] slice(a1), slice={[0:1]} slice2 = s8[1] slice(a1), slice={[3:4]}
  ROOT r = s8[1] add(slice1, slice2) }
ENTRY e { p0 = s8[100] parameter(0) ROOT r0 = s8[1] fusion(p0), kind=kInput, calls=f }""", 2, 9),
    ("""f { p0 = s8[] parameter(0) m0 = s8[] multiply(p0, p0) n0 = s8[] negate(p0) ROOT
  a0 = s8[] add(m0, n0) }
ENTRY e { param0 = s8[] parameter(0) ROOT r0 = s8[] fusion(param0), kind=kInput, calls=f }""", 1, 4),
], ids=["slice", "two_slices", "multiple_trivial_users"])
def test_slices_and_trivial_users(hlo, operand_bytes, ir):
    m, a = analyze(hlo)
    root = m.entry.root
    assert a.output_bytes_accessed(root) == 1
    assert a.operand_bytes_accessed(root, 0) == operand_bytes
    assert a.bytes_accessed(root) == 1 + operand_bytes
    assert a.ir_size(root) == ir


def test_elementwise_bitcast_is_one_access():
    m, a = analyze("""
f { p0 = s8[10] parameter(0) negate = s8[10] negate(p0) bitcast = u8[10] bitcast(p0)
  ROOT result = (s8[10], u8[10]) tuple(negate, bitcast) }
ENTRY e { param0 = s8[10] parameter(0) ROOT
  fusion = (s8[10], u8[10]) fusion(param0), kind=kLoop, calls=f }""")
    root = m.entry.root
    assert a.ir_size(root.fused_computation().parameter(0)) == 1
    assert a.ir_size(root) == 4


def test_mixed_users():
    m, a = analyze("""
f { p0 = s8[10] parameter(0) n0 = s8[10] negate(p0) m0 = s8[10] multiply(n0, n0) a0 = s8[10] add(n0, n0)
  s0 = s8[5] slice(a0), slice={[0:5]} svar1 = s8[2] slice(n0), slice={[4:6]} n1 = s8[2] negate(svar1)
  ROOT c0 = s8[17] concatenate(s0, m0, n1), dimensions={0} }
ENTRY e { param0 = s8[10] parameter(0) ROOT r0 = s8[17] fusion(param0), kind=kInput, calls=f }""")
    root = m.entry.root
    p0 = root.fused_computation().parameter(0)
    assert a.output_bytes_accessed(root) == 17
    assert a.operand_bytes_accessed(root, 0) == 17
    assert a.bytes_accessed(root) == 17 + 17
    assert a.ir_size(p0) == 3
    assert a.ir_size(p0) == a.ir_size(p0.users[0])
    assert a.ir_size(root) == 12


def test_fractional_use_rounding_up():
    m, a = analyze("""
add_s8 { lhs = s8[] parameter(0) rhs = s8[] parameter(1) ROOT add = s8[] add(lhs, rhs) }
f { p0 = s8[] parameter(0) b0 = s8[10] broadcast(p0), dimensions={} c0 = s8[] constant(0)
  r0 = s8[] reduce(b0, c0), dimensions={0}, to_apply=add_s8 bitcast0 = s8[1] bitcast(r0)
  i0 = s8[5] iota(), iota_dimension=0 cat0 = s8[6] concatenate(bitcast0, i0), dimensions={0}
  p1 = s32[] parameter(1) ROOT s0 = s8[2] dynamic-slice(cat0, p1), dynamic_slice_sizes={2} }
ENTRY e { p0 = s8[] parameter(0) p1 = s32[] parameter(1) ROOT
  r = s8[2] fusion(p0, p1), kind=kInput, calls=f }""")
    root = m.entry.root
    assert a.output_bytes_accessed(root) == 2
    assert a.operand_bytes_accessed(root, 0) == 10
    assert a.operand_bytes_accessed(root, 1) == 4
    assert a.bytes_accessed(root) == 2 + 10 + 4


def test_large_constant():
    m, a = analyze("""
f { p0 = s8[1000] parameter(0) c0 = s8[1000] constant({...}) ROOT a0 = s8[1000] add(p0, c0) }
ENTRY e { p0 = s8[1000] parameter(0) ROOT r = s8[1000] fusion(p0), kind=kInput, calls=f }""")
    root = m.entry.root
    assert a.output_bytes_accessed(root) == 1000
    assert a.operand_bytes_accessed(root, 0) == 1000
    assert a.bytes_accessed(root) == 3000
    assert a.ir_size(root) == 3


def test_dus_using_operand_data_reads_the_rest():
    m, a = analyze("""
f { to_update = s8[3,1,1,1] parameter(0) update = s8[1,1,1,1] constant(0) a = s32[] constant(0)
  dus = s8[3,1,1,1] dynamic-update-slice(to_update, update, a, a, a, a) ROOT _ = s8[3,1,1,1] negate(dus) }
ENTRY _ { to_update = s8[3,1,1,1] parameter(0) ROOT
  _ = s8[3,1,1,1] fusion(to_update), kind=kLoop, calls=f }""")
    root = m.entry.root
    assert a.operand_bytes_accessed(root, 0) == 3 - 1
    assert a.output_bytes_accessed(root) == 3


def test_dus_root_is_in_place():
    m, a = analyze("""
f { to_update = s8[3,1,1,1] parameter(0) update = s8[1,1,1,1] constant(0) a = s32[] constant(0)
  ROOT dus = s8[3,1,1,1] dynamic-update-slice(to_update, update, a, a, a, a) }
ENTRY _ { to_update = s8[3,1,1,1] parameter(0) ROOT
  _ = s8[3,1,1,1] fusion(to_update), kind=kLoop, calls=f }""")
    root = m.entry.root
    assert a.operand_bytes_accessed(root, 0) == 0
    assert a.output_bytes_accessed(root) == 1


def test_common_elementwise_utilization():
    m, a = analyze("""
add { p0 = s8[] parameter(0) p1 = s8[] parameter(1) ROOT _ = s8[] add(p0, p1) }
f { p0 = s8[10] parameter(0) p1 = s8[10] parameter(1) a = s8[10] add(p0, p1) c0 = s8[] constant(0)
  r0 = s8[] reduce(a, c0), dimensions={0}, to_apply=add c1 = s8[] constant(100)
  r1 = s8[] reduce(a, c1), dimensions={0}, to_apply=add ROOT _ = s8[] add(r0, r1) }
ENTRY _ { p0 = s8[10] parameter(0) p1 = s8[10] parameter(1) ROOT
  _ = s8[] fusion(p0, p1), kind=kLoop, calls=f }""")
    f = m.entry.root
    comp = f.fused_computation()
    assert a.common_elementwise_utilization(f, comp.parameter(0), comp.parameter(1)) == 2.0


@pytest.mark.parametrize("root_text", ["ROOT _ = s8[10] negate(a)",
                                       "neg = s8[10] negate(a) ROOT _ = (s8[10], s8[10]) tuple(a, neg)"])
def test_common_elementwise_utilization_parameter_and_root(root_text):
    shape = "(s8[10], s8[10])" if "tuple" in root_text else "s8[10]"
    m, a = analyze(f"""
f {{ p0 = s8[10] parameter(0) p1 = s8[] parameter(1) p1b = s8[10] broadcast(p1), dimensions={{}}
  a = s8[10] add(p0, p1b) {root_text} }}
ENTRY _ {{ p0 = s8[10] parameter(0) p1 = s8[] parameter(1) ROOT
  _ = {shape} fusion(p0, p1), kind=kLoop, calls=f }}""")
    f = m.entry.root
    comp = f.fused_computation()
    assert a.common_elementwise_utilization(f, comp.parameter(0), comp.root) == 1.0
    assert a.common_elementwise_utilization(f, comp.parameter(1), comp.root) == 0.0


def test_reduce_and_variadic_reduce():
    m, a = analyze("""
add { param_0 = f32[] parameter(0) param_1 = f32[] parameter(1) ROOT add.0 = f32[] add(param_0, param_1) }
add2 { p0 = f32[] parameter(0) p1 = f32[] parameter(1) p2 = f32[] parameter(2) p3 = f32[] parameter(3)
  a0 = f32[] add(p0, p2) a1 = f32[] add(p1, p3) ROOT t = (f32[], f32[]) tuple(a0, a1) }
ENTRY e { x = f32[32,40] parameter(0) y = f32[32,40] parameter(1) z = f32[] parameter(2) c = f32[] constant(0)
  r = f32[32] reduce(x, c), dimensions={1}, to_apply=add
  ROOT v = (f32[32], f32[32]) reduce(x, y, z, c), dimensions={1}, to_apply=add2 }""")
    r = m.entry.instruction("r")
    v = m.entry.root
    assert [a.operand_bytes_accessed(r, i) for i in range(2)] == [4 * 32 * 40, 4 * 32]
    assert a.output_bytes_accessed(r) == 4 * 32
    assert a.bytes_accessed(r) == 4 * 32 * 40 + 4 * 32 + 4 * 32
    assert a.flop_count(r) == 32 * 39 * 3
    assert [a.operand_bytes_accessed(v, i) for i in range(4)] == [4 * 32 * 40, 4 * 32 * 40, 4 * 32, 4 * 32]
    assert a.output_bytes_accessed(v) == 2 * 4 * 32
    assert a.bytes_accessed(v) == 2 * 4 * 32 * 40 + 2 * 4 * 32 + 2 * 4 * 32
    assert a.flop_count(v) == 32 * 39 * 6


def test_custom_op_profile_is_used():
    m = parse_module("""
ENTRY e { p0 = f32[10] parameter(0) p1 = f32[10] parameter(1) p2 = f32[10] parameter(2)
  p3 = f32[10] parameter(3)
  tanh = f32[10] tanh(p0) mul = f32[10] multiply(tanh, p1) ROOT clamp = f32[10] clamp(mul, p2, p3) }""")
    a = GpuHloCostAnalysis(op_profile={("clamp", "f32"): 7, ("multiply", "f32"): 11, ("tanh", "f32"): 13})
    c = m.entry
    assert a.flop_count(c.instruction("clamp")) == 70
    assert a.flop_count(c.instruction("mul")) == 110
    assert a.flop_count(c.instruction("tanh")) == 130


def test_cublas_custom_call_counts_the_result_only():
    m, a = analyze("""
ENTRY main { arg0 = f32[100,100] parameter(0) arg1 = f32[100,100] parameter(1)
  cc = (f32[100,100], s8[80000]) custom-call(arg0, arg1), custom_call_target="__cublas$lt$matmul"
  ROOT g = f32[100,100] get-tuple-element(cc), index=0 }""")
    cc = m.entry.instruction("cc")
    assert a.operand_bytes_accessed(cc, 0) == 40000
    assert a.output_bytes_accessed(cc) == 40000
    assert a.bytes_accessed(cc) == 3 * 40000


def test_device_profiles():
    assert flops_per_element("sm_90", "exponential", "f32") == 79
    assert flops_per_element("sm_90", "divide", "f32") == 19
    assert flops_per_element("sm_90", "negate", "f32") == 3
    assert flops_per_element("sm_80", "tanh", "f32") == 504
    assert flops_per_element("sm_86", "tanh", "f32") == 190
    assert flops_per_element("sm_86", "add", "f32") == 3  # not in XLA's sm_86 table: the default
    assert flops_per_element("sm_75", "tanh", "f32") == 190  # no table: XLA falls back to sm_86
    m = parse_module("ENTRY e { p = f32[100] parameter(0) ROOT t = f32[100] tanh(p) }")
    assert GpuHloCostAnalysis().flop_count(m.entry.root) == 467 * 100


def test_ir_size_too_large_rule():
    chain = " ".join(f"e{i} = f32[256] exponential(e{i - 1})" for i in range(1, 60))
    slices = " ".join(f"sl{i} = f32[1] slice(q), slice={{[{i}:{i + 1}]}}" for i in range(200))
    m = parse_module(f"""
f {{ p = f32[256] parameter(0) e0 = f32[256] exponential(p) {chain}
  ROOT r = f32[256] add(e59, p) }}
g {{ q = f32[256] parameter(0) {slices}
  ROOT c = f32[200] concatenate({", ".join(f"sl{i}" for i in range(200))}), dimensions={{0}} }}
ENTRY e {{ x = f32[256] parameter(0) n = f32[256] negate(x)
  pf = f32[256] fusion(x), kind=kLoop, calls=f
  ROOT cf = f32[200] fusion(pf), kind=kLoop, calls=g }}""")
    a = GpuHloCostAnalysis()
    c = m.entry
    pf, cf = c.instruction("pf"), c.instruction("cf")
    assert a.ir_size(pf) == 62
    # an elementwise chain reaching the root twice is still emitted once per root
    assert a.ir_size(pf.fused_computation().parameter(0)) == 1
    assert a.ir_size(cf.fused_computation().parameter(0)) == 200  # once per slice
    assert a.producer_consumer_merged_too_large(pf, cf)  # 62 * 200 + 402 > 10000
    assert not a.producer_consumer_merged_too_large(c.instruction("n"), pf)


def test_invalidate_recomputes():
    m = parse_module("ENTRY e { p = f32[100] parameter(0) ROOT t = f32[100] tanh(p) }")
    model = GpuPerformanceModel()
    first = model.estimate_instruction(m.entry.root)
    assert model.estimate_instruction(m.entry.root) is first
    model.invalidate(m.entry.root)
    assert model.estimate_instruction(m.entry.root) is not first
