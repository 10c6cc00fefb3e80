"""Corpus tier `codegen`: the whole pipe on every runnable corpus module.

    hlo-opt m.hlo | hlo-codegen --target host | hlo-run --platform host --reference-platform interpreter
    hlo-opt m.hlo | hlo-codegen --target cuda            (PTX that links for sm_90, checked by nvJitLink)

Both run in-process, stage by stage exactly as the tools do it (hlo-opt's GPU pipeline, the text
printed and parsed again, the manifest written and loaded again); the host run uses hlo-run's
argument rule (seed 0) and its comparison (abs and rel bound 1e-3, an element fails only when it
exceeds both) against the interpreter running the manifest's HLO.

Runnable: the module parses, its entry takes no tuple or token parameters, no array holds more
than TOO_LARGE_ELEMENTS elements, and neither the `verify` nor the `interpreter` tier lists it.
If the reference interpreter cannot run a module at all (the manifest's HLO, or the original
module when a stage of the pipe fails first: an unknown custom call, a group of several devices)
it is skipped as not runnable. Modules past the first DEFAULT_PREFIX of the corpus (by module
id), the ones the interpreter tier measured as slow, and those with arrays over 4M elements are
`slow`.

A runnable module that fails is listed under `codegen` in `tests/corpus/expected_failures.txt`,
one line per module: `codegen <module id> host: <reason> | cuda: <reason>` (either part may be
missing). The host test expects a `host:` part exactly when the host pipe fails, the cuda test a
`cuda:` part exactly when compiling for cuda fails, so a listed failure that starts passing fails
its test. Regenerate the lines with

    .venv/bin/python tests/corpus/test_pipe_corpus.py --update [--all | --modules ID...] [--jobs 2]
"""

from __future__ import annotations

import functools
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from corpus_lib import (  # noqa: E402
    EXPECTED_FAILURES, corpus_available, corpus_modules, expected_failures, largest_array_elements, slow_notes,
)

TIER = "codegen"
SEED = 0
BOUND = 1e-3  # hlo-run's default --abs-error-bound / --rel-error-bound
LOW_PRECISION_BOUND = 2e-2  # 16-bit and narrower floats, host and GPU (design/testing.md)
TIME_LIMIT_S = 60
HARD_LIMIT_S = 2 * TIME_LIMIT_S + 30  # --update kills a worker whose module (host + cuda) runs past this
DEFAULT_PREFIX = 280  # runnable modules among the first this many of the corpus run by default
SLOW_ELEMENTS = 1 << 22
# An array of more elements than this: the host run and the interpreter would not both fit a CI machine.
TOO_LARGE_ELEMENTS = 1 << 28
NOTES = Path(__file__).with_name("interpreter_notes.txt")
PIPE_NOTES = Path(__file__).with_name("pipe_notes.txt")
SLOW_SECONDS = 3.0  # a module whose two checks took longer (2-core machine) runs only with -m slow


class PipeTimeout(BaseException):
    """Raised by the alarm; a BaseException so that no `except Exception` in the tools stops it."""


@dataclass
class Outcome:
    ok: bool
    reason: str = ""
    runnable: bool = True


# -- which modules ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def runnable_modules(measured: bool = True) -> tuple[tuple[str, str, bool], ...]:
    """(module id, text, slow) for every runnable module, in module-id order. Whether a module runs
    by default depends on its place in the corpus, its size and (`measured`) pipe_notes.txt, not
    on other tiers' lists."""
    from hlo_common.errors import HloError
    from hlo_common.hlo.parser import parse_module

    excluded = set(expected_failures("verify")) | set(expected_failures("interpreter"))
    out = []
    for position, (module_id, text) in enumerate(corpus_modules()):
        if module_id in excluded:
            continue
        try:
            module = parse_module(text, module_id)
        except HloError:
            continue
        if any(p.shape.is_tuple or not p.shape.is_array for p in module.entry.parameters):
            continue
        if largest_array_elements(text) > TOO_LARGE_ELEMENTS:
            continue
        slow = (position >= DEFAULT_PREFIX or module_id in slow_notes(NOTES)
                or largest_array_elements(text) > SLOW_ELEMENTS or (measured and module_id in slow_notes(PIPE_NOTES)))
        out.append((module_id, text, slow))
    return tuple(out)


# -- the stages --------------------------------------------------------------------------------------------
def _one_line(exc: BaseException) -> str:
    from hlo_common.errors import HloError

    text = exc.one_line() if isinstance(exc, HloError) else f"uncaught {type(exc).__name__}: {exc}"
    text = " ".join(str(text).split())
    return text if len(text) <= 200 else text[:197] + "..."


@functools.lru_cache(maxsize=64)
def optimized_text(module_id: str, text: str, knob_seed: int | None = None) -> str:
    """What `hlo-opt m.hlo` prints (the GPU pipeline; a scheduled module is left alone);
    `knob_seed`: layout-assignment's vary_layouts_seed (the layout tier's variants)."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module
    from hlo_common.hlo_pass.pipeline import RunOptions, verify
    from hlo_opt.pipelines import build_gpu_pipeline

    module = parse_module(text, module_id)
    verify(module, "verification failed in the input")
    if not module.is_scheduled:
        overrides = None if knob_seed is None else {"layout-assignment": {"vary_layouts_seed": knob_seed}}
        build_gpu_pipeline(overrides).run_with(module, RunOptions())
        verify(module, "verification failed after pipeline 'gpu'")
    return print_module(module)


def compile_text(module_id: str, text: str, target: str) -> bytes:
    """What `hlo-codegen --target T` writes for hlo-opt's output."""
    from hlo_common.hlo.parser import parse_module
    from hlo_codegen.compiler import CompileOptions, compile_module

    return compile_module(parse_module(text, f"{module_id} (optimized)"), CompileOptions(target=target)) \
        .manifest.to_bytes()


def run_manifest(module_id: str, data: bytes) -> Outcome:
    """What `hlo-run --platform host --reference-platform interpreter` checks."""
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.manifest.manifest import load_manifest
    from hlo_common.hlo.parser import parse_module
    from hlo_run.backends.host import HostDevice
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.manifest_runtime import ManifestExecutable

    manifest = load_manifest(data, f"{module_id}.json")
    module = parse_module(manifest.hlo, f"{module_id} (manifest)")
    args = make_fake_arguments(module, SEED)
    try:
        expected = evaluate(module, args)
    except Exception as exc:  # noqa: BLE001 - the reference itself cannot run this module
        return Outcome(False, f"interpreter: {_one_line(exc)}", runnable=False)
    actual = ManifestExecutable(manifest, HostDevice(), module_id).run(args)
    return compare_with_reference(actual, expected)


def compare_with_reference(actual, expected) -> Outcome:
    """Leaf by leaf, with the bounds of design/testing.md: a 16-bit or narrower float leaf within
    LOW_PRECISION_BOUND (a kernel that accumulates in f32 in another order than the interpreter
    may round a result near a rounding boundary to the neighbouring value, one ulp away), any
    other leaf within BOUND."""
    from hlo_run.compare import compare_values, flatten_leaves

    actual, expected = flatten_leaves(actual), flatten_leaves(expected)
    if len(actual) != len(expected):
        return Outcome(False, f"mismatch: {compare_values(actual, expected).one_line()}")
    for a, e in zip(actual, expected):
        bound = LOW_PRECISION_BOUND if e.dtype.itemsize < 4 and e.dtype.kind in "fV" else BOUND
        comparison = compare_values(a, e, bound, bound)
        if not comparison.ok:
            return Outcome(False, f"mismatch: {comparison.one_line()}")
    return Outcome(True)


def _staged(stages) -> Outcome:
    """Run (name, fn) stages in order; the first failure becomes `<stage>: <message>`."""
    value = None
    for name, fn in stages:
        try:
            value = fn(value)
        except PipeTimeout:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is a listed reason
            return Outcome(False, f"{name}: {_one_line(exc)}")
    return value if isinstance(value, Outcome) else Outcome(True)


def check_host(module_id: str, text: str) -> Outcome:
    return _unless_unrunnable(module_id, text, _staged([
        ("hlo-opt", lambda _: optimized_text(module_id, text)),
        ("hlo-codegen", lambda opt: compile_text(module_id, opt, "host")),
        ("hlo-run", lambda data: run_manifest(module_id, data))]))


def _unless_unrunnable(module_id: str, text: str, outcome: Outcome) -> Outcome:
    """A failure of a module the reference interpreter cannot run either is 'not runnable'."""
    if not outcome.ok and outcome.runnable:
        reason = interpreter_refusal(module_id, text)
        if reason is not None:
            return Outcome(False, reason, runnable=False)
    return outcome


def interpreter_refusal(module_id: str, text: str) -> str | None:
    """Why the reference interpreter cannot run the original module (an unknown custom call, a
    group of several devices), or None when it can: such a module is not runnable, whichever
    stage of the pipe stopped first."""
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.hlo.parser import parse_module
    from hlo_run.inputs import make_fake_arguments

    try:
        module = parse_module(text, module_id)
        evaluate(module, make_fake_arguments(module, SEED))
    except PipeTimeout:
        raise
    except Exception as exc:  # noqa: BLE001 - the reference itself cannot run this module
        return f"interpreter: {_one_line(exc)}"
    return None


def check_cuda(module_id: str, text: str) -> Outcome:
    return _unless_unrunnable(module_id, text, _staged([
        ("hlo-opt", lambda _: optimized_text(module_id, text)),
        ("hlo-codegen", lambda opt: compile_text(module_id, opt, "cuda"))]))


def with_time_limit(fn, seconds: float):
    def on_alarm(signum, frame):
        raise PipeTimeout()

    if not hasattr(signal, "SIGALRM"):
        return fn()
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    except PipeTimeout:
        return Outcome(False, f"took longer than {seconds:g} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- expectations ------------------------------------------------------------------------------------------
def listed_parts(module_id: str) -> dict[str, str]:
    """{'host': reason, 'cuda': reason} from this module's `codegen` line (parts may be absent)."""
    line = expected_failures(TIER).get(module_id)
    parts = {}
    if line:
        for piece in line.split(" | "):
            key, _, reason = piece.partition(": ")
            if key in ("host", "cuda"):
                parts[key] = reason
    return parts


def _params():
    if not corpus_available():
        return [pytest.param(None, None, id="no-corpus")]
    return [pytest.param(mid, text, id=mid, marks=[pytest.mark.slow] if slow else [])
            for mid, text, slow in runnable_modules()]


def _expect(module_id: str, part: str, outcome: Outcome) -> None:
    if not outcome.runnable:
        pytest.skip(f"not runnable: {outcome.reason}")
    listed = listed_parts(module_id).get(part)
    if not outcome.ok and listed is None:
        pytest.fail(f"{module_id}: {part} pipe fails: {outcome.reason} (fix it, or list it under '{TIER}' "
                    f"in tests/corpus/expected_failures.txt)", pytrace=False)
    if outcome.ok and listed is not None:
        pytest.fail(f"{module_id}: the {part} pipe now passes but is listed ({listed}); remove the '{part}:' "
                    f"part of its '{TIER}' line", pytrace=False)


def test_codegen_lines_name_runnable_modules():
    """A line for a module this tier never runs (too large, or no longer runnable) can only go stale."""
    if not corpus_available():
        pytest.skip("corpus not found")
    runnable = {mid for mid, _, _ in runnable_modules(measured=False)}
    stale = sorted(set(expected_failures(TIER)) - runnable)
    assert not stale, f"'{TIER}' lines for modules the tier does not run: {stale}"


def checked(module_id: str, text: str, part: str, check) -> Outcome:
    """`check` under the time limit. A module listed as taking too long runs in a worker process
    killed after HARD_LIMIT_S, as `--update` runs every module: the alarm cannot stop a NumPy call
    or a JIT-compiled kernel (a 10^12-flop bf16 GEMM would hold the test run for hours)."""
    if not listed_parts(module_id).get(part, "").startswith("took longer than"):
        return with_time_limit(lambda: check(module_id, text), TIME_LIMIT_S)
    [(_, host, cuda, _)] = list(_check_all([(module_id, text)], jobs=1))
    return host if part == "host" else cuda


@pytest.mark.parametrize("module_id, text", _params())
def test_pipe_host(module_id, text):
    if module_id is None:
        pytest.skip("corpus not found")
    _expect(module_id, "host", checked(module_id, text, "host", check_host))


@pytest.mark.parametrize("module_id, text", _params())
def test_pipe_cuda_ptx_links(module_id, text):
    if module_id is None:
        pytest.skip("corpus not found")
    pytest.importorskip("cuda.bindings.nvjitlink", reason="PTX linking needs nvJitLink (the ptx extra)")
    _expect(module_id, "cuda", checked(module_id, text, "cuda", check_cuda))


def run_manifest_cuda(module_id: str, data: bytes) -> Outcome:
    """`hlo-run --platform cuda --reference-platform interpreter` on a cuda manifest."""
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.manifest.manifest import load_manifest
    from hlo_common.hlo.parser import parse_module
    from hlo_run.backends.cuda import CudaDevice
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.manifest_runtime import ManifestExecutable

    manifest = load_manifest(data, f"{module_id}.json")
    module = parse_module(manifest.hlo, f"{module_id} (manifest)")
    args = make_fake_arguments(module, SEED)
    try:
        expected = evaluate(module, args)
    except Exception as exc:  # noqa: BLE001 - the reference itself cannot run this module
        return Outcome(False, f"interpreter: {_one_line(exc)}", runnable=False)
    executable = ManifestExecutable(manifest, CudaDevice(), module_id)
    try:
        actual = executable.run(args)
    finally:
        executable.close()
    # cuBLAS and GPU reductions sum in another order: a 16-bit result may differ by an ulp.
    return compare_with_reference(actual, expected)


@pytest.mark.gpu
@pytest.mark.parametrize("module_id, text", _params())
def test_pipe_cuda_runs_on_the_gpu(module_id, text):
    """The cuda pipe end to end on a real GPU (not in CI: no GPU there, so no expected list)."""
    from hlo_run.backends.cuda import CudaBackend

    reason = CudaBackend.unavailable_reason() if module_id is not None else "corpus not found"
    if reason is not None:
        pytest.skip(f"no usable GPU: {reason}")
    if "cuda" in listed_parts(module_id):
        pytest.skip("hlo-codegen --target cuda is listed as failing")
    outcome = with_time_limit(lambda: _staged([
        ("hlo-opt", lambda _: optimized_text(module_id, text)),
        ("hlo-codegen", lambda opt: compile_text(module_id, opt, "cuda")),
        ("hlo-run", lambda data: run_manifest_cuda(module_id, data))]), TIME_LIMIT_S)
    if not outcome.runnable:
        pytest.skip(f"not runnable: {outcome.reason}")
    assert outcome.ok, outcome.reason


# -- maintenance: regenerate the codegen lines ---------------------------------------------------------------
def _check_both(item: tuple[str, str], report=None) -> tuple[str, Outcome, Outcome, float]:
    """Compile for cuda (reported through `report` as soon as known), then run on the host."""
    module_id, text = item
    start = time.perf_counter()
    cuda = with_time_limit(lambda: check_cuda(module_id, text), TIME_LIMIT_S)
    if report is not None:
        report(cuda)
    host = with_time_limit(lambda: check_host(module_id, text), TIME_LIMIT_S)
    return module_id, host, cuda, time.perf_counter() - start


def _line(module_id: str, host: Outcome, cuda: Outcome) -> str | None:
    parts = []
    if host.runnable and not host.ok:
        parts.append(f"host: {host.reason}")
    if cuda.runnable and not cuda.ok:
        parts.append(f"cuda: {cuda.reason}")
    return f"{TIER} {module_id} {' | '.join(parts)}" if parts else None


WARM_UP = "HloModule w\nENTRY e { p = f32[8] parameter(0) ROOT n = f32[8] negate(p) }"


def _worker(tasks, results) -> None:
    _check_both(("warm-up", WARM_UP))  # imports and JIT set-up are not the first module's time
    while True:
        item = tasks.get()
        if item is None:
            return
        results.put(("start", item[0], None))
        done = _check_both(item, lambda cuda: results.put(("cuda", item[0], cuda)))
        results.put(("done", item[0], done))


def _check_all(items: list[tuple[str, str]], jobs: int):
    """Yield (module id, host, cuda, seconds); a worker that dies (an LLVM abort, say) marks its
    module as crashed, one still busy after HARD_LIMIT_S marks it as too slow (its cuda result
    kept when that came first); either worker is replaced."""
    import multiprocessing
    import queue

    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    pending = list(reversed(items))
    workers: list[dict] = []

    def start_worker() -> None:
        tasks = ctx.Queue()
        proc = ctx.Process(target=_worker, args=(tasks, results), daemon=True)
        proc.start()
        w = {"proc": proc, "tasks": tasks, "item": None}
        workers.append(w)
        feed(w)

    def feed(w) -> None:
        w["item"] = pending.pop()[0] if pending else None
        w["since"], w["cuda"] = time.monotonic(), None
        w["tasks"].put(next((it for it in items if it[0] == w["item"]), None))

    for _ in range(min(jobs, len(items))):
        start_worker()
    while any(w["item"] is not None for w in workers):
        try:
            kind, module_id, payload = results.get(timeout=5)
        except queue.Empty:
            kind = module_id = payload = None
        owner = next((w for w in workers if w["item"] is not None and w["item"] == module_id), None)
        if kind == "cuda" and owner is not None:
            owner["cuda"] = payload
        elif kind == "done" and owner is not None:
            yield payload
            feed(owner)
        for w in list(workers):
            if w["item"] is None:
                continue
            stuck = time.monotonic() - w["since"] > HARD_LIMIT_S
            if stuck or not w["proc"].is_alive():
                # A JIT-compiled kernel runs on in its threads after the alarm: only killing the
                # worker stops it.
                if stuck:
                    w["proc"].kill()
                    w["proc"].join()
                failed = Outcome(False, f"took longer than {TIME_LIMIT_S} s" if stuck
                                 else f"crashed (exit code {w['proc'].exitcode})")
                yield w["item"], failed, w["cuda"] or failed, time.monotonic() - w["since"]
                workers.remove(w)
                start_worker()
    for w in workers:
        w["tasks"].put(None)


def update(all_modules: bool, jobs: int, only: list[str] | None = None) -> None:
    modules = runnable_modules(measured=False)
    items = [(mid, text) for mid, text, slow in modules
             if (mid in only if only else all_modules or not slow)]
    checked = {mid for mid, _ in items}
    lines: dict[str, str] = {}
    seconds_of: dict[str, float] = {}
    for module_id, host, cuda, seconds in _check_all(items, jobs):
        line = _line(module_id, host, cuda)
        if line:
            lines[module_id] = line
        seconds_of[module_id] = seconds
        print(f"{seconds:6.1f}s {module_id}: {line or 'ok'}", flush=True)
    old = EXPECTED_FAILURES.read_text().splitlines()
    kept = [ln for ln in old if not ln.startswith(f"{TIER} ") or ln.split()[1] not in checked]
    EXPECTED_FAILURES.write_text("\n".join(kept + [lines[mid] for mid in sorted(lines)]) + "\n")
    previous = PIPE_NOTES.read_text().splitlines() if PIPE_NOTES.exists() else []
    notes = ["# Measured by `test_pipe_corpus.py --update` on a 2-core machine: slow <module id> <seconds>;",
             f"# a module whose host + cuda checks took {SLOW_SECONDS:g} s or more runs only with -m slow."]
    notes += [ln for ln in previous if ln.startswith("slow ") and ln.split()[1] not in checked]
    notes += [f"slow {mid} {t:.1f}" for mid, t in sorted(seconds_of.items()) if t >= SLOW_SECONDS]
    PIPE_NOTES.write_text("\n".join(notes) + "\n")
    print(f"{len(items)} modules checked, {len(lines)} listed under '{TIER}'")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Regenerate the codegen tier of expected_failures.txt")
    parser.add_argument("--update", action="store_true", required=True)
    parser.add_argument("--all", action="store_true", help="slow modules too")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--modules", nargs="+", metavar="ID", help="check only these modules")
    args = parser.parse_args()
    update(args.all, args.jobs, args.modules)
