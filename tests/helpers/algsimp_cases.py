"""Test tables for the AlgebraicSimplifier: one `Case` per rewrite, named after the rewrite function.

    Case("add_zero",
         '''p = f32[4] parameter(0)
            z = f32[] constant(0)
            b = f32[4] broadcast(z), dimensions={}
            ROOT a = f32[4] add(p, b)''',
         "CHECK: ROOT %p = f32[4]{0} parameter(0)",
         negative='''...''')

The body is an entry computation (wrapped in `HloModule m / ENTRY e {...}` unless it already has
an `ENTRY`). `check_applies` runs one sweep of algsimp with the verifier after it, matches the CHECK
lines (FileCheck), and compares the entry's results before and after on the same seeded inputs with
the reference interpreter (floats within `rtol`: f32 1e-4, f16 1e-3, bf16 2e-2; everything else
exact). `check_declines` asserts the negative body comes back unchanged, byte for byte.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from pass_testlib import check_pass, check_unchanged, random_arguments

from hlo_common.hlo.parser import parse_module

RTOL = {"f32": 1e-4, "f64": 1e-10, "f16": 1e-3, "bf16": 2e-2, "c64": 1e-4}


def module_text(body: str) -> str:
    body = textwrap.dedent(body).strip("\n")
    if "ENTRY" in body:
        return "HloModule m\n" + body + "\n"
    return "HloModule m\nENTRY e {\n" + textwrap.indent(body, "  ") + "\n}\n"


@dataclass
class Case:
    name: str  # the rewrite function this case exercises
    body: str
    checks: str
    negative: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    negative_options: dict[str, Any] | None = None  # default: `options`
    numeric: bool = True  # False only where the interpreter cannot tell (e.g. bitcasts of padding)

    @property
    def text(self) -> str:
        checks = "\n".join("// " + line.strip().removeprefix("//").strip()
                           for line in textwrap.dedent(self.checks).strip().splitlines())
        return module_text(self.body) + checks + "\n"

    def check_applies(self) -> None:
        after = check_pass("algsimp", self.text, **self.options)
        if self.numeric:
            assert_same_results(self.text, after)

    def check_declines(self) -> None:
        if self.negative is None:
            pytest.fail(f"case {self.name} has no negative module")
        options = self.options if self.negative_options is None else self.negative_options
        check_unchanged("algsimp", module_text(self.negative), **options)


def _leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def assert_same_results(before_text: str, after, seed: int = 0) -> None:
    """The entry computes the same values before and after (interpreter, same seeded inputs)."""
    from hlo_common.interpreter import evaluate

    before = parse_module(before_text, "<before>")
    args = random_arguments(before, seed)
    expected = _leaves(evaluate(before, args))
    got = _leaves(evaluate(after, args))
    assert len(expected) == len(got)
    for e, g, shape in zip(expected, got, before.entry.root.shape.leaf_shapes()):
        et = shape[1].element_type
        assert e.shape == g.shape and e.dtype == g.dtype, (e.shape, g.shape, e.dtype, g.dtype)
        if et.is_float or et.is_complex:
            rtol = RTOL.get(et.name, 1e-4)
            np.testing.assert_allclose(g.astype(np.complex128 if et.is_complex else np.float64),
                                       e.astype(np.complex128 if et.is_complex else np.float64),
                                       rtol=rtol, atol=rtol * 1e-2, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, e)


def parametrize(cases: list[Case]):
    return pytest.mark.parametrize("case", cases, ids=[c.name for c in cases])
