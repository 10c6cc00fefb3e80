"""Corpus tier `interpreter`: the reference interpreter against real XLA:CPU (through jax).

For every *runnable* corpus module, make arguments with hlo-run's documented rule
(`hlo_run.inputs`, seed 0), run the module on the interpreter and on XLA:CPU and compare the
results with run_hlo_module's rule (an element fails only when it exceeds both the absolute and
the relative bound): f32/f64/c64/c128 1e-4, bf16/f16/f8 and narrower floats 2e-2, integers and
pred exactly.

Runnable means:
- our parser reads it (the `parse` tier covers the rest);
- its entry takes no tuple or token parameters (XLA:CPU cannot) and returns no dynamic shape
  (whose padding holds unspecified values);
- no array holds more than 2**26 elements (a CI machine could not hold both runs);
- no op makes implementation-defined random numbers (`rng`, `rng-get-and-update-state`,
  `rng-bit-generator` with the default algorithm);
- XLA:CPU compiles it, with excess precision off (so bf16/f16 values are rounded after every
  op, as the interpreter does), fusions given to it as calls (it runs only fusions it formed
  itself) and `{...}` constants with the values our parser chose (`hlo_run.xla_cpu.rewritten_text`).

Modules that are not runnable are skipped with the reason, never failed. A runnable module that
errors in the interpreter or does not match must be listed under `interpreter` in
`tests/corpus/expected_failures.txt` with the reason; a listed module that starts matching fails,
so the list stays true. Regenerate the list with
`tests/corpus/update_expected_failures.py --tier interpreter`.

`interpreter_notes.txt` (written by the same script) records what only a measurement shows:
`slow` modules (the check took seconds; with modules whose largest array is big they are marked
`slow` and run only with `-m slow` / `make test-all`) and `xla-crash` modules, on which XLA:CPU
aborts the process or hangs while compiling (not runnable; a crash cannot be caught in-process).
XLA:CPU compiles with `xla_backend_optimization_level=0` (the same HLO pipeline and numerics,
less time in LLVM) and single-threaded Eigen (the summation order of its dots and convolutions
does not depend on the machine's core count).
"""

from __future__ import annotations

import functools
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from corpus_lib import (
    corpus_available, corpus_modules, expected_failures, largest_array_elements, require_corpus,
)

TIER = "interpreter"
SEED = 0
NOTES = Path(__file__).with_name("interpreter_notes.txt")
# A module whose largest array holds more elements than this is slow (static, cheap to decide);
# one beyond TOO_LARGE_ELEMENTS (256 MiB of f32) is not run at all: a CI machine cannot hold it twice.
SLOW_ELEMENTS = 1 << 22
TOO_LARGE_ELEMENTS = 1 << 26
# A guard, not a budget: a module that runs longer than this on the interpreter fails clearly
# instead of stalling the suite (slow-marked modules get the longer limit).
TIME_LIMIT_S = 30
SLOW_TIME_LIMIT_S = 90

XLA_DEBUG_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_multi_thread_eigen": False}

F32_BOUND = 1e-4
LOW_PRECISION_BOUND = 2e-2

_OUTCOMES_ERROR = {"error", "mismatch"}


@dataclass
class Outcome:
    """What happened to one module: `kind` is unparsed | not-runnable | error | mismatch | match."""

    kind: str
    reason: str = ""
    seconds: float = 0.0


class InterpreterTimeout(BaseException):
    """Raised by the alarm; a BaseException so that the evaluator's handler wrapping lets it through."""


# -- what to run ---------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def notes(kind: str) -> dict[str, str]:
    """module id -> note text, for one kind (`slow`, `xla-crash`) of interpreter_notes.txt."""
    out = {}
    if NOTES.exists():
        for line in NOTES.read_text().splitlines():
            # a comment starts at a `#` after whitespace: module ids hold `#k` themselves
            parts = re.split(r"\s#", line, maxsplit=1)[0].split(None, 2) if not line.startswith("#") else []
            if len(parts) >= 2 and parts[0] == kind:
                out[parts[1]] = parts[2] if len(parts) > 2 else ""
    return out


def is_slow(module_id: str, text: str) -> bool:
    return module_id in notes("slow") or largest_array_elements(text) > SLOW_ELEMENTS


def implementation_defined_random(module) -> str | None:
    """The first instruction whose values XLA leaves to the backend (rng, rng state, default bits)."""
    for comp in module.computations:
        for instr in comp.instructions:
            op = instr.opcode
            algorithm = str(instr.attrs.get("algorithm", "rng_default"))
            default_bits = op == "rng-bit-generator" and algorithm == "rng_default"
            if op in ("rng", "rng-get-and-update-state") or default_bits:
                return f"%{instr.name} ({op})"
    return None


def bounds_for(dtype: np.dtype) -> tuple[float, float]:
    from hlo_common.hlo.dtypes import from_numpy_dtype

    t = from_numpy_dtype(dtype)
    if (t.is_float or t.is_complex) and t.bits >= 32:
        return F32_BOUND, F32_BOUND
    if t.is_float:
        return LOW_PRECISION_BOUND, LOW_PRECISION_BOUND
    return 0.0, 0.0


# -- one module ----------------------------------------------------------------------------------------

def check_module(module_id: str, text: str, time_limit_s: float = TIME_LIMIT_S, on_phase=None) -> Outcome:
    """Parse, compile on XLA:CPU, run both, compare: the whole check for one module.

    `on_phase("xla")` / `on_phase("interpreter")` is called as each part starts (the maintenance
    script uses it to tell an XLA crash from an interpreter one).
    """
    from hlo_common.errors import HloError
    from hlo_common.hlo.parser import parse_module
    from hlo_run.devices import device_counts
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.xla_cpu import XlaCpuExecutable, XlaCpuRejected, text_for_xla_cpu

    largest = largest_array_elements(text)
    if largest > TOO_LARGE_ELEMENTS:
        return Outcome("not-runnable", f"too large to run here: an array of {largest} elements")
    try:
        module = parse_module(text, module_id)
    except HloError as exc:
        return Outcome("unparsed", exc.one_line())
    for p in module.entry.parameters:
        if p.shape.is_tuple or p.shape.is_token:
            return Outcome("not-runnable", f"entry parameter {p.parameter_number} is a tuple or token")
    if any(leaf.is_dynamic for _, leaf in module.entry.root.shape.leaf_shapes()):
        return Outcome("not-runnable", "dynamic-shaped result: values past the dynamic size are unspecified")
    random_op = implementation_defined_random(module)
    if random_op is not None:
        return Outcome("not-runnable", f"{random_op}: its random numbers are implementation-defined")
    if on_phase is not None:
        on_phase("xla")
    try:
        replicas, partitions = device_counts(module, None, None)
    except HloError as exc:
        return Outcome("not-runnable", exc.one_line())
    try:
        if replicas * partitions > 1:
            return _check_devices(module, text, replicas, partitions, time_limit_s, on_phase)
        compiled = XlaCpuExecutable.compile(text_for_xla_cpu(module, text), allow_excess_precision=False,
                                            debug_options=XLA_DEBUG_OPTIONS)
        args = make_fake_arguments(module, SEED)
        expected = compiled.run(args)
    except XlaCpuRejected as exc:
        return Outcome("not-runnable", exc.one_line())
    if on_phase is not None:
        on_phase("interpreter")
    start = time.perf_counter()
    try:
        actual = _run_interpreter(module, args, time_limit_s)
    except InterpreterTimeout:
        return Outcome("error", f"interpreter took longer than {time_limit_s:g} s", time_limit_s)
    except HloError as exc:
        return Outcome("error", _clip(exc.one_line()), time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - an escaped exception is an interpreter bug to list
        return Outcome("error", _clip(f"uncaught {type(exc).__name__}: {exc}"), time.perf_counter() - start)
    seconds = time.perf_counter() - start
    problem = compare_with_bounds(actual, expected)
    return Outcome("match", "", seconds) if problem is None else Outcome("mismatch", problem, seconds)


def _check_devices(module, text: str, replicas: int, partitions: int, time_limit_s: float,
                   on_phase) -> Outcome:
    """A module on replicas x partitions devices: every device's results against XLA:CPU's on as
    many host devices (arguments by hlo-run's rule, the device id in the seed)."""
    from hlo_common.errors import HloError
    from hlo_common.interpreter.devices import run_devices
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.xla_cpu import text_for_xla_cpu
    from hlo_run.xla_cpu_devices import run_on_devices

    n = replicas * partitions
    args = [make_fake_arguments(module, SEED, device=d) for d in range(n)]
    expected = run_on_devices(text_for_xla_cpu(module, text), args, replicas, partitions,
                              allow_excess_precision=False)
    if on_phase is not None:
        on_phase("interpreter")
    start = time.perf_counter()
    try:
        actual = _run_interpreter(module, args, time_limit_s, lambda: run_devices(module, args, replicas,
                                                                                 partitions))
    except InterpreterTimeout:
        return Outcome("error", f"interpreter took longer than {time_limit_s:g} s", time_limit_s)
    except HloError as exc:
        return Outcome("error", _clip(exc.one_line()), time.perf_counter() - start)
    for d in range(n):
        problem = compare_with_bounds(actual[d], expected[d])
        if problem is not None:
            return Outcome("mismatch", f"device {d}: {problem}", time.perf_counter() - start)
    return Outcome("match", "", time.perf_counter() - start)


def _run_interpreter(module, args, time_limit_s: float, run=None):
    from hlo_common.interpreter.evaluator import evaluate

    def on_alarm(signum, frame):
        raise InterpreterTimeout()

    use_alarm = hasattr(signal, "SIGALRM")
    if use_alarm:
        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    try:
        return run() if run is not None else evaluate(module, args)
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def compare_with_bounds(actual, expected) -> str | None:
    """None when every leaf is within its type's bounds, else a one-line reason."""
    from hlo_run.compare import compare_arrays, flatten_leaves

    a_leaves, e_leaves = flatten_leaves(actual), flatten_leaves(expected)
    if len(a_leaves) != len(e_leaves):
        return f"mismatch: {len(a_leaves)} result leaves, XLA:CPU gives {len(e_leaves)}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        abs_bound, rel_bound = bounds_for(e.dtype)
        leaf = compare_arrays(f"out{i}", a, e, abs_bound, rel_bound)
        if leaf.problem is not None:
            return f"mismatch: out{i}: {leaf.problem}"
        if leaf.mismatches:
            return (f"mismatch: out{i} ({leaf.shape_text}) max abs err {leaf.max_abs_error:.3g}, "
                    f"max rel err {leaf.max_rel_error:.3g}, {leaf.mismatches} of {leaf.elements} elements")
    return None


def _clip(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# -- the test ------------------------------------------------------------------------------------------

def _params():
    if not corpus_available():
        return [pytest.param(None, None, id="no-corpus")]
    out = []
    for module_id, text in corpus_modules():
        marks = [pytest.mark.slow] if is_slow(module_id, text) else []
        out.append(pytest.param(module_id, text, id=module_id, marks=marks))
    return out


@pytest.mark.parametrize("module_id, text", _params())
def test_interpreter_matches_xla_cpu(module_id, text, request):
    require_corpus()
    pytest.importorskip("jax", reason="the interpreter tier compares with XLA:CPU through jax")
    crash = notes("xla-crash").get(module_id)
    if crash is not None:
        pytest.skip(f"not runnable: XLA:CPU crashes or hangs on it ({crash})")
    slow = request.node.get_closest_marker("slow") is not None
    outcome = check_module(module_id, text, SLOW_TIME_LIMIT_S if slow else TIME_LIMIT_S)
    listed = expected_failures(TIER).get(module_id)
    if outcome.kind in ("unparsed", "not-runnable"):
        pytest.skip(f"not runnable ({outcome.kind}): {outcome.reason}")
    if outcome.kind in _OUTCOMES_ERROR:
        if listed is None:
            pytest.fail(f"{module_id}: {outcome.kind}: {outcome.reason} (fix it, or list it under "
                        f"'{TIER}' in tests/corpus/expected_failures.txt)", pytrace=False)
        return
    if listed is not None:
        pytest.fail(f"{module_id} now matches XLA:CPU but is listed as expected to fail ({listed}); "
                    f"remove its '{TIER}' line from tests/corpus/expected_failures.txt", pytrace=False)
