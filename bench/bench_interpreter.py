"""Interpreter speed against XLA:CPU on the bundled example modules (a benchmark, never a test).

    .venv/bin/python bench/bench_interpreter.py [--repeats 3] [--profile] [MODULE.hlo ...]

For each module (default: testdata/gelu.hlo and testdata/transformer_layer.hlo) it makes the
arguments once from seed 0 (hlo-run's rule), compiles the module on XLA:CPU once, then times
`--repeats` runs of each after one warm-up run and prints the median wall times, their ratio
(target: the interpreter within 5x of XLA:CPU), the median CPU seconds of the process during a
run (all threads: on a shared machine wall time waits for cores, CPU time does not) and the
largest difference between the two results. `--profile` adds the interpreter's time per opcode
(by wrapping the handlers the evaluation plans and elementwise regions pick, in this process) and
the top functions under cProfile.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODULES = [ROOT / "testdata" / "gelu.hlo", ROOT / "testdata" / "transformer_layer.hlo"]


def _median_time(fn, repeats: int) -> tuple[float, float, object]:
    """(median wall seconds, median process CPU seconds, last result) over `repeats` runs."""
    result = fn()  # warm-up (plans, caches, page faults)
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def _max_error(a, b) -> float:
    from hlo_run.compare import flatten_leaves

    errs = [float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)), initial=0.0))
            for x, y in zip(flatten_leaves(a), flatten_leaves(b))]
    return max(errs, default=0.0)


def bench_module(path: Path, repeats: int) -> dict:
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.hlo.parser import parse_module
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.xla_cpu import XlaCpuExecutable

    text = path.read_text()
    module = parse_module(text, str(path))
    args = make_fake_arguments(module, 0)
    compiled = XlaCpuExecutable.compile(text)
    xla_s, xla_cpu, expected = _median_time(lambda: compiled.run(args), repeats)
    interp_s, interp_cpu, actual = _median_time(lambda: evaluate(module, args), repeats)
    return {"module": path.name, "interpreter": interp_s, "xla": xla_s, "ratio": interp_s / xla_s,
            "interpreter_cpu": interp_cpu, "xla_cpu": xla_cpu,
            "max_err": _max_error(actual, expected), "module_obj": module, "args": args}


def profile_by_opcode(module, args) -> list[tuple[str, int, float]]:
    """(opcode, calls, seconds) of one interpreter run, by wrapping the handler every plan step and
    every elementwise-region member gets (a region step itself is listed as `region`)."""
    from hlo_common.interpreter import evaluator, regions
    from hlo_common.interpreter.evaluator import evaluate

    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])

    def timed_choice(choose):
        def choose_timed(instr):
            fn = choose(instr)

            def timed(instr, operands, ev):
                start = time.perf_counter()
                try:
                    return fn(instr, operands, ev)
                finally:
                    totals[instr.opcode][0] += 1
                    totals[instr.opcode][1] += time.perf_counter() - start
            return timed
        return choose_timed

    plan_handler, member_handler = evaluator._plan_handler, regions._member_handler
    evaluator._plan_handler = timed_choice(plan_handler)
    regions._member_handler = timed_choice(member_handler)
    try:
        evaluate(module, args)
    finally:
        evaluator._plan_handler, regions._member_handler = plan_handler, member_handler
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="interpreter vs XLA:CPU wall time")
    ap.add_argument("modules", nargs="*", type=Path, default=DEFAULT_MODULES)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    opts = ap.parse_args(argv)
    rows = []
    for path in opts.modules:
        try:
            rows.append(bench_module(path, opts.repeats))
        except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
            print(f"{path.name}: failed: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
    print(f"{'module':<24} {'interpreter s':>14} {'XLA:CPU s':>10} {'ratio':>7} {'interp cpu s':>13} "
          f"{'XLA cpu s':>10} {'max |diff|':>11}")
    for r in rows:
        print(f"{r['module']:<24} {r['interpreter']:>14.3f} {r['xla']:>10.3f} {r['ratio']:>6.1f}x "
              f"{r['interpreter_cpu']:>13.3f} {r['xla_cpu']:>10.3f} {r['max_err']:>11.3g}")
    if opts.profile:
        for r in rows:
            print_profile(r)
    return 0 if len(rows) == len(opts.modules) else 1


if __name__ == "__main__":
    sys.exit(main())
