"""hlo-opt's whole `gpu` pipeline on synthetic transformer stacks and the largest corpus modules
(a benchmark, never a test).

    .venv/bin/python bench/bench_pipeline.py [--sizes 2500,5000,10000,20000] [--corpus 3]
                                             [--top 5] [--profile 10000]

For each module it times what `hlo-opt m.hlo` does in-process (parse, verify, the pipeline that
is registered today, verify, print) and prints one table row: instructions, CPU seconds (the
process's, which is what an idle 2-core machine would take as wall time: the pipeline runs on
one thread; wall seconds beside it show how busy this machine is), microseconds per instruction,
and the passes that took the most CPU time (summed over their runs). Then it says
whether the time grows within n log n between consecutive stack sizes (a ratio of times at most
1.3x the ratio of n log n), and whether the ~10k-instruction stack meets the 10 s target.
`--profile N` runs cProfile on the stack nearest N instructions and prints the top functions.
`--adversarial 1000,2000` runs `hlo-opt` (a process each, `--timeout` seconds at most) on the
shapes of `adversarial_shapes.py` (elementwise chains, wide fan-outs, deep call/while/conditional
nesting) and prints wall seconds and peak memory; the chain's target is 20,000 ops in under 10 s
and 1 GB.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import os
import pstats
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from make_transformer_stack import instructions_per_layer, layers_for, transformer_stack  # noqa: E402

TARGET_10K_SECONDS = 10.0
GROWTH_SLACK = 1.3


def _cpu_time_per_pass() -> dict[str, float]:
    """Wrap the pipeline's leaf-pass runner so each pass's process CPU time is summed by name."""
    import hlo_common.hlo_pass.pipeline as pipeline

    totals: dict[str, float] = defaultdict(float)
    original = pipeline.run_leaf_pass

    def timed(p, module, pipeline_name, options):
        start = time.process_time()
        try:
            return original(p, module, pipeline_name, options)
        finally:
            totals[p.name] += time.process_time() - start

    pipeline.run_leaf_pass = timed
    return totals


def run_hlo_opt(text: str, name: str) -> tuple[float, float, int, dict[str, float]]:
    """(CPU seconds, wall seconds, input instruction count, CPU seconds per pass name) for one
    module, as hlo-opt runs it."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module
    from hlo_common.hlo_pass.pipeline import RunOptions, verify
    from hlo_opt.pipelines import build_gpu_pipeline

    per_pass = _cpu_time_per_pass()
    sequence = build_gpu_pipeline()
    start, cpu = time.perf_counter(), time.process_time()
    module = parse_module(text, name)
    count = module.instruction_count()
    module.is_scheduled = False
    verify(module, "input")
    sequence.run_with(module, RunOptions())
    verify(module, "output")
    print_module(module)
    return time.process_time() - cpu, time.perf_counter() - start, count, dict(per_pass)


def largest_corpus_modules(k: int) -> list[tuple[str, str]]:
    if k <= 0:
        return []
    from corpus_lib import corpus_available, corpus_modules

    if not corpus_available():
        return []
    sized = sorted(((text.count(" = "), mid, text) for mid, text in corpus_modules()), reverse=True)
    return [(f"corpus:{mid}", text) for _, mid, text in sized[:k]]


def row(name: str, count: int, seconds: float, wall: float, per_pass: dict[str, float], top: int) -> str:
    worst = sorted(per_pass.items(), key=lambda kv: -kv[1])[:top]
    passes = ", ".join(f"{p} {s:.2f}" for p, s in worst)
    return (f"{name:<40} {count:>7} {seconds:>7.2f} {wall:>7.2f} {1e6 * seconds / max(count, 1):>8.0f}  "
            f"{passes}")


def growth_verdict(points: list[tuple[int, float]]) -> list[str]:
    lines = []
    for (n1, t1), (n2, t2) in zip(points, points[1:]):
        ratio, nlogn = t2 / t1, (n2 * math.log(n2)) / (n1 * math.log(n1))
        exponent = math.log(ratio) / math.log(n2 / n1)
        ok = ratio <= GROWTH_SLACK * nlogn
        lines.append(f"  {n1:>6} -> {n2:>6}: time x{ratio:.2f}, n log n x{nlogn:.2f}, "
                     f"exponent {exponent:.2f}: "
                     f"{'within n log n' if ok else 'FASTER THAN n log n GROWTH'}")
    return lines


def profile(text: str, name: str, lines: int = 30) -> str:
    prof = cProfile.Profile()
    prof.enable()
    run_hlo_opt(text, name)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(lines)
    out.write("\n")
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(lines)
    return out.getvalue()


def adversarial(sizes: list[int], timeout: float) -> None:
    """hlo-opt in a child process on each adversarial shape: wall seconds and peak RSS."""
    import subprocess
    import tempfile

    from adversarial_shapes import deep_nesting, elementwise_chain, wide_fanout

    hlo_opt = Path(sys.executable).with_name("hlo-opt")
    cases = [(f"elementwise chain {n}", elementwise_chain(n)) for n in sizes]
    cases += [(f"wide fan-out {n}", wide_fanout(n)) for n in sizes]
    cases += [(f"deep nesting {d}", deep_nesting(d)) for d in (8, 16, 32, 48)]
    print(f"{'adversarial module':<40} {'wall s':>8} {'cpu s':>8} {'peak MB':>8}  result")
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in cases:
            path = Path(tmp) / "m.hlo"
            path.write_text(text)
            cmd = ["/usr/bin/time", "-f", "%M %U %S", str(hlo_opt), str(path), "-o", str(Path(tmp) / "out.hlo")]
            start = time.perf_counter()
            # its own process group: a timeout must stop hlo-opt, not only /usr/bin/time
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
            try:
                _, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                print(f"{name:<40} {'>' + str(int(timeout)):>8} {'?':>8} {'?':>8}  timed out", flush=True)
                continue
            wall = time.perf_counter() - start
            fields = err.strip().splitlines()[-1].split() if err.strip() else []
            peak = int(fields[0]) / 1024 if len(fields) == 3 else float("nan")
            cpu = float(fields[1]) + float(fields[2]) if len(fields) == 3 else float("nan")
            result = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
            print(f"{name:<40} {wall:>8.2f} {cpu:>8.2f} {peak:>8.0f}  {result}", flush=True)


def spmd(layers: list[int]) -> None:
    """Sharding propagation and the SPMD partitioner on stacks of sharded Megatron MLP layers
    (`bench/spmd_vs_xla.py --scale`), with the growth exponent between consecutive sizes."""
    from spmd_vs_xla import scale

    points = scale(layers)
    for (n0, t0), (n1, t1) in zip(points, points[1:]):
        print(f"growth {n0} -> {n1} instructions: time x{t1 / t0:.2f} for size x{n1 / n0:.2f} "
              f"(exponent {math.log(t1 / t0) / math.log(n1 / n0):.2f}; n log n gives "
              f"{math.log((n1 * math.log(n1)) / (n0 * math.log(n0))) / math.log(n1 / n0):.2f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2500,5000,10000,20000", help="stack sizes in instructions")
    ap.add_argument("--corpus", type=int, default=3, help="also the K largest corpus modules")
    ap.add_argument("--top", type=int, default=4, help="passes shown per module")
    ap.add_argument("--profile", type=int, default=0, help="cProfile the stack of about N instructions")
    ap.add_argument("--adversarial", default="", help="sizes of the adversarial shapes, e.g. 1000,2000")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per adversarial module")
    ap.add_argument("--spmd", default="", help="layers of the sharded MLP stack to partition, e.g. 250,1100 "
                    "(issue 17 item 7: a 10,000-instruction module under 10 s)")
    opts = ap.parse_args()
    if opts.spmd:
        spmd([int(s) for s in opts.spmd.split(",") if s])
        return 0
    if opts.adversarial:
        adversarial([int(s) for s in opts.adversarial.split(",") if s], opts.timeout)
        return 0
    per_layer = instructions_per_layer()
    print(f"{'module':<40} {'instrs':>7} {'cpu s':>7} {'wall s':>7} {'us/instr':>8}  top passes (cpu s)")
    points = []
    for size in [int(s) for s in opts.sizes.split(",") if s]:
        layers = layers_for(size, per_layer)
        seconds, wall, count, per_pass = run_hlo_opt(transformer_stack(layers), f"stack{layers}")
        points.append((count, seconds))
        print(row(f"transformer stack, {layers} layers", count, seconds, wall, per_pass, opts.top),
              flush=True)
    for name, text in largest_corpus_modules(opts.corpus):
        try:
            seconds, wall, count, per_pass = run_hlo_opt(text, name)
        except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
            print(f"{name:<40} failed: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        print(row(name[:40], count, seconds, wall, per_pass, opts.top), flush=True)
    if len(points) > 1:
        print("growth between stack sizes:")
        print("\n".join(growth_verdict(points)))
    near = min(points, key=lambda p: abs(p[0] - 10000), default=None)
    if near is not None:
        verdict = "meets" if near[1] < TARGET_10K_SECONDS else "MISSES"
        print(f"{near[0]}-instruction stack: {near[1]:.2f} CPU s, {verdict} the "
              f"{TARGET_10K_SECONDS:.0f} s target")
    if opts.profile:
        layers = layers_for(opts.profile, per_layer)
        print(profile(transformer_stack(layers), f"stack{layers}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
