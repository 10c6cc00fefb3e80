"""Corpus tier `pipeline`: hlo-opt's whole `gpu` pipeline keeps every runnable module's results.

For every runnable corpus module: make arguments with hlo-run's rule (seed 0), run the module on
the reference interpreter, run the `gpu` pipeline (whatever passes are registered today) with the
verifier after every pass (`verify_each`), print the result and parse it again (what the tool
hands to hlo-codegen), run that on the interpreter and compare with run_hlo_module's rule: an
element fails only when it exceeds both bounds; f32/f64/complex 1e-4, bf16/f16/f8 2e-2, integers
and pred exactly.

Runnable: the module parses and verifies; its entry takes no tuple or token parameters; its result
has no dynamic shape; it makes no implementation-defined random numbers (`rng`,
`rng-get-and-update-state`, default `rng-bit-generator`: the pipeline may expand them into other
but equally valid bits) and has no `{...}` constant (unknown values); no array holds more than
2**26 elements; and the interpreter runs the input within INTERPRETER_LIMIT_S. A scheduled input
is run through the pipeline as if it were not scheduled (the CLI would leave it alone).

A runnable module whose pipeline crashes, fails verification, or changes results is listed under
`pipeline` in `tests/corpus/expected_failures.txt` with the reason; a listed module that passes
fails its test, so the list stays true. Modules with an array over SLOW_ELEMENTS elements, or that
the interpreter tier measured as slow, are marked `slow`; the others (~780, most of them small;
under a minute on 2 cores) run by default. Regenerate with

    .venv/bin/python tests/corpus/test_pipeline_corpus.py --update [--all] [--jobs 2]

The determinism tests at the end run the pipeline (with dumps) on a few larger modules, a while
loop and fusions among them, twice in fresh processes with different PYTHONHASHSEEDs and demand
byte-identical output and dumps.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from corpus_lib import (  # noqa: E402
    CORPUS_DIR, EXPECTED_FAILURES, ROOT, corpus_available, corpus_modules, expected_failures,
    largest_array_elements, slow_notes)

TIER = "pipeline"
SEED = 0
INTERPRETER_LIMIT_S = 10
PIPELINE_LIMIT_S = 60
SLOW_ELEMENTS = 1 << 20
TOO_LARGE_ELEMENTS = 1 << 26
F32_BOUND = 1e-4
LOW_PRECISION_BOUND = 2e-2
NOTES = Path(__file__).with_name("interpreter_notes.txt")


class TimeLimit(BaseException):
    """Raised by the alarm; a BaseException so no `except Exception` in the tools swallows it."""


@dataclass
class Outcome:
    """`kind`: not-runnable | ok | fail; `reason` says what failed (the expected-failures text)."""

    kind: str
    reason: str = ""


# -- which modules ---------------------------------------------------------------------------------------
def static_reason(module) -> str | None:
    """Why a parsed module is not runnable, judged without running it (None: maybe runnable)."""
    for p in module.entry.parameters:
        if p.shape.is_tuple or p.shape.is_token:
            return f"entry parameter {p.parameter_number} is a tuple or token"
    if any(leaf.is_dynamic for _, leaf in module.entry.root.shape.leaf_shapes()):
        return "dynamic-shaped result: values past the dynamic size are unspecified"
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.literal_unknown:
                return (f"%{instr.name} is a {{...}} constant: its values are unknown, and a pass that "
                        "reshapes it gets other random ones")
            op = instr.opcode
            default_bits = op == "rng-bit-generator" and str(instr.attrs.get("algorithm", "rng_default")) \
                == "rng_default"
            if op in ("rng", "rng-get-and-update-state") or default_bits:
                return f"%{instr.name} ({op}): its random numbers are implementation-defined"
    return None


@functools.lru_cache(maxsize=None)
def candidate_modules() -> tuple[tuple[str, str, bool], ...]:
    """(module id, text, slow) for every module that parses and is not statically excluded."""
    from hlo_common.errors import HloError
    from hlo_common.hlo.parser import parse_module

    out = []
    for module_id, text in corpus_modules():
        if largest_array_elements(text) > TOO_LARGE_ELEMENTS:
            continue
        try:
            module = parse_module(text, module_id)
        except HloError:
            continue
        if static_reason(module) is not None:
            continue
        slow = module_id in slow_notes(NOTES) or largest_array_elements(text) > SLOW_ELEMENTS
        out.append((module_id, text, slow))
    return tuple(out)


# -- one module ----------------------------------------------------------------------------------------
def bounds_for(dtype) -> tuple[float, float]:
    from hlo_common.hlo.dtypes import from_numpy_dtype

    t = from_numpy_dtype(dtype)
    if (t.is_float or t.is_complex) and t.bits >= 32:
        return F32_BOUND, F32_BOUND
    if t.is_float:
        return LOW_PRECISION_BOUND, LOW_PRECISION_BOUND
    return 0.0, 0.0


def compare(actual, expected) -> str | None:
    from hlo_run.compare import compare_arrays, flatten_leaves

    a_leaves, e_leaves = flatten_leaves(actual), flatten_leaves(expected)
    if len(a_leaves) != len(e_leaves):
        return f"mismatch: {len(a_leaves)} result leaves, the input gives {len(e_leaves)}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        leaf = compare_arrays(f"out{i}", a, e, *bounds_for(e.dtype))
        if leaf.problem is not None:
            return f"mismatch: out{i}: {leaf.problem}"
        if leaf.mismatches:
            return (f"mismatch: out{i} ({leaf.shape_text}) max abs err {leaf.max_abs_error:.3g}, "
                    f"{leaf.mismatches} of {leaf.elements} elements")
    return None


def with_time_limit(fn, seconds: float):
    def on_alarm(signum, frame):
        raise TimeLimit()

    if not hasattr(signal, "SIGALRM"):
        return fn()
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _one_line(exc: BaseException) -> str:
    from hlo_common.errors import HloError

    text = exc.one_line() if isinstance(exc, HloError) else f"uncaught {type(exc).__name__}: {exc}"
    text = " ".join(str(text).split())
    return text if len(text) <= 220 else text[:217] + "..."


def run_pipeline(module, overrides: dict | None = None) -> None:
    from hlo_common.hlo_pass.pipeline import RunOptions
    from hlo_opt.pipelines import build_gpu_pipeline

    build_gpu_pipeline(overrides).run_with(module, RunOptions(verify_each=True))


def check_module(module_id: str, text: str, overrides: dict | None = None) -> Outcome:
    """Interpreter before, the verified pipeline, print and parse, interpreter after, compare.
    `overrides`: pass options for build_gpu_pipeline (the layout tier's knob)."""
    from hlo_common.errors import HloError
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module
    from hlo_common.hlo.verifier import verify_module
    from hlo_run.inputs import make_fake_arguments

    try:
        module = parse_module(text, module_id)
        verify_module(module)
    except HloError as exc:
        return Outcome("not-runnable", f"input: {_one_line(exc)}")
    reason = static_reason(module)
    if reason is not None:
        return Outcome("not-runnable", reason)
    module.is_scheduled = False
    try:
        args = make_fake_arguments(module, SEED)
        expected = with_time_limit(lambda: evaluate(module, args), INTERPRETER_LIMIT_S)
    except TimeLimit:
        return Outcome("not-runnable", f"the interpreter takes over {INTERPRETER_LIMIT_S} s on the input")
    except Exception as exc:  # noqa: BLE001 - the reference cannot run the input
        return Outcome("not-runnable", f"interpreter on the input: {_one_line(exc)}")
    try:
        with_time_limit(lambda: run_pipeline(module, overrides), PIPELINE_LIMIT_S)
        optimized = parse_module(print_module(module), f"{module_id} (optimized)")
    except TimeLimit:
        return Outcome("fail", f"the pipeline takes over {PIPELINE_LIMIT_S} s")
    except Exception as exc:  # noqa: BLE001 - every failure is a listed reason
        return Outcome("fail", _one_line(exc))
    try:
        actual = with_time_limit(lambda: evaluate(optimized, args), 4 * INTERPRETER_LIMIT_S)
    except TimeLimit:
        return Outcome("fail", f"the interpreter takes over {4 * INTERPRETER_LIMIT_S} s on the output")
    except Exception as exc:  # noqa: BLE001
        return Outcome("fail", f"interpreter on the output: {_one_line(exc)}")
    problem = compare(actual, expected)
    return Outcome("ok") if problem is None else Outcome("fail", problem)


# -- the tests -------------------------------------------------------------------------------------------
def _params():
    if not corpus_available():
        return [pytest.param(None, None, id="no-corpus")]
    return [pytest.param(mid, text, id=mid, marks=[pytest.mark.slow] if slow else [])
            for mid, text, slow in candidate_modules()]


@pytest.mark.parametrize("module_id, text", _params())
def test_pipeline_keeps_results(module_id, text):
    if module_id is None:
        pytest.skip(f"corpus not found at {CORPUS_DIR}")
    outcome = check_module(module_id, text)
    listed = expected_failures(TIER).get(module_id)
    if outcome.kind == "not-runnable":
        pytest.skip(f"not runnable: {outcome.reason}")
    if outcome.kind == "fail" and listed is None:
        pytest.fail(f"{module_id}: {outcome.reason} (fix it, or list it under '{TIER}' in "
                    "tests/corpus/expected_failures.txt)", pytrace=False)
    if outcome.kind == "ok" and listed is not None:
        pytest.fail(f"{module_id} now keeps its results but is listed ({listed}); remove its '{TIER}' "
                    "line from tests/corpus/expected_failures.txt", pytrace=False)


# While loops (a scan; a fuzzed module with loops), fusions (several modules of them), a large
# training step of a jax model.
DETERMINISM_MODULES = (
    "backends_cpu_benchmarks_hlo__bench_scan_N2000_M3.hlo",
    "tests_fuzz__rand_000009.hlo",
    "codegen_emitters_tests_loop__mof_reshapes.hlo",
    "backends_cpu_benchmarks_hlo__dlrm_keras_jax_f32_train_step.hlo",
)


def _hlo_opt_run(src: Path, dumps: Path, seed: str) -> tuple[bytes, dict[str, bytes]]:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "hlo-opt"), str(src), "--split-input-file",
                           "--dump-to", str(dumps), "--dump-pass-re", ".*", "--time-passes"],
                          capture_output=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return proc.stdout, {p.name: p.read_bytes() for p in sorted(dumps.iterdir())}


@pytest.mark.parametrize("module_file", DETERMINISM_MODULES)
def test_full_pipeline_is_deterministic(module_file, tmp_path):
    src = CORPUS_DIR / module_file
    if not src.exists():
        pytest.skip(f"corpus module {module_file} not found at {CORPUS_DIR}")
    out0, files0 = _hlo_opt_run(src, tmp_path / "a", "0")
    out1, files1 = _hlo_opt_run(src, tmp_path / "b", "31337")
    assert b"is_scheduled=true" in out0 or b"HloModule" in out0
    assert out0 == out1
    assert files0.keys() == files1.keys() and len(files0) > 3
    assert [n for n in files0 if files0[n] != files1[n]] == []


# -- maintenance: regenerate the pipeline lines ------------------------------------------------------------
def _check_item(item: tuple[str, str]) -> tuple[str, Outcome, float]:
    module_id, text = item
    start = time.perf_counter()
    outcome = check_module(module_id, text)
    return module_id, outcome, time.perf_counter() - start


def update(all_modules: bool, jobs: int) -> None:
    """Check the default (or all) candidates in `jobs` processes and rewrite this tier's lines."""
    import multiprocessing

    candidates = candidate_modules()
    items = [(mid, text) for mid, text, slow in candidates if all_modules or not slow]
    checked = {mid for mid, _ in items}
    lines: dict[str, str] = {}
    counts = {"not-runnable": 0, "ok": 0, "fail": 0}
    with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=20) as pool:
        for module_id, outcome, seconds in pool.imap_unordered(_check_item, items):
            counts[outcome.kind] += 1
            if outcome.kind == "fail":
                lines[module_id] = f"{TIER} {module_id} {outcome.reason}"
            print(f"{seconds:6.1f}s {module_id}: {outcome.kind} {outcome.reason}", flush=True)
    old = EXPECTED_FAILURES.read_text().splitlines()
    listed = {ln.split()[1]: ln for ln in old if ln.startswith(f"{TIER} ")}
    candidates_ids = {mid for mid, _, _ in candidates}
    ours = [ln for mid, ln in listed.items() if mid in candidates_ids and mid not in checked]
    # A module that still fails keeps its line, so a reason explained by hand survives.
    ours += [listed.get(mid, ln) for mid, ln in lines.items()]
    others = [ln for ln in old if not ln.startswith(f"{TIER} ")]
    EXPECTED_FAILURES.write_text("\n".join(others + sorted(ours, key=lambda ln: ln.split()[1])) + "\n")
    print(f"{len(items)} modules checked: {counts['ok']} keep their results, {counts['fail']} listed, "
          f"{counts['not-runnable']} not runnable")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Regenerate the pipeline tier of expected_failures.txt")
    parser.add_argument("--update", action="store_true", required=True)
    parser.add_argument("--all", action="store_true", help="slow modules too")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    update(args.all, args.jobs)
