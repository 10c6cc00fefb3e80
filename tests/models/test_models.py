"""Real-library tier: models written with flax, equinox, haiku and optax through every stage.

The modules are `testdata/models/*.hlo`, made by `testdata/models/make_modules.py` from the
libraries of the `models` extra (checked in, so this tier needs only jax; a test below keeps them
what the generator makes). Each module, on hlo-run's arguments for seed 0, goes through three
checks, in one test per module so that they share its interpreter run and hlo-opt output:

- `interpreter`: the interpreter against XLA:CPU (excess precision off, so both round bf16 after
  every op), the interpreter tier's bounds: f32 1e-4, 16-bit floats 2e-2, integers exact;
- `host`: `hlo-opt | hlo-codegen --target host | hlo-run --platform host`, in-process stage by
  stage as the tools do it, against the interpreter running the module as written (not the
  manifest's rewritten HLO, so a wrong rewrite that the interpreter would share is caught too),
  with hlo-run's bounds (1e-3, 2e-2 for 16-bit floats);
- `kernels`: `hlo-run --platform host --find-first-mismatch` on that manifest: every thunk's output
  matches the interpreter's on the operands it was given (what the final results may hide);
- `cuda`: `hlo-opt | hlo-codegen --target cuda`, whose PTX nvJitLink links for sm_90;
- `xla_gpu`: XLA:GPU's own optimized module (`testdata/models/xla_gpu/`, made by
  `testdata/xla_gpu_compile.py` for an H100: its fusions, Triton GEMM fusions and cuDNN calls, what
  a user's after-optimizations dump from a GPU run holds) on the interpreter against XLA:CPU;
- `xla_gpu_host`: that module through `hlo-codegen --target host` and the host run, against the
  interpreter on it.

A result leaf outside the bounds is judged as design/testing.md says for ill-conditioned modules
(long scans, deep stacks, bf16 sums): its distance to a float64 evaluation of the same module
(every float type turned into f64, same arguments), maximum and mean, must be no larger than
XLA:CPU's own (the farther of its runs with and without excess precision); twice that for a
module computing in 16-bit floats (`nearer_float64` says why). A check that fails is listed in
`expected_failures.txt` beside this file (`<module> <check>: <reason>`); a listed check that
passes fails, so the list stays true.

    .venv/bin/python tests/models/test_models.py --report [-k NAME]   # the table of the closing note
"""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "testdata" / "models"
EXPECTED = Path(__file__).with_name("expected_failures.txt")
SEED = 0
CHECKS = ("interpreter", "host", "kernels", "cuda", "xla_gpu", "xla_gpu_host")
XLA_GPU = MODULES / "xla_gpu"  # XLA:GPU's optimized modules (testdata/xla_gpu_compile.py, for an H100)
# The interpreter tier's settings for XLA:CPU: the same HLO pipeline and numerics with less time in
# LLVM, and one Eigen thread so that its dots sum in the same order on every machine.
XLA_DEBUG_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_multi_thread_eigen": False}
BOUNDS = {"interpreter": (1e-4, 2e-2), "host": (1e-3, 2e-2)}  # (f32 and wider, 16-bit floats)
_FLOAT_TYPE = re.compile(r"\b(?:f32|bf16|f16)\[")
_SIXTEEN_BIT = re.compile(r"\b(?:bf16|f16)\[")
SIXTEEN_BIT_SPREAD = 2.0


@dataclass
class Outcome:
    ok: bool
    reason: str = ""
    rule: str = "bounds"  # "bounds", or "f64" when a leaf was judged by its distance to float64


def module_names() -> list[str]:
    return sorted(p.stem for p in MODULES.glob("*.hlo"))


def expected_failures() -> dict[tuple[str, str], str]:
    out = {}
    for line in EXPECTED.read_text().splitlines() if EXPECTED.exists() else []:
        if line.strip() and not line.startswith("#"):
            name, check, reason = line.split(None, 2)
            out[(name, check.rstrip(":"))] = reason
    return out


# -- the module, its arguments and its references ------------------------------------------------------
@functools.lru_cache(maxsize=None)
def text(name: str) -> str:
    return (MODULES / f"{name}.hlo").read_text()


@functools.lru_cache(maxsize=None)
def arguments(name: str) -> list:
    """hlo-run's arguments for seed 0, drawn from the module as written (the manifest's module
    gets the same ones)."""
    from hlo_common.hlo.parser import parse_module
    from hlo_run.inputs import make_fake_arguments

    return make_fake_arguments(parse_module(text(name), name), SEED)


@functools.lru_cache(maxsize=None)
def interpreted(name: str):
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.hlo.parser import parse_module

    return evaluate(parse_module(text(name), name), arguments(name))


@functools.lru_cache(maxsize=None)
def xla_cpu(name: str, excess_precision: bool):
    from hlo_run.xla_cpu import XlaCpuExecutable

    exe = XlaCpuExecutable.compile(text(name), allow_excess_precision=excess_precision,
                                   debug_options=XLA_DEBUG_OPTIONS)
    return exe.run(arguments(name))


@functools.lru_cache(maxsize=None)
def float64_reference(name: str) -> list[np.ndarray]:
    """The module with every float type turned into f64, run by the interpreter on the same
    arguments (widened): the yardstick for ill-conditioned results."""
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.hlo.parser import parse_module
    from hlo_run.compare import flatten_leaves

    wide = parse_module(_FLOAT_TYPE.sub("f64[", text(name)), f"{name} (f64)")
    args = [a.astype(np.float64) if np.asarray(a).dtype.kind in "fV" else a for a in arguments(name)]
    return [np.asarray(leaf, np.float64) for leaf in flatten_leaves(evaluate(wide, args))]


# -- judging ----------------------------------------------------------------------------------------------
def judge(name: str, check: str, actual, expected) -> Outcome:
    """Leaf by leaf within BOUNDS[check]; a float leaf outside them is judged against float64."""
    from hlo_run.compare import compare_arrays, flatten_leaves

    actual, expected = flatten_leaves(actual), flatten_leaves(expected)
    if len(actual) != len(expected):
        return Outcome(False, f"{len(actual)} result leaves, the reference has {len(expected)}")
    rule = "bounds"
    for i, (a, e) in enumerate(zip(actual, expected)):
        wide, narrow = BOUNDS[check]
        bound = narrow if e.dtype.itemsize < 4 and e.dtype.kind in "fV" else wide
        leaf = compare_arrays(f"out{i}", np.asarray(a), np.asarray(e), bound, bound)
        if leaf.ok:
            continue
        if leaf.problem is not None or e.dtype.kind not in "fV":
            return Outcome(False, f"{name}: {' '.join(leaf.summary_lines())}")
        verdict = nearer_float64(name, i, np.asarray(a))
        if verdict is not None:
            return Outcome(False, f"out{i} {leaf.summary_lines()[0].strip()}; {verdict}")
        rule = "f64"
    return Outcome(True, rule=rule)


def nearer_float64(name: str, i: int, actual: np.ndarray) -> str | None:
    """None when leaf `i` lies no farther from the float64 evaluation than XLA:CPU's, else why not.

    XLA:CPU's distance is the larger of its two evaluations (with and without excess precision,
    both XLA's own), for the maximum and the mean absolute error alike. A module that computes in
    16-bit floats may lie up to SIXTEEN_BIT_SPREAD times as far: there a rounding in another place
    is a large step, and legitimate evaluations differ by such steps (XLA:CPU rounds a bf16 sum
    after every add where the interpreter rounds once; hlo-opt's simplify-fp-conversions lets a
    softmax divide by its f32 sum where XLA:CPU divides by the bf16 one, as XLA:GPU's optimized
    HLO does too)."""
    from hlo_run.compare import flatten_leaves

    try:
        exact = float64_reference(name)[i]
    except Exception as exc:  # noqa: BLE001 - no float64 yardstick: the bound's verdict stands
        return f"no float64 evaluation ({type(exc).__name__}: {exc})"
    ours = np.abs(actual.astype(np.float64) - exact)
    theirs = [np.abs(np.asarray(flatten_leaves(xla_cpu(name, excess))[i], np.float64) - exact)
              for excess in (False, True)]
    spread = SIXTEEN_BIT_SPREAD if _SIXTEEN_BIT.search(text(name)) else 1.0
    top, mean = spread * max(t.max() for t in theirs), spread * max(t.mean() for t in theirs)
    if np.all(np.isfinite(ours)) and ours.max() <= top and ours.mean() <= mean:
        return None
    return (f"farther from float64 than {spread:g}x XLA:CPU's distance (max {ours.max():.3g} vs {top:.3g}, "
            f"mean {ours.mean():.3g} vs {mean:.3g})")


# -- the checks ------------------------------------------------------------------------------------------
def check_interpreter(name: str) -> Outcome:
    return judge(name, "interpreter", interpreted(name), xla_cpu(name, False))


@functools.lru_cache(maxsize=None)
def optimized_text(name: str) -> str:
    """What `hlo-opt m.hlo` prints (the GPU pipeline, verified before and after)."""
    from hlo_common.hlo_pass.pipeline import RunOptions, verify
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module
    from hlo_opt.pipelines import build_gpu_pipeline

    module = parse_module(text(name), name)
    verify(module, "verification failed in the input")
    build_gpu_pipeline().run_with(module, RunOptions())
    verify(module, "verification failed after pipeline 'gpu'")
    return print_module(module)


@functools.lru_cache(maxsize=None)
def compiled(name: str, target: str) -> bytes:
    """What `hlo-codegen --target T` writes for hlo-opt's output (for cuda: PTX linked by nvJitLink)."""
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.hlo.parser import parse_module

    module = parse_module(optimized_text(name), f"{name} (optimized)")
    return compile_module(module, CompileOptions(target=target)).manifest.to_bytes()


def run_host(name: str, manifest: bytes):
    """What `hlo-run --platform host` computes from the manifest."""
    from hlo_common.manifest.manifest import load_manifest
    from hlo_run.backends.host import HostDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    executable = ManifestExecutable(load_manifest(manifest, f"{name}.json"), HostDevice(), name)
    return executable.run(arguments(name))


def check_host(name: str) -> Outcome:
    return judge(name, "host", run_host(name, compiled(name, "host")), interpreted(name))


def check_kernels(name: str) -> Outcome:
    """The bisector on the host manifest finds no thunk off the interpreter on its own inputs. Its
    final comparison is the host check's (hlo-run's bounds, where an ill-conditioned module's
    rounding drift may end past them: the bisector says so, and the host check judges it)."""
    import tempfile

    from click.testing import CliRunner

    from hlo_run.cli import cli

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.json"
        path.write_bytes(compiled(name, "host"))
        run = CliRunner().invoke(cli, ["--platform", "host", "--find-first-mismatch", "--mismatch-dir",
                                       str(Path(tmp) / "mismatch"), str(path)])
    if run.exit_code == 0 or run.stderr.rstrip().endswith("rounding drift"):
        return Outcome(True)
    return Outcome(False, " ".join((run.stdout.splitlines()[:1] + run.stderr.strip().splitlines()[-1:])))


def check_cuda(name: str) -> Outcome:
    compiled(name, "cuda")
    return Outcome(True)


@functools.lru_cache(maxsize=None)
def xla_gpu_interpreted(name: str):
    from hlo_common.hlo.parser import parse_module
    from hlo_common.interpreter.evaluator import evaluate

    text = (XLA_GPU / f"{name}.hlo").read_text()
    return evaluate(parse_module(text, f"{name} (XLA:GPU)"), arguments(name))


def check_xla_gpu(name: str) -> Outcome:
    """XLA:GPU's own optimized module (its fusions, Triton GEMM fusions, cuDNN convolution calls),
    the after-optimizations dump a user brings from a GPU run, on the interpreter: against XLA:CPU
    on the module as written, with the interpreter check's bounds and rule."""
    return judge(name, "interpreter", xla_gpu_interpreted(name), xla_cpu(name, False))


def check_xla_gpu_host(name: str) -> Outcome:
    """That module through `hlo-codegen --target host | hlo-run --platform host` (hlo-run compiles
    a scheduled module without hlo-opt), against the interpreter on it."""
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.hlo.parser import parse_module

    module = parse_module((XLA_GPU / f"{name}.hlo").read_text(), f"{name} (XLA:GPU)")
    manifest = compile_module(module, CompileOptions(target="host")).manifest.to_bytes()
    return judge(name, "host", run_host(name, manifest), xla_gpu_interpreted(name))


CHECK_FUNCTIONS = {"interpreter": check_interpreter, "host": check_host, "kernels": check_kernels,
                   "cuda": check_cuda, "xla_gpu": check_xla_gpu, "xla_gpu_host": check_xla_gpu_host}


def outcome_of(name: str, check: str) -> Outcome:
    """The check's outcome; an exception is a failure named by its stage's one line."""
    from hlo_common.errors import HloError

    try:
        return CHECK_FUNCTIONS[check](name)
    except Exception as exc:  # noqa: BLE001 - every failure is a listed reason
        line = exc.one_line() if isinstance(exc, HloError) else f"uncaught {type(exc).__name__}: {exc}"
        return Outcome(False, " ".join(str(line).split())[:300])


# -- the tests ----------------------------------------------------------------------------------------------
def _nvjitlink_missing() -> bool:
    try:
        import cuda.bindings.nvjitlink  # noqa: F401
    except ImportError:
        return True
    return False


@pytest.mark.parametrize("name", module_names())
def test_model(name):
    """The checks of one module in one test, so that they share its interpreter run, XLA:CPU
    compilation and hlo-opt output (pytest-xdist would spread separate tests over workers)."""
    checks = [c for c in CHECKS if not (c == "cuda" and _nvjitlink_missing())]
    problems = []
    for check in checks:
        outcome, listed = outcome_of(name, check), expected_failures().get((name, check))
        if not outcome.ok and listed is None:
            problems.append(f"{check} fails: {outcome.reason} (fix it, or list it in {EXPECTED.name})")
        if outcome.ok and listed is not None:
            problems.append(f"{check} now passes but is listed ({listed}); remove its line")
    if problems:
        pytest.fail(f"{name}: " + "; ".join(problems), pytrace=False)
    if len(checks) < len(CHECKS):
        pytest.skip("cuda: PTX linking needs nvJitLink (the ptx extra)")


def test_expected_failures_name_modules_and_checks():
    stale = [key for key in expected_failures() if key[0] not in module_names() or key[1] not in CHECKS]
    assert not stale, f"lines of {EXPECTED.name} for no module or check: {stale}"


def test_every_module_has_its_xla_gpu_module():
    """testdata/models/xla_gpu holds XLA:GPU's module of each model, and nothing else (remake them
    with testdata/xla_gpu_compile.py when the generator changes a module)."""
    assert sorted(p.stem for p in XLA_GPU.glob("*.hlo")) == module_names()


def test_generator_reproduces_the_modules():
    """The checked-in modules are what `make_modules.py --check` makes with the `models` extra."""
    for lib in ("flax", "equinox", "haiku", "optax"):
        pytest.importorskip(lib, reason="the generator needs the `models` extra")
    import subprocess

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    run = subprocess.run([sys.executable, str(MODULES / "make_modules.py"), "--check"],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    listed = subprocess.run([sys.executable, str(MODULES / "make_modules.py"), "--list"],
                            capture_output=True, text=True, env=env)
    assert sorted(listed.stdout.split()) == module_names(), "a .hlo file the generator does not make"


# -- the report: a table of modules x checks, with sizes and times -------------------------------------------
def report_row(name: str) -> dict:
    """Every stage of the checks timed once (each cached stage runs here first)."""
    import time

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from hlo_common.hlo.parser import parse_module
    from kernel_stats import kernel_stats

    times: dict[str, float] = {}

    def timed(key, fn):
        start = time.perf_counter()
        try:
            return fn()
        finally:
            times[key] = time.perf_counter() - start

    module = parse_module(text(name), name)
    row = {"name": name, "instrs": sum(len(c.instructions) for c in module.computations)}
    timed("args", lambda: arguments(name))
    timed("interp", lambda: interpreted(name))
    timed("xla", lambda: xla_cpu(name, False))
    row["interpreter"] = outcome_of(name, "interpreter")
    row["launches"] = timed("opt", lambda: kernel_stats(parse_module(optimized_text(name))).count)
    host = timed("codegen_host", lambda: compiled(name, "host"))
    timed("run_host", lambda: run_host(name, host))
    row["host"] = outcome_of(name, "host")
    row["kernels"] = timed("bisect", lambda: outcome_of(name, "kernels"))
    timed("codegen_cuda", lambda: compiled(name, "cuda"))
    row["cuda"] = outcome_of(name, "cuda")
    row["xla_gpu"] = timed("xla_gpu", lambda: outcome_of(name, "xla_gpu"))
    row["xla_gpu_host"] = timed("xla_gpu_host", lambda: outcome_of(name, "xla_gpu_host"))
    row["times"] = times
    return row


def _verdict(outcome: Outcome) -> str:
    return ("ok" if outcome.rule == "bounds" else "ok f64") if outcome.ok else "FAIL"


REPORT_NOTE = """
instrs: instructions of the module as jax wrote it (all computations). kernels: launches of hlo-opt's
output (kernel_stats; a loop body's once). ok f64: a result outside the bounds, judged by its
distance to a float64 evaluation. by kernel: hlo-run --find-first-mismatch finds no thunk off the
interpreter on its own inputs. Seconds, one process: the interpreter; XLA:CPU compile and run;
hlo-opt; hlo-codegen --target host (LLVM IR); the host run (LLVM JIT and run); the bisector;
hlo-codegen --target cuda (PTX, nvJitLink). XLA:GPU interp / host: XLA:GPU's own optimized module
(testdata/models/xla_gpu) on the interpreter against XLA:CPU, and through hlo-codegen --target host
against the interpreter (seconds: the latter)."""


def print_report(names: list[str]) -> None:
    head = (f"{'module':26} {'instrs':>6} {'kernels':>7}  {'interp vs XLA:CPU':17} {'interp s':>8} "
            f"{'XLA s':>6}  {'host pipe':9} {'opt s':>5} {'host s':>6} {'run s':>5}  {'by kernel':9} "
            f"{'s':>4}  {'cuda PTX':8} {'cuda s':>6}  {'XLA:GPU interp':14} {'XLA:GPU host':12} {'s':>5}")
    print(head)
    print("-" * len(head))
    failures = []
    for name in names:
        r = report_row(name)
        t = r["times"]
        print(f"{name:26} {r['instrs']:6d} {r['launches']:7d}  {_verdict(r['interpreter']):17} "
              f"{t['interp']:8.2f} {t['xla']:6.2f}  {_verdict(r['host']):9} {t['opt']:5.2f} "
              f"{t['codegen_host']:6.2f} {t['run_host']:5.2f}  {_verdict(r['kernels']):9} "
              f"{t['bisect']:4.1f}  {_verdict(r['cuda']):8} {t['codegen_cuda']:6.2f}  "
              f"{_verdict(r['xla_gpu']):14} {_verdict(r['xla_gpu_host']):12} {t['xla_gpu_host']:5.2f}",
              flush=True)
        failures += [f"{name} {c}: {r[c].reason}" for c in CHECKS if not r[c].ok]
    print(REPORT_NOTE)
    for line in failures:
        print(line)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="The real-library tier's table (modules x checks)")
    parser.add_argument("--report", action="store_true", required=True)
    parser.add_argument("-k", dest="only", default="", help="only modules whose name contains this")
    opts = parser.parse_args()
    print_report([n for n in module_names() if opts.only in n])
