"""Corpus tier `opt-passes`: the optimization/simplification passes of hlo-opt on real modules.

Every pass of the XLA:GPU `optimization` and `simplification` pipelines written here runs on every
corpus module that parses, verifies and holds the opcodes it rewrites (a deterministic third of
the corpus for constant folding, whose candidates are everywhere; all of it with `-m slow`). After
the pass the module must verify again, print and re-parse to the same text, and its run time must
stay linear in the module's size. For a sample of the modules a pass changed that the reference
interpreter runs quickly, the results before and after must agree on seeded inputs (the tolerance
of `numerics_testlib`). Modules that fail are listed under `opt-passes` in expected_failures.txt.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from corpus_lib import corpus_modules, expected_failures, require_corpus

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))

from hlo_common.errors import HloError  # noqa: E402
from hlo_common.hlo.parser import parse_module  # noqa: E402
from hlo_common.hlo.printer import print_module  # noqa: E402
from hlo_common.hlo.verifier import verify_module  # noqa: E402
from hlo_common.hlo_pass.pass_base import PASS_REGISTRY  # noqa: E402
from hlo_opt.passes import load_all_passes  # noqa: E402

# Pass name -> the opcode texts that make a module worth running it on (None: every module).
PASS_OPCODES: dict[str, tuple[str, ...] | None] = {
    "logistic-expander": (" logistic(",),
    "batchnorm_expander": (" batch-norm-",),
    "select-and-scatter-expander": (" select-and-scatter(",),
    "gather_simplifier": (" gather(",),
    "gather_expander": (" gather(",),
    "scatter_simplifier": (" scatter(",),
    "scatter_expander": (" scatter(",),
    "simplify-sorts": (" sort(",),
    "simplify-conditional": (" conditional(",),
    "simplify-while-loops": (" while(",),
    "while-loop-constant-sinking": (" while(",),
    "dot_dimension_sorter": (" dot(",),
    "dot_decomposer": (" dot(",),
    "transpose-folding": (" dot(", " convolution("),
    "reshape-mover": (" reshape(", " transpose("),
    "rng-bit-generator-expander": (" rng-bit-generator(",),
    "rng-expander": (" rng(",),
    "stochastic_convert_decomposer": (" stochastic-convert(",),
    "cholesky_expander": (" cholesky(",),
    "triangular_solve_expander": (" triangular-solve(",),
    "fft_expander": (" fft(",),
    "scan_expander": (" scan(",),
    "sharding-remover": ('"Sharding"', '"SPMDFullToShardShape"', '"SPMDShardToFullShape"'),
    "constant_folding": None,
}
# The values of `rng` are the implementation's choice (XLA's backends differ): its expansion is
# checked for verification and round trip only, never against the interpreter's own rng.
NO_NUMERICS = frozenset({"rng-expander"})
SAMPLE_EVERY = 3  # constant_folding's default share of the corpus
NUMERIC_SAMPLE = 6  # changed modules checked with the interpreter, per pass
NUMERIC_SECONDS = 3.0  # an interpreter run slower than this is skipped, not failed
MAX_ELEMENTS = 1 << 18  # ... and so is a module with a bigger array


def _modules(name: str, everything: bool) -> list[tuple[str, str]]:
    opcodes = PASS_OPCODES[name]
    mods = corpus_modules()
    if opcodes is None:
        return list(mods) if everything else list(mods[::SAMPLE_EVERY])
    return [(mid, text) for mid, text in mods if any(op in text for op in opcodes)]


def _small(module) -> bool:
    return all(s.num_elements <= MAX_ELEMENTS for c in module.computations for i in c.instructions
               for _, s in i.shape.leaf_shapes() if s.is_array)


class _Slow(Exception):
    pass


def _evaluate_with_deadline(module, args, seconds: float):
    """The interpreter's result, or _Slow when it takes longer than `seconds` (main thread only)."""
    from hlo_common.interpreter import evaluate

    if threading.current_thread() is not threading.main_thread():
        return evaluate(module, args)

    def _alarm(*_):
        raise _Slow()

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return evaluate(module, args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _check_numerics(mid: str, text: str, after) -> bool:
    """Whether the check ran (False: the interpreter cannot run the input quickly)."""
    from numerics_testlib import _leaves, assert_close
    from pass_testlib import random_arguments

    before = parse_module(text, mid)
    if not _small(before):
        return False
    try:
        args = random_arguments(before, 0)
        want = _leaves(_evaluate_with_deadline(before, args, NUMERIC_SECONDS))
    except (HloError, _Slow, AttributeError, TypeError, ValueError):
        return False
    got = _leaves(_evaluate_with_deadline(after, args, 20 * NUMERIC_SECONDS))
    types = [s.element_type.name for _, s in before.entry.root.shape.leaf_shapes()]
    assert len(got) == len(want), f"{mid}: {len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, types[k], f"{mid} output {k}")
    return True


def _sweep(name: str, everything: bool) -> None:
    require_corpus()
    load_all_passes()
    expected = expected_failures("opt-passes")
    failures, changed, checked, worst = [], 0, 0, (0.0, "")
    for mid, text in _modules(name, everything):
        try:
            module = parse_module(text, mid)
            verify_module(module)
        except HloError:
            continue  # the parse / verify tiers report these
        start = time.process_time()  # CPU time: other processes on a loaded machine do not count
        try:
            did_change = PASS_REGISTRY[name]().run(module)
            elapsed = time.process_time() - start
            verify_module(module)
            out = print_module(module)
            assert print_module(parse_module(out, mid)) == out, "output does not round-trip"
            # Only pathological (superlinear) slowness fails, in CPU seconds (wall time on a shared
            # 2-core machine doubled under load and made this flaky).
            bound = 0.5 + 2e-3 * module.instruction_count()
            assert elapsed < bound, f"{elapsed:.2f}s on {module.instruction_count()} instructions"
            worst = max(worst, (elapsed, mid))
            if did_change:
                changed += 1
                numeric = name not in NO_NUMERICS and checked < NUMERIC_SAMPLE
                if numeric and _check_numerics(mid, text, module):
                    checked += 1
        except Exception as exc:  # noqa: BLE001 - collected and reported per module
            if f"{name}:{mid}" not in expected:
                failures.append(f"{mid}: {type(exc).__name__}: {str(exc)[:300]}")
    assert not failures, f"{name} failed on {len(failures)} module(s):\n" + "\n".join(failures)
    print(f"{name}: changed {changed} modules, checked {checked} numerically, "
          f"slowest {worst[0]:.3f}s ({worst[1]})")


@pytest.mark.parametrize("name", sorted(PASS_OPCODES))
def test_pass_on_corpus(name: str) -> None:
    _sweep(name, everything=False)


@pytest.mark.slow
def test_constant_folding_on_the_whole_corpus() -> None:
    _sweep("constant_folding", everything=True)


def test_every_swept_pass_is_registered() -> None:
    load_all_passes()
    assert sorted(set(PASS_OPCODES) - set(PASS_REGISTRY)) == []
