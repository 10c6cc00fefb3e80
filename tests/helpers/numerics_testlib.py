"""Numeric checks for pass tests: the module after a pass computes what it computed before.

`check_same_results(before_text, after)` evaluates both with the reference interpreter on the same
seeded inputs and compares every output leaf with a tolerance set by its element type: f32/f64
1e-4, bf16/f16 2e-2, f8 and narrower 0.25 (relative, with a matching absolute floor; NaNs must
match NaNs), integers and pred exactly. A
module the interpreter cannot run is a test failure here, not a skip: these passes only rewrite
modules whose every op the interpreter evaluates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hlo_common.interpreter import evaluate
from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.parser import parse_module
from pass_testlib import random_arguments

_TOLERANCE = {"f64": 1e-4, "f32": 1e-4, "bf16": 2e-2, "f16": 2e-2, "c64": 1e-4, "c128": 1e-4}
_NARROW_FLOAT_TOLERANCE = 0.25  # f8/f6/f4 types: a few mantissa bits


def _leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def assert_close(got: np.ndarray, want: np.ndarray, type_name: str, where: str = "") -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, f"{where}: {got.dtype}{got.shape} vs " \
        f"{want.dtype}{want.shape}"
    tol = _TOLERANCE.get(type_name)
    if tol is None and type_name.startswith("f"):
        tol = _NARROW_FLOAT_TOLERANCE
    if tol is None:
        np.testing.assert_array_equal(got, want, err_msg=where)
    else:
        wide = np.complex128 if type_name.startswith("c") else np.float64
        np.testing.assert_allclose(got.astype(wide), want.astype(wide), rtol=tol, atol=tol,
                                   equal_nan=True, err_msg=where)


def check_same_results(before: str | HloModule, after: HloModule, seed: int = 0,
                       args: list[np.ndarray] | None = None) -> None:
    """`after` gives `before`'s results on seeded random inputs (or `args`)."""
    before_module = parse_module(before, "<before>") if isinstance(before, str) else before
    args = random_arguments(before_module, seed) if args is None else args
    want = _leaves(evaluate(before_module, args))
    got = _leaves(evaluate(after, args))
    assert len(want) == len(got)
    leaf_types = [s.element_type.name for _, s in before_module.entry.root.shape.leaf_shapes()]
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, leaf_types[k], f"output leaf {k}")
