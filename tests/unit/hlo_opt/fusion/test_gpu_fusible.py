"""gpu_fusible: each rule of can_fuse forbids the case XLA forbids (with its rule named) and allows
the nearby case XLA allows. HLO text in, decision out."""

from __future__ import annotations

import inspect
from dataclasses import replace

import pytest

from hlo_opt.fusion import gpu_fusible as gf
from hlo_common.gpu.device import H100
from hlo_common.hlo.parser import parse_module

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def _pair(text: str, producer: str, consumer: str):
    m = parse_module(text)
    comp = m.entry
    return comp.instruction(producer), comp.instruction(consumer)


def _decide(text, producer, consumer, rule=None, device=H100):
    p, c = _pair(text, producer, consumer)
    ctx = gf.FusionContext(device)
    return gf.can_fuse(p, c, ctx) if rule is None else rule(p, c, ctx)


def assert_forbids(rule_name, text, producer, consumer, device=H100):
    d = _decide(text, producer, consumer, device=device)
    assert not d and d.rule == rule_name, d
    assert "\n" not in d.reason and d.reason


def assert_allows(rule, text, producer, consumer, device=H100):
    d = _decide(text, producer, consumer, rule, device)
    assert d, d.explain()


CHAIN = """
HloModule m
ENTRY e {
  p = f32[64] parameter(0)
  n = f32[64] negate(p)
  a = f32[64] abs(n)
  ROOT t = (f32[64], f32[64]) tuple(n, a)
}
"""


def test_producer_is_root():
    text = """
HloModule m
ENTRY e {
  p = f32[64] parameter(0)
  ROOT n = f32[64] negate(p)
  a = f32[64] abs(n)
}
"""
    assert_forbids("producer_is_root", text, "n", "a")
    assert_allows(gf.producer_is_root, CHAIN, "n", "a")
    assert gf.can_fuse(*_pair(CHAIN, "n", "a"))


def test_not_fusible_side_effects_and_ops():
    text = """
HloModule m
ENTRY e {
  p = f32[64,64] parameter(0)
  n = f32[64,64] negate(p)
  d = f32[64,64] dot(n, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[64,64] custom-call(n), custom_call_target="foo", custom_call_has_side_effect=true
  ROOT t = (f32[64,64], f32[64,64]) tuple(d, c)
}
"""
    assert_forbids("not_fusible", text, "n", "d")  # dot: not a fusible consumer
    assert_forbids("not_fusible", text, "n", "c")  # side-effecting custom call
    assert_allows(gf.not_fusible, CHAIN, "n", "a")


def test_consumer_is_lone_bitcast():
    text = """
HloModule m
ENTRY e {
  p = f32[8,8] parameter(0)
  n = f32[8,8] negate(p)
  b = f32[64] bitcast(n)
  b2 = s8[8,8,4] bitcast(n)
  ROOT t = (f32[64], s8[8,8,4]) tuple(b, b2)
}
"""
    assert_forbids("consumer_is_lone_bitcast", text, "n", "b")
    # a bitcast that changes the bit width is not a "fusible bitcast": not this rule
    assert_allows(gf.consumer_is_lone_bitcast, text, "n", "b2")


SCATTER = """
HloModule m
""" + ADD + """
ENTRY e {
  p = f32[16,4] parameter(0)
  i = s32[3,1] parameter(1)
  u = f32[3,4] parameter(2)
  op = f32[16,4] negate(p)
  upd = f32[3,4] negate(u)
  other = f32[16,4] broadcast(p), dimensions={}
  s = f32[16,4] scatter(op, i, upd), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  after = f32[16,4] abs(s)
  ROOT t = (f32[16,4], f32[16,4]) tuple(after, other)
}
"""


def test_scatter_output_or_in_place_operand():
    assert_forbids("scatter_output_or_in_place_operand", SCATTER, "op", "s")  # the in-place operand
    assert_forbids("scatter_output_or_in_place_operand", SCATTER, "s", "after")  # the scatter's output
    assert_allows(gf.scatter_output_or_in_place_operand, SCATTER, "upd", "s")  # the updates may be fused
    assert gf.can_fuse(*_pair(SCATTER, "upd", "s"))


REDUCE_REDUCE = """
HloModule m
""" + ADD + """
ENTRY e {
  p = f32[32,64,64] parameter(0)
  z = f32[] constant(0)
  r1 = f32[32,64] reduce(p, z), dimensions={2}, to_apply=add
  r2 = f32[32] reduce(r1, z), dimensions={1}, to_apply=add
  small = f32[32,64] reduce(f32[32,64,2] parameter(1), z), dimensions={2}, to_apply=add
  r3 = f32[32] reduce(small, z), dimensions={1}, to_apply=add
  ROOT t = (f32[32], f32[32]) tuple(r2, r3)
}
"""


def test_both_significant_reduce():
    assert_forbids("both_significant_reduce", REDUCE_REDUCE, "r1", "r2")
    # a reduce of 2 elements per output is not significant
    assert_allows(gf.both_significant_reduce, REDUCE_REDUCE, "small", "r3")


REDUCE_EPILOGUE = """
HloModule m
""" + ADD + """
ENTRY e {
  p = f32[128,1024] parameter(0)
  z = f32[] constant(0)
  r = f32[128] reduce(p, z), dimensions={1}, to_apply=add
  b = f32[128,1024] broadcast(r), dimensions={0}
  r2 = f32[128] reduce(p, z), dimensions={1}, to_apply=add
  n = f32[128] negate(r2)
  ROOT t = (f32[128,1024], f32[128]) tuple(b, n)
}
"""


def test_reduction_becomes_loop():
    # a broadcast of the reduction as the root: the fused hero is the broadcast, a loop fusion
    assert_forbids("reduction_becomes_loop", REDUCE_EPILOGUE, "r", "b")
    # an elementwise epilogue keeps the (race-free) reduction hero
    assert_allows(gf.reduction_becomes_loop, REDUCE_EPILOGUE, "r2", "n")


def test_shared_memory():
    text = """
HloModule m
""" + ADD + """
ENTRY e {
  p = f32[64,256] parameter(0)
  z = f32[] constant(0)
  col = f32[256] reduce(p, z), dimensions={0}, to_apply=add
  n = f32[64,256] negate(p)
  ROOT t = (f32[256], f32[64,256]) tuple(col, n)
}
"""
    # a column reduction budgets 4*32*33*4 = 16896 bytes; a device with 16 KiB per block cannot
    small = replace(H100, shared_memory_per_block=16384)
    assert_forbids("shared_memory", text, "n", "col", device=small)
    assert_allows(gf.shared_memory, text, "n", "col")
    assert gf.shared_memory_usage(_pair(text, "n", "col")[1]) == 16896


def _many_reductions(n: int) -> str:
    lines = [f"  r{i} = f32[64] reduce(p, z), dimensions={{1}}, to_apply=add" for i in range(n)]
    body = "\n".join(lines)
    fused = "\n".join(f"  fr{i} = f32[64] reduce(q, zz), dimensions={{1}}, to_apply=add" for i in range(n))
    tup = ", ".join(f"fr{i}" for i in range(n))
    shapes = ", ".join("f32[64]" for _ in range(n))
    return f"""
HloModule m
{ADD}
fc {{
  q = f32[64,64] parameter(0)
  zz = f32[] constant(0)
{fused}
  ROOT t = ({shapes}) tuple({tup})
}}
ENTRY e {{
  p = f32[64,64] parameter(0)
  z = f32[] constant(0)
  x = f32[64,64] negate(p)
  f = ({shapes}) fusion(x), kind=kInput, calls=fc
{body}
  ROOT t = (({shapes})) tuple(f)
}}
"""


def test_unnested_reductions():
    # an elementwise producer with 1 reduce... counted with the consumer's 9
    text9 = _many_reductions(9)
    text8 = _many_reductions(8)
    p9, c9 = _pair(text9, "x", "f")
    assert gf.num_unnested_reductions(c9) == 9
    ctx = gf.FusionContext()
    assert not gf.unnested_reductions(p9, c9, ctx)
    assert gf.unnested_reductions(p9, c9, ctx).rule == "unnested_reductions"
    p8, c8 = _pair(text8, "x", "f")
    assert gf.unnested_reductions(p8, c8, ctx)


def _wide_consumer(n: int) -> str:
    params = "\n".join(f"  p{i} = f32[8] parameter({i})" for i in range(n))
    adds = ["  s0 = f32[8] add(x, p0)"] + [f"  s{i} = f32[8] add(s{i - 1}, p{i})" for i in range(1, n)]
    fparams = "\n".join(f"  q{i} = f32[8] parameter({i})" for i in range(n + 1))
    fadds = ["  t0 = f32[8] add(q0, q1)"] + [f"  t{i} = f32[8] add(t{i - 1}, q{i + 1})" for i in range(1, n)]
    ops = ", ".join(["x"] + [f"p{i}" for i in range(n)])
    return f"""
HloModule m
fc {{
{fparams}
{chr(10).join(fadds[:-1])}
  ROOT {fadds[-1].strip()}
}}
ENTRY e {{
{params}
  y = f32[8] parameter({n})
  w = f32[8] parameter({n + 1})
  x = f32[8] add(y, w)
  ROOT f = f32[8] fusion({ops}), kind=kLoop, calls=fc
}}
"""


def test_operand_limit():
    # consumer reads x and 95 parameters; x brings two new operands: 95 + 2 + 1 output = 98 > 96
    assert_forbids("operand_limit", _wide_consumer(95), "x", "f")
    # 93 parameters: 93 + 2 + 1 = 96, allowed
    assert_allows(gf.operand_limit, _wide_consumer(93), "x", "f")


def _ir_size_case(slices: int) -> str:
    """A 62-op elementwise producer fusion read by a consumer fusion through `slices` slices."""
    chain = " ".join(f"e{i} = f32[256] exponential(e{i - 1})" for i in range(1, 60))
    sl = " ".join(f"sl{i} = f32[1] slice(q), slice={{[{i}:{i + 1}]}}" for i in range(slices))
    return f"""
HloModule m
f {{ p = f32[256] parameter(0) e0 = f32[256] exponential(p) {chain}
  ROOT r = f32[256] add(e59, p) }}
g {{ q = f32[256] parameter(0) {sl}
  ROOT c = f32[{slices}] concatenate({", ".join(f"sl{i}" for i in range(slices))}), dimensions={{0}} }}
ENTRY e {{ x = f32[256] parameter(0)
  prod = f32[256] fusion(x), kind=kLoop, calls=f
  ROOT cons = f32[{slices}] fusion(prod), kind=kLoop, calls=g }}
"""


def test_ir_size_limit():
    # the cost analysis' IR sizes (XLA's ProducerConsumerMergedTooLarge): the producer (62) is
    # emitted once per slice reading it; 62 * 200 + 402 > 10000, 62 * 150 + 302 is not
    assert_forbids("ir_size_limit", _ir_size_case(200), "prod", "cons")
    assert_allows(gf.ir_size_limit, _ir_size_case(150), "prod", "cons")
    # 300 elementwise reads of the producer inside one kernel emit it once (the count of the
    # parameter's users, 300, would have said 62 * 300 > 10000)
    uses = " ".join(f"use{i} = f32[256] abs(q)" for i in range(300))
    acc = " ".join(f"v{i} = f32[256] add(v{i - 1}, use{i})" for i in range(1, 300))
    elementwise = _ir_size_case(1).replace(
        "ROOT c = f32[1] concatenate(sl0), dimensions={0}",
        f"{uses} v0 = f32[256] add(use0, use0) {acc} ROOT c = f32[256] negate(v299)").replace(
        "ROOT cons = f32[1]", "ROOT cons = f32[256]")
    assert_allows(gf.ir_size_limit, elementwise, "prod", "cons")


def test_ir_size_limit_is_the_cost_analysis_check():
    # one IR-size check: the rule forbids exactly where the cost model's estimate is too large
    for slices in (150, 200):
        p, c = _pair(_ir_size_case(slices), "prod", "cons")
        ctx = gf.FusionContext()
        assert bool(gf.ir_size_limit(p, c, ctx)) != ctx.cost.producer_consumer_merged_too_large(p, c)


DUS = """
HloModule m
ENTRY e {
  buf = f32[16,8] parameter(0)
  upd = f32[4,8] parameter(1)
  i = s32[] parameter(2)
  z = s32[] constant(0)
  four = s32[] constant(4)
  sl = f32[4,8] slice(buf), slice={[4:8], [0:8]}
  nsl = f32[4,8] negate(sl)
  d1 = f32[16,8] dynamic-update-slice(buf, nsl, four, z)
  rev = f32[16,8] reverse(buf), dimensions={0}
  rs = f32[4,8] slice(rev), slice={[0:4], [0:8]}
  d2 = f32[16,8] dynamic-update-slice(buf, rs, i, z)
  ROOT t = (f32[16,8], f32[16,8]) tuple(d1, d2)
}
"""


def test_in_place():
    # a slice at the very indices the DUS writes: safe (XLA's common special case)
    assert_allows(gf.in_place, DUS, "sl", "d1")
    # a reverse of the buffer the DUS updates: unrecognized, refused
    assert_forbids("in_place", DUS, "rev", "d2")
    # an elementwise producer of the update never conflicts
    assert_allows(gf.in_place, DUS, "nsl", "d1")


@pytest.mark.parametrize("rule", gf.RULES)
def test_every_rule_is_exercised(rule):
    assert rule.__name__ in {
        "producer_is_root", "not_fusible", "consumer_is_lone_bitcast", "scatter_output_or_in_place_operand",
        "both_significant_reduce", "reduction_becomes_loop", "shared_memory", "unnested_reductions",
        "operand_limit", "ir_size_limit", "in_place"}


@pytest.mark.parametrize("rule", gf.RULES, ids=lambda r: r.__name__)
def test_every_rule_has_the_one_signature(rule):
    # can_fuse calls each rule alike: no rule needs a special case
    params = inspect.signature(rule).parameters
    assert list(params) == ["producer", "consumer", "ctx"]
    assert all(p.default is inspect.Parameter.empty for p in params.values())
