"""Interpreter handlers for random numbers: rng, rng-get-and-update-state, rng-bit-generator.

`rng` draws from the evaluator's seeded generator (deterministic per evaluator, not XLA's stream).
"""

from __future__ import annotations

import numpy as np

from hlo_common.interpreter.arith import down, up
from hlo_common.interpreter.registry import register


@register("rng")
def _rng(instr, operands, ev):
    et = instr.shape.element_type
    dist = str(instr.attrs.get("distribution", "rng_uniform"))
    a, b = operands[0], operands[1]
    gen = ev.rng()
    dims = instr.shape.dims
    if dist == "rng_normal":
        if not et.is_float:
            raise ValueError("rng_normal needs a floating-point type")
        mean, std = float(up(a)), float(up(b))
        return down(gen.normal(mean, std, size=dims), et)
    if et.is_float:
        lo, hi = float(up(a)), float(up(b))
        vals = down(gen.uniform(lo, hi, size=dims), et)
        # Rounding can reach `hi`; keep the interval half-open as XLA does.
        return np.where(up(vals) >= hi, np.asarray(a), vals).astype(et.np_dtype)
    if et.is_pred:
        return gen.integers(0, 2, size=dims).astype(bool)
    lo, hi = int(a), int(b)
    return gen.integers(lo, max(hi, lo + 1), size=dims).astype(et.np_dtype)


@register("rng-get-and-update-state")
def _rng_get_and_update_state(instr, operands, ev):
    """The current 128-bit state as u64[2] (XLA's shape), then advance it by `delta`."""
    state = ev.rng_state
    ev.rng_state = (state + int(instr.attrs.get("delta", 0))) & ((1 << 128) - 1)
    lo, hi = state & ((1 << 64) - 1), state >> 64
    return np.array([lo, hi], dtype=instr.shape.element_type.np_dtype)
