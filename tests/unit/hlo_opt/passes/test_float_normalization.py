"""FloatNormalization ("float-normalization-bf16"): converts to f32 around the ops an H100 (or an
A100 with `device=A100`) cannot compute in bf16, XLA's excess-precision shortcuts, called
computations made f32, tuple-shaped sorts per output; modules with nothing to do stay as they
are. Numbers: the interpreter's results before and after agree within the 16-bit bound of
design/testing.md (an element fails only when it is off by more than 2e-2 both absolutely and
relatively); the bf16 rounding the pass removes is all that may differ."""

import numpy as np

from hlo_common.gpu.device import A100
from hlo_common.hlo.parser import parse_module
from pass_testlib import _leaves, check_pass, check_unchanged, evaluate_or_skip, random_arguments

BOUND = 2e-2


def check_16bit_numerics(before_text: str, after, seed: int = 0) -> None:
    before = parse_module(before_text, "<before>")
    args = random_arguments(before, seed)
    expected = _leaves(evaluate_or_skip(before, args))
    got = _leaves(evaluate_or_skip(after, args))
    assert [(e.shape, e.dtype) for e in expected] == [(g.shape, g.dtype) for g in got]
    for e, g in zip(expected, got):
        e64, g64 = e.astype(np.float64), g.astype(np.float64)
        err = np.abs(g64 - e64)
        bad = (err > BOUND) & (err > BOUND * np.abs(e64))
        assert not bad.any(), f"{int(bad.sum())} elements off, worst {err.max()}"


TANH_DIVIDE = """
HloModule m
ENTRY e {
  x = bf16[4,8] parameter(0)
  y = bf16[4,8] parameter(1)
  t = bf16[4,8] tanh(x)
  d = bf16[4,8] divide(t, y)
  ROOT e = bf16[4,8] exponential(d)
}
// CHECK:      %[[CX:.*]] = f32[4,8]{1,0} convert(%x)
// CHECK-NEXT: %t = f32[4,8]{1,0} tanh(%[[CX]])
// CHECK-NEXT: %[[CY:.*]] = f32[4,8]{1,0} convert(%y)
// CHECK-NEXT: %d = f32[4,8]{1,0} divide(%t, %[[CY]])
// CHECK-NEXT: %[[BD:.*]] = bf16[4,8]{1,0} convert(%d)
// CHECK-NEXT: ROOT %e = bf16[4,8]{1,0} exponential(%[[BD]])
"""


def test_unsupported_ops_compute_in_f32_and_read_f32_producers_directly():
    # tanh's bf16 result is not converted back up for divide: divide reads f32 %t (excess precision);
    # exponential is a bf16 op on a GPU, so it reads the bf16 value.
    module = check_pass("float-normalization-bf16", TANH_DIVIDE)
    check_16bit_numerics(TANH_DIVIDE, module)


def test_hopper_bf16_arithmetic_and_f32_modules_are_unchanged():
    check_unchanged("float-normalization-bf16", """
HloModule m
add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
ENTRY e {
  x = bf16[16] parameter(0)
  y = bf16[16] parameter(1)
  m = bf16[16] multiply(x, y)
  n = bf16[16] negate(m)
  l = bf16[16] log(n)
  c = pred[16] compare(l, x), direction=LT
  s = bf16[16] select(c, l, x)
  z = bf16[] constant(0)
  r = bf16[] reduce(s, z), dimensions={0}, to_apply=add
  f = f32[16] parameter(2)
  ROOT t = (bf16[], f32[16]) tuple(r, f)
}
""")
    check_unchanged("float-normalization-bf16", """
HloModule m
ENTRY e {
  x = f32[16] parameter(0)
  ROOT t = f32[16] tanh(x)
}
""")


REDUCE_A100 = """
HloModule m
add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
ENTRY e {
  x = bf16[4,32] parameter(0)
  z = bf16[] constant(0)
  ROOT r = bf16[4] reduce(x, z), dimensions={1}, to_apply=add
}
// CHECK:      %add.clone (a.clone: f32[], b.clone: f32[]) -> f32[] {
// CHECK:      ENTRY %e
// CHECK:        %[[R:.*]] = f32[4]{0} reduce(%{{.*}}, %{{.*}}), dimensions={1}, to_apply=%add.clone
// CHECK-NEXT:   ROOT %{{.*}} = bf16[4]{0} convert(%[[R]])
"""


def test_on_an_a100_a_bf16_add_reduction_becomes_f32_with_an_f32_reducer():
    module = check_pass("float-normalization-bf16", REDUCE_A100, device=A100)
    assert [c.name for c in module.computations] == ["add.clone", "e"]
    check_16bit_numerics(REDUCE_A100, module)


def test_on_an_h100_the_same_reduction_stays_bf16():
    check_unchanged("float-normalization-bf16", REDUCE_A100.split("// CHECK")[0])


SORT_MIXED = """
HloModule m
cmp {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = bf16[16] parameter(0)
  y = f32[16] parameter(1)
  ROOT s = (bf16[16], f32[16]) sort(x, y), dimensions={0}, to_apply=cmp
}
// CHECK:      %cmp.clone (a.clone: f32[], b.clone: f32[], c.clone: f32[], d.clone: f32[]) -> pred[]
// CHECK:      %[[X:.*]] = f32[16]{0} convert(%x)
// CHECK-NEXT: %s = (f32[16]{0}, f32[16]{0}) sort(%[[X]], %y), dimensions={0}, to_apply=%cmp.clone
// CHECK:      ROOT %{{.*}} = (bf16[16]{0}, f32[16]{0}) tuple(
"""


def test_a_sort_mixing_bf16_and_f32_sorts_in_f32_per_output():
    module = check_pass("float-normalization-bf16", SORT_MIXED)
    check_16bit_numerics(SORT_MIXED, module)
