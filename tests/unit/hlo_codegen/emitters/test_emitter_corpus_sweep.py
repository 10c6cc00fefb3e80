"""Corpus sweep of the emitters: every kernel the corpus needs, run on the host vs the interpreter.

For every corpus module that parses, without hlo-opt: the entry and the computations it runs as
control flow are scanned; every fusion is taken as it is and every other instruction that needs
a kernel (hlo-codegen's `classify`) is wrapped into a single-instruction kLoop fusion, as
FusionWrapper does. Each fusion is emitted by the emitter its hero selects, run on the host with
random, index-aware inputs (seeded) and compared with the interpreter (integers exact, f32 1e-4,
narrow floats 2e-2); with `--ptx` its kernel is also linked for sm_90.

Outcomes per fusion: `pass`; `fail` (emission, lowering or a numeric mismatch: a finding);
`skip` (the interpreter cannot run the fusion, arguments that are not arrays, tuples or tokens,
more than MAX_ELEMENTS elements). A module passes when none of its fusions fails. The slow test
checks every module against the `emitters` tier of tests/corpus/expected_failures.txt (a listed
module that passes fails the test); the default run sweeps a few modules of each emitter kind.

    .venv/bin/python tests/unit/hlo_codegen/emitters/test_emitter_corpus_sweep.py [--ptx] [--jobs 2]
        [--only REGEX] [--platform cuda] [--verbose] [--update]

prints the table of fusions by emitter kind and outcome and the failures with their reasons;
`--update` rewrites the `emitters` lines of the expected-failures file.
"""

from __future__ import annotations

import re
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "helpers"))  # when run as a script
from corpus_lib import EXPECTED_FAILURES, corpus_available, corpus_modules, expected_failures  # noqa: E402
from emitter_testlib import (  # noqa: E402
    assert_close, distinct_indices, index_aware_args, link_ptx, output_shapes, run_on_host,
)

TIER = "emitters"
MAX_ELEMENTS = 1 << 21
TIME_LIMIT_S = 120
# Modules swept by default: a few per emitter kind, cheap ones.
DEFAULT_MODULES = (
    "backends_gpu_codegen_emitters_tests_reduce_row__mof_epilogue.hlo",
    "backends_gpu_codegen_emitters_tests_scatter__variadic_scatter_argmax.hlo",
    "codegen_emitters_tests_dynamic_update_slice__simple.hlo",
    "codegen_emitters_tests_concatenate__concat_1d.hlo",
)


@dataclass
class Outcome:
    fusion: str
    kind: str
    status: str  # pass | fail | skip
    reason: str = ""


class SweepTimeout(BaseException):
    """Raised by the alarm; a BaseException so that no `except Exception` swallows it."""


def _short(exc: BaseException) -> str:
    text = exc.one_line() if hasattr(exc, "one_line") else str(exc)
    text = re.sub(r"%[\w.\-]+", "%x", text.splitlines()[0] if text else type(exc).__name__)
    return f"{type(exc).__name__}: {text}"[:200]


def collect_fusions(module) -> list:
    """Every fusion of the module's global computations, lone kernel instructions wrapped."""
    from hlo_common.passes._support import global_computations
    from hlo_common.passes.decomposition_calls import calls_for_decompositions
    from hlo_common.passes.fusion_wrapper import wrap_instruction
    from hlo_codegen.fusion_wrapper import ThunkKind, classify

    calls_for_decompositions(module)
    fusions = []
    for comp in global_computations(module):
        for instr in list(comp.instructions):
            kind = classify(instr)
            if kind is ThunkKind.FUSION:
                fusions.append(instr)
            elif kind is ThunkKind.KERNEL:
                fusions.append(wrap_instruction(instr, "kLoop"))
    return fusions


def _arrays_only(fusion) -> bool:
    shapes = [op.shape for op in fusion.operands] + [s for _, s in fusion.shape.leaf_shapes()]
    return all(s.is_array for s in shapes) and not any(op.shape.is_tuple for op in fusion.operands)


def _keep_promises(fusion, args: list[np.ndarray], seed: int) -> None:
    """A scatter with `unique_indices=true` reading its indices from a parameter gets distinct
    index values (random ones would break the promise, leaving the result implementation-defined)."""
    for instr in fusion.fused_computation().instructions:
        if instr.opcode != "scatter" or instr.attrs.get("unique_indices") is not True:
            continue
        indices = instr.operands[(len(instr.operands) - 1) // 2]
        if indices.opcode == "parameter":
            args[indices.parameter_number] = distinct_indices(instr, args[indices.parameter_number], seed)


_CUDA = []


def _run_kernel(fusion, args, kernel, platform: str):
    if platform == "cuda":
        if not _CUDA:
            from emitter_testlib import CudaRunner

            _CUDA.append(CudaRunner())
        return _CUDA[0].run(fusion, args, kernel)
    return run_on_host(fusion, args, kernel)


def sweep_fusion(fusion, seed: int = 0, ptx: bool = False, platform: str = "host") -> Outcome:
    from hlo_codegen.emitters import emit_kernel, emitter_kind
    from hlo_common.errors import InterpreterError
    from hlo_common.interpreter.evaluator import Evaluator

    try:
        kind = emitter_kind(fusion)[0]
    except Exception as exc:  # noqa: BLE001 - the sweep records every failure
        return Outcome(fusion.name, "?", "fail", "kind: " + _short(exc))
    if not _arrays_only(fusion):
        return Outcome(fusion.name, kind, "skip", "tuple or token arguments")
    shapes = [op.shape for op in fusion.operands] + output_shapes(fusion)
    if any(d < 0 for s in shapes for d in s.dims) or any(s.is_dynamic for s in shapes):
        return Outcome(fusion.name, kind, "skip", "dynamic shapes")
    if sum(s.num_elements for s in shapes) > MAX_ELEMENTS:
        return Outcome(fusion.name, kind, "skip", "too large")
    args = index_aware_args(fusion, seed)
    _keep_promises(fusion, args, seed)
    try:
        with np.errstate(all="ignore"):
            out = Evaluator().call_fusion(fusion, args)
    except (InterpreterError, NotImplementedError) as exc:
        return Outcome(fusion.name, kind, "skip", "interpreter: " + _short(exc))
    except Exception as exc:  # noqa: BLE001
        return Outcome(fusion.name, kind, "skip", "interpreter crashed: " + _short(exc))
    want = [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]
    try:
        kernel = emit_kernel(fusion)
    except Exception as exc:  # noqa: BLE001
        return Outcome(fusion.name, kind, "fail", "emit: " + _short(exc))
    try:
        got = _run_kernel(fusion, args, kernel, platform)
    except Exception as exc:  # noqa: BLE001
        return Outcome(fusion.name, kind, "fail", f"{platform}: " + _short(exc))
    for k, (g, w, s) in enumerate(zip(got, want, output_shapes(fusion))):
        try:
            assert_close(g, w, s, None, f"output {k}")
        except AssertionError as exc:
            return Outcome(fusion.name, kind, "fail", "mismatch: " + str(exc).splitlines()[0][:160])
    if ptx:
        try:
            link_ptx(kernel)
        except Exception as exc:  # noqa: BLE001
            return Outcome(fusion.name, kind, "fail", "ptx: " + _short(exc))
    return Outcome(fusion.name, kind, "pass")


def sweep_module(text: str, ptx: bool = False, time_limit: int = TIME_LIMIT_S,
                 platform: str = "host") -> list[Outcome]:
    """Outcomes of every fusion of one module ([] if it does not parse or needs no kernel)."""
    from hlo_common.hlo.parser import parse_module

    from hlo_common.hlo.verifier import verify_module

    try:
        module = parse_module(text)
    except Exception:  # noqa: BLE001 - modules that do not parse are other tiers' business
        return []
    try:
        verify_module(module, allow_mixed_precision=True)
        fusions = collect_fusions(module)
    except Exception as exc:  # noqa: BLE001
        return [Outcome("(module)", "?", "skip", "module: " + _short(exc)[:80])]

    def alarm(signum, frame):
        raise SweepTimeout()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(time_limit)
    outcomes: list[Outcome] = []
    try:
        for k, fusion in enumerate(fusions):
            outcomes.append(sweep_fusion(fusion, seed=k, ptx=ptx, platform=platform))
    except SweepTimeout:
        outcomes.append(Outcome("(rest)", "?", "fail", f"timeout after {time_limit} s"))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return outcomes


def module_reason(outcomes: list[Outcome]) -> str | None:
    """One line for a failing module (its first failures), None when it passes."""
    fails = [o for o in outcomes if o.status == "fail"]
    if not fails:
        return None
    reasons = list(dict.fromkeys(f"{o.kind}: {o.reason}" for o in fails))
    return " | ".join(reasons[:2]) + (f" (+{len(reasons) - 2} more)" if len(reasons) > 2 else "")


# -- pytest ------------------------------------------------------------------------------------------
def _modules(ids=None) -> list[tuple[str, str]]:
    mods = corpus_modules()
    return [(mid, text) for mid, text in mods if ids is None or mid in ids]


@pytest.mark.parametrize("mid", DEFAULT_MODULES)
def test_sweep_default(mid: str) -> None:
    if not corpus_available():
        pytest.skip("corpus not found")
    ((_, text),) = _modules({mid})
    outcomes = sweep_module(text, ptx=False)
    assert outcomes and all(o.status == "pass" for o in outcomes), outcomes


def _all_ids() -> list[str]:
    return [mid for mid, _ in corpus_modules()] if corpus_available() else []


@pytest.mark.slow
@pytest.mark.parametrize("mid", _all_ids())
def test_sweep_corpus(mid: str) -> None:
    ((_, text),) = _modules({mid})
    reason = module_reason(sweep_module(text))
    listed = expected_failures(TIER).get(mid)
    if listed is None:
        assert reason is None, reason
    else:
        assert reason is not None, f"{mid} passes now: remove it from {EXPECTED_FAILURES.name}"


# -- the script --------------------------------------------------------------------------------------
def _worker(item):
    mid, text, ptx, platform = item
    t = time.time()
    return mid, sweep_module(text, ptx=ptx, platform=platform), time.time() - t


def main(argv: list[str]) -> int:
    import multiprocessing

    ptx = "--ptx" in argv
    jobs = int(argv[argv.index("--jobs") + 1]) if "--jobs" in argv else 1
    only = argv[argv.index("--only") + 1] if "--only" in argv else ""
    platform = argv[argv.index("--platform") + 1] if "--platform" in argv else "host"
    items = [(mid, text, ptx, platform) for mid, text in corpus_modules() if re.search(only, mid)]
    results: dict[str, list[Outcome]] = {}
    slow = []
    with multiprocessing.Pool(jobs, maxtasksperchild=20) as pool:
        for mid, outcomes, seconds in pool.imap_unordered(_worker, items):
            results[mid] = outcomes
            if "--progress" in argv:
                print(f"{seconds:6.1f}s {mid}: {module_reason(outcomes) or 'ok'}", file=sys.stderr, flush=True)
            if seconds > 20:
                slow.append((round(seconds), mid))
    table: Counter = Counter()
    reasons: Counter = Counter()
    for outcomes in results.values():
        for o in outcomes:
            table[(o.kind, o.status)] += 1
            if o.status != "pass":
                reasons[(o.status, o.kind, o.reason)] += 1
    kinds = sorted({k for k, _ in table})
    print(f"{'kind':32} {'pass':>6} {'fail':>6} {'skip':>6}")
    for kind in kinds:
        print(f"{kind:32} {table[(kind, 'pass')]:6} {table[(kind, 'fail')]:6} {table[(kind, 'skip')]:6}")
    print(f"{'total':32} {sum(v for (k, s), v in table.items() if s == 'pass'):6} "
          f"{sum(v for (k, s), v in table.items() if s == 'fail'):6} "
          f"{sum(v for (k, s), v in table.items() if s == 'skip'):6}")
    failing = {mid: module_reason(o) for mid, o in results.items() if module_reason(o)}
    print(f"\nmodules with kernels: {sum(1 for o in results.values() if o)}, failing: {len(failing)}")
    print("\nreasons (count, status, kind, reason):")
    for (status, kind, reason), n in reasons.most_common():
        print(f"{n:5} {status:5} {kind:14} {reason}")
    print("\nslowest modules:", sorted(slow, reverse=True)[:10])
    if "--verbose" in argv:
        for mid, reason in sorted(failing.items()):
            print(f"  {mid}: {reason}")
    if "--update" in argv:
        _update_expected(failing)
    return 0


def _update_expected(failing: dict[str, str]) -> None:
    lines = [ln for ln in EXPECTED_FAILURES.read_text().splitlines() if not ln.startswith(TIER + " ")]
    lines += [f"{TIER} {mid} {reason}" for mid, reason in sorted(failing.items())]
    EXPECTED_FAILURES.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
