"""Literals: reading every literal form, and printing them exactly as XLA does.

Two kinds of expectations: values written by hand (bit patterns from IEEE-754, counts from the
shape), and XLA itself: jaxlib's HLO parser and printer reads the same constants and its text
must equal ours, character for character.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from hlo_common.errors import HloParseError
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module


def _constant(shape: str, literal: str):
    m = parse_module(f"ENTRY e {{ ROOT c = {shape} constant({literal}) }}")
    return m.entry.root, m


def _value(shape: str, literal: str):
    return _constant(shape, literal)[0].literal


# -- reading --------------------------------------------------------------------------------------
def test_scalars():
    assert _value("f32[]", "1.5") == np.float32(1.5)
    assert _value("f64[]", "-2.5e-3") == -0.0025
    assert _value("s32[]", "-7") == -7 and _value("s32[]", "-7").dtype == np.int32
    assert _value("u64[]", "18446744073709551615") == np.uint64(2**64 - 1)
    assert _value("pred[]", "true") and not _value("pred[]", "false")
    assert _value("f32[]", "-inf") == -np.inf
    assert _value("c64[]", "(1, -2.5)") == np.complex64(1 - 2.5j)
    assert _value("bf16[]", "0.1").dtype == ml_dtypes.bfloat16


def test_negative_zero_follows_xla_reading_and_prints_exactly():
    assert not np.signbit(_value("f32[]", "-0"))  # an integer token: XLA reads the integer 0
    assert np.signbit(_value("f32[]", "-0.0"))
    c, m = _constant("f32[2]", "{-0.0, 0}")
    assert "constant({-0.0, 0})" in print_module(m)


def test_nan_sign_and_payload_bits():
    bits = lambda s: int(np.asarray(_value("f32[]", s)).view(np.uint32))  # noqa: E731
    assert bits("nan") == 0x7FC00000
    assert bits("-nan") == 0xFFC00000
    assert bits("nan(0x1)") == 0x7F800001
    assert bits("-nan(0x400001)") == 0xFFC00001
    assert int(np.asarray(_value("bf16[]", "nan(0x3)")).view(np.uint16)) == 0x7F83
    with pytest.raises(HloParseError, match="NaN payload 0x800000 does not fit f32"):
        _value("f32[]", "nan(0x800000)")


def test_nested_arrays_in_row_major_order():
    v = _value("s32[2,3]", "{ {1, 2, 3}, {4, 5, 6} }")
    assert v.shape == (2, 3) and v.tolist() == [[1, 2, 3], [4, 5, 6]]
    v = _value("f32[2,1,2]", "{{{1,2}},{{3,4}}}")
    assert v.tolist() == [[[1, 2]], [[3, 4]]]
    assert _value("pred[3]", "{1, 0, true}").tolist() == [True, False, True]
    assert _value("f32[0,4]", "{}").shape == (0, 4)
    assert _value("f32[3,0]", "{ {}, {}, {} }").shape == (3, 0)


def test_tuple_literals():
    v = _value("(f32[], (s32[2], pred[]))", "(1.5, ({1, 2}, true))")
    assert float(v[0]) == 1.5 and v[1][0].tolist() == [1, 2] and bool(v[1][1])


def test_dots_constant_is_deterministic_filler_with_a_warning():
    c, m = _constant("f32[3,4]", "{...}")
    assert c.literal_unknown and c.literal.shape == (3, 4)
    assert any("{...}" in w and "'c'" in w for w in m.warnings)
    again = _value("f32[3,4]", "{...}")
    assert np.array_equal(c.literal, again)  # same name, same values
    assert "constant({...})" in print_module(m)


def test_scalar_for_array_sets_element_zero_like_xla():
    # hlo_parser.cc (ParseDenseLiteral): the value lands at linear index 0; the rest stays zero.
    v = _value("f32[4]", "5")
    assert v.tolist() == [5, 0, 0, 0]
    _c, m = _constant("f32[4]", "5")
    assert any("sets element 0 only" in w for w in m.warnings)


def test_huge_zero_splat_is_a_view_and_prints_short():
    import tracemalloc

    tracemalloc.start()
    try:
        c, m = _constant("f32[10000,10000]", "0")
        printed = print_module(m)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert c.literal.shape == (10000, 10000) and c.literal.strides == (0, 0)
    assert not c.literal.flags.writeable
    assert "ROOT %c = f32[10000,10000]{1,0} constant(0)" in printed
    assert peak < 50 << 20, f"parse+print of the 10^8-element splat allocated {peak >> 20} MiB"
    assert not m.warnings


@pytest.mark.parametrize("shape, literal, message", [
    ("s32[]", "1.5", "expects an integer for primitive type s32, found '1.5'"),
    ("u8[]", "-1", "value -1 is out of range for literal's primitive type u8"),
    ("pred[]", "2", "value 2 is out of range for literal's primitive type pred"),
    ("f16[]", "70000", "value 70000 is out of range for literal's primitive type f16"),
    ("f32[2,2]", "{ {1, 2}, {3} }", "expects 2 elements in dimension 1, but sees 1"),
    ("f32[2]", "{ {1, 2} }", "expects a nested array of rank 1, but sees a deeper one"),
    ("f32[]", "{5}", "expected a literal value"),
    ("f32[2]", "{(1, 2), 3}", "unexpected '(' in a literal"),
    ("c64[2]", "{1, 2}", "expected a complex value '(re, im)', found '1'"),
    ("c64[4]", "0", "expected a complex value '(re, im)', found '0'"),
    ("f32[2]", "{1, 2", "unexpected ')' in a literal"),
    ("f32[2,2]", "{ {...}, {1, 2} }", "expects '...' at nesting level 1"),
    ("s32[]", "0x10", "expects an integer for primitive type s32, found '0x10'"),
    ("f64[]", "1e999", "constant 1e999 is out of range for double"),
])
def test_literal_errors(shape, literal, message):
    with pytest.raises(HloParseError, match=re.escape(message)):
        _value(shape, literal)


# -- printing, checked against XLA ------------------------------------------------------------------
_CASES = [
    ("f32[]", "0.1"), ("f32[]", "1e-7"), ("f32[]", "3.14159274"), ("f32[]", "55906239034112"),
    ("f32[]", "-0.0"), ("f32[]", "1e+30"), ("f32[]", "100000"), ("f32[]", "1000000"), ("f32[]", "-nan"),
    ("f32[]", "nan(0x1)"), ("f32[]", "inf"), ("f32[]", "1.17549435e-38"), ("f32[]", "1.4e-45"),
    ("f64[]", "0.1"), ("f64[]", "3.141592653589793"), ("f64[]", "1e300"), ("f16[]", "0.333333"),
    ("f16[]", "65504"), ("bf16[]", "0.1"), ("bf16[]", "3.14159"), ("bf16[]", "-inf"),
    ("f8e4m3fn[]", "0.3"), ("f8e5m2[]", "-1.75"), ("s8[]", "-128"), ("u64[]", "18446744073709551615"),
    ("pred[]", "true"), ("pred[4]", "{1, 0, 0, 1}"), ("s32[2,3]", "{ {1, 2, 3}, {4, 5, 6} }"),
    ("f32[2,1]", "{ {1}, {2} }"), ("f32[1,1,2,2]", "{{{{1,2},{3,4}}}}"),
    ("f32[2,1,1,2]", "{{{{1,2}}},{{{3,4}}}}"), ("c64[2]", "{(1, 2), (0.5, -inf)}"),
    ("c128[]", "(0.1, 1e-300)"), ("f32[3,0]", "{ {}, {}, {} }"), ("f32[7]", "{1.5, 2.25, -3, 0, 1e-5, 7, 8}"),
    ("f32[4]", "5"), ("bf16[3]", "{0.1, 0.2, 0.3}"), ("f16[2]", "{1.1, -2.2}"),
]


def _xla_constants(text: str) -> dict[str, str]:
    pytest.importorskip("jax", reason="jaxlib is needed to run XLA's parser and printer")
    from jax._src.lib import xla_client as xc

    opts = xc.hlo.HloPrintOptions()
    opts.print_large_constants = True
    out = xc.hlo.hlo_module_from_text(text).to_string(opts)
    return dict(re.findall(r"%(c\d+) = \S+ constant\((.*)\)", out))


def test_constants_print_like_xla():
    body = "\n".join(f"  c{i} = {shape} constant({lit})" for i, (shape, lit) in enumerate(_CASES))
    text = f"HloModule m\nENTRY e {{\n{body}\n  ROOT r = () tuple()\n}}"
    expected = _xla_constants(text)
    ours = dict(re.findall(r"%(c\d+) = \S+ constant\((.*)\)", print_module(parse_module(text))))
    expected["c4"] = "-0.0"  # XLA prints "-0", which its own parser reads as +0; ours reads back exactly
    mismatches = {f"{_CASES[int(k[1:])]}": (ours[k], v) for k, v in expected.items() if ours.get(k) != v}
    assert not mismatches, f"(ours, XLA's) differ: {mismatches}"
