"""fusion_utils: wrapping an instruction in a fusion and fusing producers into consumers keeps the
module valid (verifier), printable and parseable, and computing the same numbers."""

from __future__ import annotations

import pytest


from filecheck_util import check_text  # noqa: E402
from hlo_opt.fusion.fusion_utils import (  # noqa: E402
    FusionEditor, fuse_producer_into_consumer, wrap_in_fusion,
)
from hlo_common.hlo.parser import parse_module  # noqa: E402
from hlo_common.hlo.printer import print_module  # noqa: E402
from hlo_common.hlo.verifier import verify_module  # noqa: E402
from numerics_testlib import check_same_results  # noqa: E402

SOFTMAX = """
HloModule softmax
max_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4,8] parameter(0)
  ninf = f32[] constant(-inf)
  row_max = f32[4] reduce(x, ninf), dimensions={1}, to_apply=max_f32
  max_b = f32[4,8] broadcast(row_max), dimensions={0}
  shifted = f32[4,8] subtract(x, max_b)
  e = f32[4,8] exponential(shifted)
  zero = f32[] constant(0)
  row_sum = f32[4] reduce(e, zero), dimensions={1}, to_apply=add_f32
  sum_b = f32[4,8] broadcast(row_sum), dimensions={0}
  ROOT y = f32[4,8] divide(e, sum_b)
}
"""


def _check(module, before_text=SOFTMAX):
    verify_module(module)
    out = print_module(module)
    assert print_module(parse_module(out, "<reparse>")) == out
    check_same_results(before_text, module)
    return out


def test_wrap_one_instruction():
    m = parse_module(SOFTMAX)
    fusion = wrap_in_fusion(m.entry.instruction("shifted"), "kLoop")
    assert fusion.name == "fusion" and fusion.attrs["kind"] == "kLoop"
    assert [o.name for o in fusion.operands] == ["x", "max_b"]
    out = _check(m)
    check_text(out, """
// CHECK:      %fused_computation (param_0: f32[4,8], param_1: f32[4,8]) -> f32[4,8] {
// CHECK-NEXT:   %param_0 = f32[4,8]{1,0} parameter(0)
// CHECK-NEXT:   %param_1 = f32[4,8]{1,0} parameter(1)
// CHECK-NEXT:   ROOT %shifted.1 = f32[4,8]{1,0} subtract(%param_0, %param_1)
// CHECK:      %fusion = f32[4,8]{1,0} fusion(%x, %max_b), kind=kLoop, calls=%fused_computation
// CHECK-NEXT: %e = f32[4,8]{1,0} exponential(%fusion)
""")


def test_wrap_dedups_repeated_operand():
    text = """
HloModule m
ENTRY e {
  p = f32[3] parameter(0)
  ROOT a = f32[3] add(p, p)
}
"""
    m = parse_module(text)
    fusion = wrap_in_fusion(m.entry.root, "kLoop")
    assert len(fusion.operands) == 1 and m.entry.root is fusion
    out = _check(m, text)
    check_text(out, "// CHECK: ROOT %a.1 = f32[3]{0} add(%param_0, %param_0)")


def test_fuse_chain_into_plain_consumer_producer_removed():
    m = parse_module(SOFTMAX)
    y = m.entry.root
    sum_b = m.entry.instruction("sum_b")
    fusion = fuse_producer_into_consumer(sum_b, y, "kLoop")
    assert m.entry.root is fusion
    assert "sum_b" not in [i.name for i in m.entry.instructions]  # single user: gone
    assert sorted(o.name for o in fusion.operands) == ["e", "row_sum"]
    _check(m)


def test_producer_with_other_users_is_kept_and_duplicated():
    m = parse_module(SOFTMAX)
    e = m.entry.instruction("e")
    fusion = fuse_producer_into_consumer(e, m.entry.root, "kLoop")
    assert e.parent is m.entry and e.users == [m.entry.instruction("row_sum")]
    assert [o.name for o in fusion.operands] == ["sum_b", "shifted"]
    _check(m)


def test_fusion_producer_body_is_inlined_and_operands_shared():
    m = parse_module(SOFTMAX)
    editor = FusionEditor(m)
    comp = m.entry
    f1 = editor.wrap_in_fusion(comp.instruction("shifted"), "kLoop")
    f1 = editor.fuse_producer_into_consumer(comp.instruction("max_b"), f1, "kLoop")
    # f1 reads x and row_max; the consumer e -> fusion
    f2 = editor.wrap_in_fusion(comp.instruction("e"), "kLoop")
    f2 = editor.fuse_producer_into_consumer(f1, f2, "kLoop")
    editor.flush()
    assert f1.parent is None  # merged away
    assert [o.name for o in f2.operands] == ["x", "row_max"]
    names = [c.name for c in m.computations]
    assert names.count("fused_computation") == 0 or f1.attrs["calls"].name not in names
    body = f2.fused_computation()
    assert [p.name for p in body.parameters] == ["param_0", "param_1"]
    _check(m)


def test_fusion_into_reduce_consumer_whose_operand_is_also_read_by_producer():
    # the producer reads x, which the consumer fusion already reads: one parameter for x
    m = parse_module(SOFTMAX)
    comp = m.entry
    editor = FusionEditor(m)
    f = editor.wrap_in_fusion(comp.instruction("shifted"), "kLoop")
    f = editor.fuse_producer_into_consumer(comp.instruction("max_b"), f)
    f = editor.fuse_producer_into_consumer(comp.instruction("row_max"), f)
    editor.flush()
    assert [o.name for o in f.operands] == ["x", "ninf"]
    assert len(f.fused_computation().parameters) == 2
    _check(m)


def test_producer_that_is_root_stays():
    text = """
HloModule m
ENTRY e {
  p = f32[3] parameter(0)
  n = f32[3] negate(p)
  a = f32[3] abs(n)
  ROOT t = (f32[3], f32[3]) tuple(n, a)
}
"""
    m = parse_module(text)
    n = m.entry.instruction("n")
    fuse_producer_into_consumer(n, m.entry.instruction("a"), "kLoop")
    assert n.parent is m.entry
    _check(m, text)


def test_errors_name_the_instruction():
    m = parse_module(SOFTMAX)
    with pytest.raises(ValueError, match="%x is not an operand of %y"):
        fuse_producer_into_consumer(m.entry.instruction("x"), m.entry.root)
    with pytest.raises(ValueError, match="cannot fuse parameter %x"):
        fuse_producer_into_consumer(m.entry.instruction("x"), m.entry.instruction("shifted"))
    with pytest.raises(ValueError, match="unknown fusion kind 'kLoopy'"):
        wrap_in_fusion(m.entry.root, "kLoopy")


def test_names_deterministic_and_unique():
    outs = set()
    for _ in range(2):
        m = parse_module(SOFTMAX)
        editor = FusionEditor(m)
        for name in ("y", "shifted"):
            editor.wrap_in_fusion(m.entry.instruction(name), "kLoop")
        editor.flush()
        outs.add(print_module(m))
    (out,) = outs
    check_text(out, """
// CHECK: %fused_computation (
// CHECK: ROOT %y.1 = f32[4,8]{1,0} divide
// CHECK: %fused_computation.1 (
// CHECK: %fusion.1 = f32[4,8]{1,0} fusion(%x, %max_b), kind=kLoop, calls=%fused_computation.1
// CHECK: ROOT %fusion = f32[4,8]{1,0} fusion(%e, %sum_b), kind=kLoop, calls=%fused_computation
""")
