"""Interpreter speed against XLA:CPU on the bench set (a benchmark, never a test).

    .venv/bin/python bench/bench_interpreter.py [--repeats 10] [--profile] [NAME | MODULE.hlo ...]

For each module (default: the bench set, `bench/bench_set.py`; a name picks one of its modules,
a path any module) it makes the arguments once from seed 0 (hlo-run's rule), compiles the module
on XLA:CPU once (in-process, `hlo_run.xla_cpu`, XLA's default flags), then times `--repeats`
runs of each after one warm-up run and prints the best wall times (compilation excluded: the
interpreter's runs share one evaluator, restarted before each run (`Evaluator.restart`), so its
evaluation plans, the interpreter's compilation, are made in the warm-up run), their
ratio (target: the interpreter within 3x of XLA:CPU), the best CPU seconds of the process during
a run (all threads: XLA:CPU runs on every core, the interpreter on one), the largest difference
between the two results, and whether they agree within the testing bounds (docs: f32 1e-4,
bf16/f16 2e-2, an element failing only past both the absolute and the relative bound). The
agreement is judged against XLA:CPU with excess precision off (`allow_excess_precision=False`:
bf16/f16 values rounded after every op, as the interpreter rounds them; the corpus tier's
reference), which is compiled only for modules with 16-bit floats. `--profile` adds the
interpreter's time per opcode (by wrapping the handlers the evaluation plans and elementwise
regions pick, in this process) and the top functions under cProfile.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_set  # noqa: E402  (bench/ is not a package)

WIDE_BOUND, HALF_BOUND = 1e-4, 2e-2  # the testing bounds (f32/f64/complex, 16-bit floats)


def _best_time(fn, repeats: int) -> tuple[float, float, object]:
    """(best wall seconds, best process CPU seconds, last result) over `repeats` runs after a warm-up."""
    result = fn()  # warm-up (plans, caches, page faults)
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus), result


def _max_error(a, b) -> float:
    from hlo_run.compare import flatten_leaves

    errs = [float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)), initial=0.0))
            for x, y in zip(flatten_leaves(a), flatten_leaves(b))]
    return max(errs, default=0.0)


def _bad_elements(actual, expected) -> int | None:
    """Elements outside the testing bounds (None when the results differ in structure)."""
    from hlo_run.compare import compare_arrays, flatten_leaves

    a_leaves, e_leaves = flatten_leaves(actual), flatten_leaves(expected)
    if len(a_leaves) != len(e_leaves):
        return None
    bad = 0
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        bound = HALF_BOUND if e.dtype.itemsize <= 2 and e.dtype.kind not in "biu" else WIDE_BOUND
        leaf = compare_arrays(f"out{i}", a, e, bound, bound)
        if leaf.problem is not None:
            return None
        bad += leaf.mismatches
    return bad


def _float64_distance(value, exact) -> float:
    from hlo_run.compare import flatten_leaves

    return max((float(np.max(np.abs(a.astype(np.float64) - e), initial=0.0))
                for a, e in zip(flatten_leaves(value), flatten_leaves(exact))), default=0.0)


def _agreement(text: str, args, actual, reference) -> str:
    """"yes" within the testing bounds; past them, the rule of design/testing.md for ill-conditioned
    modules: the interpreter's largest distance to a float64 evaluation of the same module (the
    interpreter on the text with every float type made f64) no larger than XLA:CPU's."""
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.hlo.parser import parse_module

    bad = _bad_elements(actual, reference)
    if bad == 0:
        return "yes"
    if bad is None:
        return "no (structure)"
    wide = re.sub(r"\b(bf16|f16|f32)\[", "f64[", text)
    exact = evaluate(parse_module(wide), [a.astype(np.float64) for a in args])
    ours, theirs = _float64_distance(actual, exact), _float64_distance(reference, exact)
    verdict = "yes" if ours <= theirs else "no"
    return f"{verdict} ({bad} el. past bounds; to f64: {ours:.2g} vs XLA {theirs:.2g})"


def _has_half_floats(module) -> bool:
    return any(t.is_float and t.bits <= 16 for c in module.computations for i in c.instructions
               for _, s in i.shape.leaf_shapes() if s.is_array for t in [s.element_type])


def bench_module(path: Path, repeats: int) -> dict:
    from hlo_common.interpreter.evaluator import Evaluator
    from hlo_common.hlo.parser import parse_module
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.xla_cpu import XlaCpuExecutable

    text = path.read_text()
    module = parse_module(text, str(path))
    args = make_fake_arguments(module, 0)
    compiled = XlaCpuExecutable.compile(text)
    xla_s, xla_cpu, expected = _best_time(lambda: compiled.run(args), repeats)
    evaluator = Evaluator()

    def interpret():
        evaluator.restart()
        return evaluator.evaluate(module, args)

    interp_s, interp_cpu, actual = _best_time(interpret, repeats)
    reference = expected
    if _has_half_floats(module):
        reference = XlaCpuExecutable.compile(text, allow_excess_precision=False).run(args)
    names = {m.path: m.name for m in bench_set.BENCH_SET}
    return {"module": names.get(path.resolve(), path.stem), "elements": bench_set.largest_array(module),
            "interpreter": interp_s, "xla": xla_s, "ratio": interp_s / xla_s, "interpreter_cpu": interp_cpu,
            "xla_cpu": xla_cpu,
            "max_err": _max_error(actual, expected), "agrees": _agreement(text, args, actual, reference),
            "module_obj": module, "args": args}


def profile_by_opcode(module, args) -> list[tuple[str, int, float]]:
    """(opcode, calls, seconds) of one interpreter run, by wrapping the handler every plan step and
    every elementwise-region member gets (a region step itself is listed as `region`; region
    members run on the interpreter's threads, so their times overlap; members compiled into one
    loop, `region_jit`, are listed together as `compiled run`)."""
    from hlo_common.interpreter import evaluator, region_jit, regions
    from hlo_common.interpreter.evaluator import evaluate

    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])

    def timed(opcode, fn):
        def run(*a):
            start = time.perf_counter()
            try:
                return fn(*a)
            finally:
                totals[opcode][0] += 1
                totals[opcode][1] += time.perf_counter() - start
        return run

    plan_handler, member_call, run_call = evaluator._plan_handler, regions._member_call, region_jit.Bound.call
    evaluator._plan_handler = lambda instr: timed(instr.opcode, plan_handler(instr))
    regions._member_call = lambda instr, kernel: timed(instr.opcode, member_call(instr, kernel))
    timed_run = timed("compiled run", run_call)
    region_jit.Bound.call = lambda self, *a: timed_run(self, *a)
    try:
        evaluate(module, args)
    finally:
        evaluator._plan_handler, regions._member_call = plan_handler, member_call
        region_jit.Bound.call = run_call
    return sorted(((op, n, s) for op, (n, s) in totals.items()), key=lambda r: -r[2])


def print_profile(row: dict) -> None:
    print(f"\n## {row['module']}: interpreter time per opcode (one run)")
    print(f"{'opcode':<24} {'calls':>6} {'seconds':>9}")
    for op, n, s in profile_by_opcode(row["module_obj"], row["args"])[:12]:
        print(f"{op:<24} {n:>6} {s:>9.3f}")
    from hlo_common.interpreter.evaluator import evaluate

    prof = cProfile.Profile()
    prof.enable()
    evaluate(row["module_obj"], row["args"])
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
    print("\ncProfile, by own time:")
    print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))


def _paths(names: list[str]) -> list[Path]:
    """The bench set, or the named members / module files given on the command line."""
    if not names:
        return bench_set.paths()
    by_name = {m.name: m.path for m in bench_set.BENCH_SET}
    return [by_name.get(n) or Path(n) for n in names]


def print_table(rows: list[dict]) -> None:
    print(f"{'module':<20} {'elements':>11} {'interp s':>9} {'XLA:CPU s':>10} {'ratio':>7} "
          f"{'interp cpu s':>13} {'XLA cpu s':>10} {'max |diff|':>11}  agrees")
    for r in rows:
        print(f"{r['module']:<20} {r['elements']:>11,} {r['interpreter']:>9.4f} {r['xla']:>10.4f} "
              f"{r['ratio']:>6.2f}x {r['interpreter_cpu']:>13.4f} {r['xla_cpu']:>10.4f} "
              f"{r['max_err']:>11.3g}  {r['agrees']}")


def _print_setting() -> None:
    """What the figures depend on: the interpreter's threads and numpy's BLAS kernels."""
    from hlo_common.interpreter import blas, narrow_jit, parallel

    core = blas.core_name() or "not OpenBLAS"
    compiled = narrow_jit.available()
    print(f"interpreter threads: {parallel.thread_count()} (set {parallel.ENV_THREADS}); numpy's OpenBLAS "
          f"kernels: {core} (OPENBLAS_CORETYPE picks them); bf16 rounding and region runs: "
          f"{'compiled (narrow_jit, region_jit)' if compiled else 'numpy (no usable llvmlite)'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="interpreter vs XLA:CPU wall time on the bench set")
    ap.add_argument("modules", nargs="*", help="bench set names or module files (default: the set)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--profile", action="store_true")
    opts = ap.parse_args(argv)
    paths = _paths(opts.modules)
    rows = []
    for path in paths:
        try:
            rows.append(bench_module(path, opts.repeats))
        except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
            print(f"{path.name}: failed: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
    print_table(rows)
    _print_setting()
    if opts.profile:
        for r in rows:
            print_profile(r)
    return 0 if len(rows) == len(paths) else 1


if __name__ == "__main__":
    sys.exit(main())
