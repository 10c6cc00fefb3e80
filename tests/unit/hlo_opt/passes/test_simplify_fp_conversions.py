"""SimplifyFPConversions ("simplify-fp-conversions"): chains of floating-point converts become one
convert or none (XLA's simplify_fp_conversions_test.cc cases), single converts and chains through
integers stay, and after float-normalization-bf16 the f32 -> bf16 -> f32 round trips between two
f32 ops disappear, leaving f32 intermediates whose results stay within the 16-bit bound."""

import numpy as np

from hlo_common.hlo.parser import parse_module
from pass_testlib import _leaves, check_pass, check_unchanged, evaluate_or_skip, random_arguments, run_pass


def test_a_round_trip_is_removed():
    check_pass("simplify-fp-conversions", """
HloModule m
ENTRY e {
  x = f32[8] parameter(0)
  a = bf16[8] convert(x)
  b = f32[8] convert(a)
  ROOT n = f32[8] negate(b)
}
// CHECK:      ENTRY %e
// CHECK-NEXT:   %x = f32[8]{0} parameter(0)
// CHECK-NEXT:   ROOT %n = f32[8]{0} negate(%x)
// CHECK-NEXT: }
""")


def test_a_longer_chain_becomes_one_convert_even_from_an_integer():
    check_pass("simplify-fp-conversions", """
HloModule m
ENTRY e {
  x = f32[8] parameter(0)
  a = bf16[8] convert(x)
  b = f32[8] convert(a)
  ROOT c = f16[8] convert(b)
}
// CHECK:      %x = f32[8]{0} parameter(0)
// CHECK-NEXT: ROOT %{{.*}} = f16[8]{0} convert(%x)
// CHECK-NEXT: }
""")
    check_pass("simplify-fp-conversions", """
HloModule m
ENTRY e {
  i = s32[8] parameter(0)
  a = bf16[8] convert(i)
  ROOT b = f32[8] convert(a)
}
// CHECK:      ROOT %{{.*}} = f32[8]{0} convert(%i)
""")


def test_single_converts_and_chains_through_integers_are_unchanged():
    check_unchanged("simplify-fp-conversions", """
HloModule m
ENTRY e {
  x = f32[8] parameter(0)
  a = bf16[8] convert(x)
  i = s32[8] convert(a)
  b = f32[8] convert(i)
  ROOT t = (bf16[8], f32[8]) tuple(a, b)
}
""")


LAYER = """
HloModule m
ENTRY e {
  x = bf16[4,16] parameter(0)
  y = bf16[4,16] parameter(1)
  t = bf16[4,16] tanh(x)
  s = bf16[4,16] sqrt(y)
  c = f32[4,16] convert(s)
  d = bf16[4,16] convert(c)
  q = bf16[4,16] divide(t, d)
  r = bf16[4,16] rsqrt(q)
  w = f32[4,16] parameter(2)
  wb = bf16[4,16] convert(w)
  wf = f32[4,16] convert(wb)
  m = f32[4,16] multiply(wf, wf)
  ROOT o = (bf16[4,16], f32[4,16]) tuple(r, m)
}
"""


def test_after_float_normalization_f32_flows_between_f32_ops():
    # float-normalization-bf16 already reads f32 producers directly (the c/d round trip goes there);
    # the explicit w -> bf16 -> f32 round trip is this pass's.
    module, _ = run_pass("float-normalization-bf16", LAYER)
    changed = check_pass("simplify-fp-conversions", _print(module))
    text = _print(changed)
    assert text.count("bf16[4,16]{1,0} convert") == 1 and "bf16[4,16]{1,0} convert(%r)" in text, text
    assert "multiply(%w, %w)" in text, text
    before = parse_module(LAYER)
    args = random_arguments(before)
    args = [np.abs(a) + np.asarray(0.5, a.dtype) for a in args]  # sqrt, divide, rsqrt of positives
    for e, g in zip(_leaves(evaluate_or_skip(before, args)), _leaves(evaluate_or_skip(changed, args))):
        err = np.abs(g.astype(np.float64) - e.astype(np.float64))
        assert not ((err > 2e-2) & (err > 2e-2 * np.abs(e.astype(np.float64)))).any()


def _print(module) -> str:
    from hlo_common.hlo.printer import print_module

    return print_module(module)
