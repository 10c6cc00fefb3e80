"""Host-backend speed against the interpreter and XLA:CPU on the bundled examples (a benchmark).

    .venv/bin/python bench/bench_host.py [--repeats 5] [--threads N] [--profile] [MODULE.hlo ...]

For each module (default: the bench set, `bench/bench_set.py`) it runs the pipe the user runs,

    hlo-opt m.hlo | hlo-codegen --target host | hlo-run --platform host

with the two compilers as subprocesses (their wall and user-CPU seconds are printed), loads the
manifest into hlo-run's host platform in this process (the one-time JIT compile, timed), makes
the arguments once from seed 0 (hlo-run's rule) and times the host run, the interpreter (on the
original module, as bench_interpreter.py does) and XLA:CPU (`hlo_run.xla_cpu`, compiled once) on
the same inputs: one warm-up run each, then the best wall time of `--repeats` runs, the host's
and XLA:CPU's alternating (`timed_together`: a shared machine's drift meets both). With IREE
installed (`bench/iree_cpu.py`, a bench-only dependency) a third table adds IREE's llvm-cpu
backend on the same module and inputs. Host times
exclude compilation. `user` columns are the least CPU seconds of a run (all threads of this
process, user and system), which are less noisy than wall time on a shared machine; a multi-threaded run can use
more CPU than wall time. `--profile` prints the host run's slowest thunks. The first table sets the same pipe
without hlo-opt's fusion passes (`UNFUSED_FLAGS`: every op its own kernel) against the full one:
kernel and GEMM launches (loop bodies once) and host times of both, and each against XLA:CPU.
`--cudnn` times the convolution modules as XLA:GPU optimizes them (`NAME.xla_gpu.hlo`: XLA's
`__cudnn$conv*` calls, already scheduled, so hlo-opt passes them through and hlo-codegen's
cudnn-conv-fallback lowers them) against XLA:CPU on the jax form `NAME.hlo` beside each.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import bench_set  # noqa: E402  (bench/ is not a package)
import iree_cpu  # noqa: E402

DEFAULT_MODULES = bench_set.paths()
# hlo-opt flags of the "unfused" variant: the gpu pipeline without its fusion passes (every op then
# runs as its own wrapped_* kernel, as before fusion was written).
UNFUSED_FLAGS = ["--disable-pass", "priority-fusion", "--disable-pass", "multi_output_fusion",
                 "--disable-pass", "normalization-fusion"]
TOOLS = Path(sys.executable).parent


def _user(who: int | None = None) -> float:
    """CPU seconds so far: this process's (all its threads, user and system: clock_gettime's
    process clock, to the nanosecond, where getrusage counted whole scheduler ticks on some
    machines and read 0 for a 1 ms run) or, with RUSAGE_CHILDREN, its finished children's user time."""
    if who is None:
        return time.process_time()
    return resource.getrusage(who).ru_utime


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """(best wall seconds, least user CPU seconds, last result) of `repeats` runs after a warm-up:
    the best of several runs (issue 21's measure), which on a shared machine is the run the
    other processes disturbed least."""
    return timed_together({"run": fn}, repeats)["run"]


def timed_together(fns: dict[str, object], repeats: int) -> dict[str, tuple[float, float, object]]:
    """`timed` of several functions, their runs alternating (a warm-up each, then one run of each
    in turn, `repeats` rounds): on a shared virtual machine whose speed drifts for seconds at a
    time (2-core Zen 3, 2026-11-29: the same kernel 9.4 or 14.5 ms a run, by the minute), the host
    and XLA:CPU then meet the same drift instead of one timing a slow minute and the other a fast
    one."""
    results = {name: fn() for name, fn in fns.items()}
    walls: dict[str, list[float]] = {name: [] for name in fns}
    users: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            u, start = _user(), time.perf_counter()
            results[name] = fn()
            walls[name].append(time.perf_counter() - start)
            users[name].append(_user() - u)
    return {name: (min(walls[name]), min(users[name]), results[name]) for name in fns}


def run_tool(args: list[str], data: bytes) -> tuple[bytes, float, float]:
    """(stdout, wall s, user CPU s) of one of the project's tools fed `data` on stdin."""
    tool = TOOLS / args[0]
    module = f"hlo_{args[0][4:]}.cli"
    cmd = [str(tool)] + args[1:] if tool.is_file() else [sys.executable, "-m", module] + args[1:]
    u, start = _user(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, input=data, capture_output=True)
    wall, user = time.perf_counter() - start, _user(resource.RUSAGE_CHILDREN) - u
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed: {proc.stderr.decode(errors='replace').strip()[-400:]}")
    return proc.stdout, wall, user


def launches(thunk) -> int:
    """Kernel and GEMM launches in a thunk tree, loop bodies and branches counted once (the rule of
    bench/kernel_stats.py)."""
    if thunk.kind in ("kKernel", "kGemm"):
        return 1
    children = list(getattr(thunk, "thunks", ()))
    children += [getattr(thunk, k) for k in ("condition", "body") if hasattr(thunk, k)]
    children += list(getattr(thunk, "branches", ()))
    return sum(launches(c) for c in children)


def max_error(a, b) -> float:
    from hlo_run.compare import flatten_leaves

    errs = [float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)), initial=0.0))
            for x, y in zip(flatten_leaves(a), flatten_leaves(b))]
    return max(errs, default=0.0)


def bench_module(path: Path, repeats: int) -> dict:
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.hlo.parser import parse_module
    from hlo_run.backends.host import HostBackend
    from hlo_run.inputs import make_fake_arguments
    from hlo_run.manifest_runtime import manifest_program
    from hlo_run.xla_cpu import XlaCpuExecutable

    text = path.read_text()
    row: dict = {"module": path.name.replace(".xla_gpu.hlo", "[cudnn]")}
    module = parse_module(text, str(path))
    # XLA:GPU's optimized form (cuDNN calls XLA:CPU cannot run): XLA:CPU runs the jax form beside it
    reference = path.with_name(path.name.replace(".xla_gpu.hlo", ".hlo")).read_text()
    args = make_fake_arguments(module, 0)
    codegen = ["hlo-codegen", "--target", "host", "-"]
    # The unfused variant first (kernels, host time), then the real pipeline, whose figures fill
    # the main columns.
    optimized, _, _ = run_tool(["hlo-opt", "-"] + UNFUSED_FLAGS, text.encode())
    manifest, _, _ = run_tool(codegen, optimized)
    program = manifest_program(manifest.decode(), path.name)
    row["kernels_unfused"] = launches(program.manifest.thunks)
    exe = HostBackend().load(program)
    row["unfused_s"], row["unfused_user"], _ = timed(lambda: exe.run(args), repeats)
    optimized, row["opt_s"], row["opt_user"] = run_tool(["hlo-opt", "-"], text.encode())
    manifest, row["codegen_s"], row["codegen_user"] = run_tool(codegen, optimized)
    program = manifest_program(manifest.decode(), path.name)
    row["kernels"] = launches(program.manifest.thunks)
    u, start = _user(), time.perf_counter()
    exe = HostBackend().load(program)
    row["jit_s"], row["jit_user"] = time.perf_counter() - start, _user() - u
    row["xla_s"] = row["xla_user"] = row["err_xla"] = float("nan")
    runs = {"host": lambda: exe.run(args)}
    try:
        xla = XlaCpuExecutable.compile(reference)
        runs["xla"] = lambda: xla.run(args)
    except Exception as exc:  # noqa: BLE001 - no jax, or a jax that rejects the module: n/a
        print(f"{path.name}: XLA:CPU failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
              file=sys.stderr)
    together = timed_together(runs, repeats)  # host and XLA:CPU alternate
    row["host_s"], row["host_user"], host = together["host"]
    row["profile"] = exe.profile()
    if "xla" in together:
        row["xla_s"], row["xla_user"], xla_out = together["xla"]
        row["err_xla"] = max_error(host, xla_out)
    row["interp_s"], row["interp_user"], expected = timed(lambda: evaluate(module, args), repeats)
    row["err_interp"] = max_error(host, expected)
    row["iree_s"] = row["iree_user"] = float("nan")
    if iree_cpu.available():
        try:
            iree = iree_cpu.IreeCpuExecutable.compile(reference)
            row["iree_s"], row["iree_user"], _ = timed(lambda: iree.run(args), repeats)
        except Exception as exc:  # noqa: BLE001 - IREE rejects the module: n/a
            print(f"{path.name}: IREE failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                  file=sys.stderr)
    return row


def print_tables(rows: list[dict]) -> None:
    print("fusion: the host run of the gpu pipeline without its fusion passes against the full one")
    print(f"{'module':<22} {'kernels unfused':>16} {'kernels fused':>14} {'unfused s':>10} {'fused s':>8} "
          f"{'speed-up':>9} {'unfused/XLA':>12} {'fused/XLA':>10}")
    for r in rows:
        print(f"{r['module']:<22} {r['kernels_unfused']:>16} {r['kernels']:>14} {r['unfused_s']:>10.3f} "
              f"{r['host_s']:>8.3f} {r['unfused_s'] / r['host_s']:>8.2f}x {r['unfused_s'] / r['xla_s']:>11.1f}x "
              f"{r['host_s'] / r['xla_s']:>9.1f}x")
    print()
    print(f"{'module':<22} {'host ms':>8} {'interp ms':>9} {'XLA:CPU ms':>10} {'host/interp':>12} "
          f"{'host/XLA':>9} {'JIT s':>7} {'kernels':>8} {'|host-interp|':>14} {'|host-XLA|':>11}")
    for r in rows:
        print(f"{r['module']:<22} {r['host_s'] * 1e3:>8.2f} {r['interp_s'] * 1e3:>9.2f} "
              f"{r['xla_s'] * 1e3:>10.2f} "
              f"{r['host_s'] / r['interp_s']:>11.2f}x {r['host_s'] / r['xla_s']:>8.1f}x {r['jit_s']:>7.2f} "
              f"{r['kernels']:>8} {r['err_interp']:>14.3g} {r['err_xla']:>11.3g}")
    if any(r["iree_s"] == r["iree_s"] for r in rows):  # IREE installed (bench/iree_cpu.py)
        print(f"\nIREE (llvm-cpu, local-task) on the same inputs\n{'module':<22} {'host ms':>8} "
              f"{'XLA:CPU ms':>10} {'IREE ms':>8} {'host/XLA':>9} {'IREE/XLA':>9} {'host/IREE':>10}")
        for r in rows:
            print(f"{r['module']:<22} {r['host_s'] * 1e3:>8.2f} {r['xla_s'] * 1e3:>10.2f} "
                  f"{r['iree_s'] * 1e3:>8.2f} {r['host_s'] / r['xla_s']:>8.2f}x "
                  f"{r['iree_s'] / r['xla_s']:>8.2f}x {r['host_s'] / r['iree_s']:>9.2f}x")
    print("\nuser CPU ms per run; compile steps once, in seconds")
    print(f"{'module':<22} {'host ms':>8} {'interp ms':>9} {'XLA ms':>10} {'JIT s':>7} {'hlo-opt s':>9} "
          f"{'hlo-codegen':>12} {'opt wall':>9} {'codegen wall':>13}")
    for r in rows:
        print(f"{r['module']:<22} {r['host_user'] * 1e3:>8.2f} {r['interp_user'] * 1e3:>9.2f} "
              f"{r['xla_user'] * 1e3:>10.2f} {r['jit_user']:>7.2f} {r['opt_user']:>9.2f} "
              f"{r['codegen_user']:>12.2f} {r['opt_s']:>9.2f} {r['codegen_s']:>13.2f}")


def print_profile(row: dict, top: int = 10) -> None:
    print(f"\n## {row['module']}: slowest thunks of the last host run")
    for label, seconds in sorted(row["profile"], key=lambda kv: -kv[1])[:top]:
        print(f"  {label:<40} {seconds * 1e3:>9.2f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="host backend vs interpreter vs XLA:CPU wall time")
    ap.add_argument("modules", nargs="*", type=Path, default=DEFAULT_MODULES)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=None, help="host kernel threads (default: all cores)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--cudnn", action="store_true", help="time the convolution modules as XLA:GPU's "
                    "__cudnn$conv* calls (bench_set.CUDNN_SET) instead of the default set")
    opts = ap.parse_args(argv)
    if opts.cudnn:
        opts.modules = list(bench_set.CUDNN_SET)
    if opts.threads is not None:
        from hlo_run import host_kernel

        host_kernel.DEFAULT_THREADS = opts.threads
    rows = []
    for path in opts.modules:
        try:
            rows.append(bench_module(path, opts.repeats))
        except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
            print(f"{path.name}: failed: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
    print_tables(rows)
    if opts.profile:
        for r in rows:
            print_profile(r)
    return 0 if len(rows) == len(opts.modules) else 1


if __name__ == "__main__":
    sys.exit(main())
