"""hlo-run's interpreter platform runs a program on one evaluator, restarted before each run
(`--iterations` makes its evaluation plans once): every run must still be independent, equal to a
fresh evaluator's (a changed while limit: test_run_limits.py)."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.interpreter import evaluator as evaluator_module
from hlo_common.interpreter.evaluator import Evaluator
from hlo_run.backends import Program
from hlo_run.backends.interpreter import InterpreterBackend

RANDOM = """HloModule random

ENTRY e {
  x = f32[64,128] parameter(0)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[64,128] rng(lo, hi), distribution=rng_uniform
  m = f32[64,128] multiply(x, r)
  e = f32[64,128] exponential(m)
  ROOT s = f32[64,128] add(e, x)
}
"""


def test_repeated_runs_are_independent_and_share_one_evaluator(monkeypatch: pytest.MonkeyPatch):
    made = []
    original = Evaluator.__init__

    def counting(self, *args, **kwargs):
        made.append(self)
        original(self, *args, **kwargs)

    x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    fresh = Evaluator().evaluate(parse_module(RANDOM), [x])
    monkeypatch.setattr(evaluator_module.Evaluator, "__init__", counting)
    executable = InterpreterBackend().load(Program(name="random.hlo", module=parse_module(RANDOM)))
    executable.max_while_iterations = None
    runs = [np.asarray(executable.run([x])) for _ in range(3)]
    for result in runs:  # the rng starts over: each run is the fresh evaluator's, bit for bit
        assert result.tobytes() == np.asarray(fresh).tobytes()
    assert len(made) == 1

