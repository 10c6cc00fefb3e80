"""Helpers for pass tests: HLO text in, FileCheck patterns out, plus numbers from the interpreter.

    module = check_pass("dce", '''
    HloModule m
    ENTRY e {
      p = f32[4] parameter(0)
      a = f32[4] add(p, p)
      ROOT n = f32[4] negate(p)
    }
    // CHECK:     ENTRY
    // CHECK-NOT: add
    ''')

`check_pass` parses the text (check lines are comments to the parser), verifies it, runs the pass
in a pipeline that verifies after it, asserts whether it changed the module, prints the result,
round-trips it through the parser and matches the check lines. `check_numerics` runs the entry
computation before and after on the same seeded inputs with the reference interpreter (skipping,
with the reason, where the interpreter cannot run the module yet).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from filecheck_util import check_text  # noqa: E402
from hlo_common.hlo.ir import HloModule  # noqa: E402
from hlo_common.hlo.parser import parse_module  # noqa: E402
from hlo_common.hlo.printer import print_module  # noqa: E402
from hlo_common.hlo_pass.pass_base import PASS_REGISTRY, HloPass  # noqa: E402
from hlo_opt.passes import load_all_passes  # noqa: E402
from hlo_common.hlo_pass.pipeline import HloPassPipeline, RunOptions, verify  # noqa: E402


def make_pass(name_or_pass: str | HloPass, **options: Any) -> HloPass:
    if isinstance(name_or_pass, HloPass):
        return name_or_pass
    load_all_passes()
    return PASS_REGISTRY[name_or_pass](**options)


def run_pass(name_or_pass: str | HloPass, text: str, **options: Any) -> tuple[HloModule, bool]:
    """Parse + verify `text`, run the pass with the verifier after it; (module, changed)."""
    module = parse_module(text, "<test>")
    verify(module, "test input fails verification")
    p = make_pass(name_or_pass, **options)
    changed = HloPassPipeline("test", [p]).run_with(module, RunOptions(verify_each=True))
    return module, changed


def check_pass(name_or_pass: str | HloPass, text: str, changed: bool = True, **options: Any) -> HloModule:
    module, did_change = run_pass(name_or_pass, text, **options)
    out = print_module(module)
    assert did_change is changed, f"pass reported changed={did_change}, expected {changed}\n{out}"
    assert print_module(parse_module(out, "<reparse>")) == out, "output does not round-trip"
    if "CHECK" in text:
        check_text(out, text)
    return module


def check_unchanged(name_or_pass: str | HloPass, text: str, **options: Any) -> None:
    """The pass must report no change and leave the printed module byte-identical."""
    before = print_module(parse_module(text, "<test>"))
    module = check_pass(name_or_pass, text, changed=False, **options)
    assert print_module(module) == before


def random_arguments(module: HloModule, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = []
    for param in module.entry.parameters:
        shape = param.shape
        et = shape.element_type
        if et.is_pred:
            arr = rng.integers(0, 2, size=shape.dims).astype(bool)
        elif et.is_integer:
            arr = rng.integers(-5 if et.is_signed else 0, 6, size=shape.dims).astype(et.np_dtype)
        else:
            arr = rng.uniform(-2.0, 2.0, size=shape.dims).astype(et.np_dtype)
        args.append(arr)
    return args


def _leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def evaluate_or_skip(module: HloModule, args: list[np.ndarray]) -> Any:
    try:
        from hlo_common.interpreter import evaluate
    except ImportError as exc:
        pytest.skip(f"reference interpreter not available: {exc}")
    from hlo_common.errors import InterpreterError

    try:
        return evaluate(module, args)
    except InterpreterError as exc:
        pytest.skip(f"interpreter cannot run this module yet: {exc}")


def check_numerics(before_text: str, after: HloModule, seed: int = 0, rtol: float = 1e-5) -> None:
    """The optimized module computes what the input computed (same seeded inputs, interpreter)."""
    before = parse_module(before_text, "<before>")
    args = random_arguments(before, seed)
    expected = _leaves(evaluate_or_skip(before, args))
    got = _leaves(evaluate_or_skip(after, args))
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        assert e.shape == g.shape and e.dtype == g.dtype
        wide = np.complex128 if np.iscomplexobj(e) else np.float64  # bf16/f8 have no numpy ufuncs
        np.testing.assert_allclose(g.astype(wide), e.astype(wide), rtol=rtol, atol=1e-6)
