"""AlgebraicSimplifier: a max (min) reduce beside an arg-max (arg-min) reduce of the same operand
reads the variadic reduce's value output (XLA's HandleReduce with MatchArgMax / MatchArgMin), so
`jnp.max(x, -1), jnp.argmax(x, -1)` is one reduction; and the matchers themselves."""

import pytest
from algsimp_cases import Case, parametrize

from hlo_common.hlo.parser import parse_module
from hlo_opt.passes.algsimp.arg_min_max import (
    is_scalar_constant_inf, is_scalar_constant_neg_inf, match_arg_max, match_arg_min,
)


def arg_reducer(name: str, direction: str, value_init: str = "") -> str:
    """The reducer jnp.argmax (GT) / jnp.argmin (LT) lowers to (jax 0.10.2's text, renamed)."""
    return f"""
{name} {{
  v0 = f32[] parameter(0)
  v1 = f32[] parameter(2)
  better = pred[] compare(v0, v1), direction={direction}
  nan = pred[] compare(v0, v0), direction=NE
  pick = pred[] or(better, nan)
  v = f32[] select(pick, v0, v1)
  eq = pred[] compare(v0, v1), direction=EQ
  i0 = s32[] parameter(1)
  i1 = s32[] parameter(3)
  lt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lt)
  pick_i = pred[] or(pick, tie)
  i = s32[] select(pick_i, i0, i1)
  ROOT t = (f32[], s32[]) tuple(v, i)
}}
"""


def scalar_reducer(name: str, op: str) -> str:
    return f"""
{name} {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] {op}(a, b)
}}
"""


COMPS = (arg_reducer("argmax", "GT") + arg_reducer("argmin", "LT")
         + scalar_reducer("max", "maximum") + scalar_reducer("min", "minimum"))


def module(body: str) -> str:
    lines = "\n".join("  " + line.strip() for line in body.strip().splitlines())
    return COMPS + "\nENTRY e {\n" + lines + "\n}\n"


def both(kind: str, value_init: str, arg_dims: str = "1", iota_dim: int = 1, arg_init: str = "") -> str:
    """x reduced by `kind` (max/min) from `value_init` and by arg-`kind` over dimensions={1}."""
    arg_init = arg_init or value_init
    return module(f"""
        x = f32[6,5] parameter(0)
        iota = s32[6,5] iota(), iota_dimension={iota_dim}
        vi = f32[] constant({value_init})
        ai = f32[] constant({arg_init})
        zero = s32[] constant(0)
        plain = f32[6] reduce(x, vi), dimensions={{1}}, to_apply={kind}
        arg = (f32[6], s32[6]) reduce(x, iota, ai, zero), dimensions={{{arg_dims}}}, to_apply=arg{kind}
        idx = s32[6] get-tuple-element(arg), index=1
        ROOT r = (f32[6], s32[6]) tuple(plain, idx)""")


CASES = [
    Case("reduce_max_from_arg_max", both("max", "-inf"),
         """CHECK: %arg = (f32[6]{0}, s32[6]{0}) reduce(%x, %iota, %ai, %zero), dimensions={1}
            CHECK: %[[V:.*]] = f32[6]{0} get-tuple-element(%arg), index=0
            CHECK-NOT: to_apply=%max
            CHECK: ROOT %r = (f32[6]{0}, s32[6]{0}) tuple(%[[V]], %idx)""",
         # a max from 0 is not the arg-max's value (the arg-max starts from -inf)
         negative=both("max", "0", arg_init="-inf")),
    Case("reduce_min_from_arg_min", both("min", "inf"),
         """CHECK: %[[V:.*]] = f32[6]{0} get-tuple-element(%arg), index=0
            CHECK-NOT: to_apply=%min
            CHECK: ROOT %r = (f32[6]{0}, s32[6]{0}) tuple(%[[V]], %idx)""",
         # the min reduces another array than the arg-min
         negative=both("min", "inf").replace("plain = f32[6] reduce(x,", "plain = f32[6] reduce(y,").replace(
             "x = f32[6,5] parameter(0)", "x = f32[6,5] parameter(0)\n  y = f32[6,5] parameter(1)")),
]


@parametrize(CASES)
def test_rewrite_applies(case: Case) -> None:
    case.check_applies()


@parametrize(CASES)
def test_rewrite_declines(case: Case) -> None:
    case.check_declines()


def _arg_reduce(text: str):
    return parse_module(text, "<t>").entry.instruction("arg")


@pytest.mark.parametrize("change", [
    ("dimensions={1}, to_apply=argmax", "dimensions={0}, to_apply=argmax"),  # other dims: no rewrite
])
def test_max_beside_an_arg_max_over_other_dimensions_stays(change) -> None:
    from pass_testlib import check_unchanged

    text = both("max", "-inf").replace("f32[6], s32[6]) reduce", "f32[5], s32[5]) reduce")
    text = text.replace(*change).replace("idx = s32[6]", "idx = s32[5]").replace(
        "(f32[6], s32[6]) tuple", "(f32[6], s32[5]) tuple")
    check_unchanged("algsimp", "HloModule m\n" + text)


def test_match_arg_max_and_min_tell_the_reducers_apart() -> None:
    assert match_arg_max(_arg_reduce(both("max", "-inf")))
    assert not match_arg_min(_arg_reduce(both("max", "-inf")))
    assert match_arg_min(_arg_reduce(both("min", "inf")))
    assert not match_arg_max(_arg_reduce(both("min", "-inf")))  # an arg-min reducer from -inf
    # the index init must be 0 and the second operand an iota
    assert not match_arg_max(_arg_reduce(both("max", "-inf").replace("s32[] constant(0)", "s32[] constant(1)")))
    no_iota = both("max", "-inf").replace("iota = s32[6,5] iota(), iota_dimension=1",
                                          "c = s32[] constant(2)\n  iota = s32[6,5] broadcast(c), dimensions={}")
    assert not match_arg_max(_arg_reduce(no_iota))


def test_reducer_without_the_nan_test_is_not_an_arg_max() -> None:
    text = both("max", "-inf").replace("pick = pred[] or(better, nan)", "pick = pred[] or(better, better)")
    assert not match_arg_max(_arg_reduce(text))


@pytest.mark.parametrize("etype,value,neg_inf,inf", [
    ("f32", "-inf", True, False), ("f32", "inf", False, True), ("bf16", "-inf", True, False),
    ("f32", "-3.4e+38", False, False), ("s32", "-2147483648", True, False),
    ("s32", "2147483647", False, True), ("u8", "0", True, False), ("f8e4m3fn", "-448", True, False),
])
def test_scalar_extremes(etype, value, neg_inf, inf) -> None:
    m = parse_module(f"HloModule m\nENTRY e {{\n  ROOT c = {etype}[] constant({value})\n}}\n", "<t>")
    c = m.entry.root
    assert (is_scalar_constant_neg_inf(c), is_scalar_constant_inf(c)) == (neg_inf, inf)
