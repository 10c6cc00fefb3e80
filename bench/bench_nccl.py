"""NCCL's bus bandwidth through hlo-run's cuda platform (issue 16 item 7, the GPU half; `make
bench-gpu` runs it after the GPU table).

    PYTHONPATH=src python3 bench/bench_nccl.py [--devices N] [--kinds all-reduce,...] [--sizes BYTES,...]

One MPI rank per GPU (`mpiexec -n N`, N = the GPUs here unless --devices says fewer). Rank 0
compiles, with hlo-codegen in-process, a module holding one collective per kind and size
(`bench_collectives.module_text`, f32, sum; on one GPU compiled with --keep-collectives, so that
the collective is an NCCL call on a one-rank communicator and not a copy); every rank runs its
collective thunk as hlo-run's executable does (`NcclCudaDevice.collective`: the NCCL calls on the
thunks' stream, then a synchronize) on device buffers that stay put. Per row: rank 0's median
time over the repetitions after a warm-up, and the algorithm and bus bandwidth as nccl-tests
defines them (its doc/PERFORMANCE.md): algbw = S / t with S the bytes nccl-tests names for the
kind (all-gather: the gathered result; reduce-scatter: the operand; the others: the operand),
busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather, reduce-scatter and
all-to-all, x 1 for broadcast and permute (a send/recv). On one GPU the (n-1)/n factors are 0:
the figures then say what one GPU's NCCL calls cost, not a link's speed. Without a GPU, NCCL's
bindings (the `gpu` extra) or mpiexec (the `mpi` extra) it prints one line saying which and exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
         "collective-broadcast")
SIZES = (1 << 20, 16 << 20, 64 << 20, 256 << 20)


def bus_factor(kind: str, n: int) -> float:
    """nccl-tests' busbw / algbw for `kind` on n ranks."""
    if kind == "all-reduce":
        return 2 * (n - 1) / n
    if kind in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    return 1.0


def algorithm_bytes(kind: str, operand_bytes: int, n: int) -> int:
    """The S of algbw = S / t: nccl-tests counts the gathered result of an all-gather."""
    return operand_bytes * n if kind == "all-gather" else operand_bytes


def missing() -> str | None:
    """Why this machine cannot run the bench, or None."""
    from hlo_common.errors import HloError
    from hlo_run.backends.cuda import CudaBackend
    from hlo_run.nccl_runtime import check_nccl

    reason = CudaBackend.unavailable_reason()
    if reason is not None:
        return f"no usable GPU: {reason}"
    try:
        check_nccl()
    except HloError as exc:
        return exc.one_line()
    if not Path(sys.executable).with_name("mpiexec").is_file():
        return "mpiexec is not installed (the `mpi` extra)"
    return None


def gpu_count() -> int:
    from cuda.bindings import driver

    driver.cuInit(0)
    return int(driver.cuDeviceGetCount()[1])


def worker(kinds: list[str], sizes: list[int]) -> None:
    from mpi4py import MPI

    from bench_collectives import module_text
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.hlo.parser import parse_module
    from hlo_common.manifest.collective_thunks import CollectiveThunk
    from hlo_common.manifest.manifest import load_manifest
    from hlo_run.manifest_runtime import ManifestExecutable
    from hlo_run.nccl_runtime import NcclCudaDevice

    world = MPI.COMM_WORLD
    n, me = world.Get_size(), world.Get_rank()
    device = NcclCudaDevice(world, 600.0)
    for kind in kinds:
        for size in sizes:
            text, out_bytes = module_text(kind, size, n)
            data = None
            if me == 0:
                options = CompileOptions(target="cuda", keep_collectives=n == 1)
                data = compile_module(parse_module(text), options).manifest.to_bytes()
            manifest = load_manifest(world.bcast(data, root=0), "bench")
            if device.nccl is not None:  # the previous module's communicators
                device.nccl.close()
            exe = ManifestExecutable(manifest, device, "bench")  # prepares the communicators
            (thunk,) = [t for t in manifest.all_thunks() if isinstance(t, CollectiveThunk)]
            src, dst = device.allocate(size, 256), device.allocate(max(out_bytes, 4), 256)
            pointers = [(int(src), int(dst))]
            reps = 20 if size <= (16 << 20) else 5
            times = []
            for r in range(reps + 1):  # the first is a warm-up
                world.Barrier()
                t0 = time.perf_counter()
                device.collective(thunk, pointers, "bench")  # the NCCL calls, then a synchronize
                if r:
                    times.append(time.perf_counter() - t0)
            device.release(src)
            device.release(dst)
            if me == 0:
                print(f"ROW\t{kind}\t{size}\t{statistics.median(times)!r}", flush=True)
            del exe
    device.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=None, help="ranks (default: every GPU here)")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="operand bytes per device")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    kinds, sizes = opts.kinds.split(","), [int(s) for s in opts.sizes.split(",")]
    if opts.worker:
        worker(kinds, sizes)
        return 0
    why = missing()
    if why is not None:
        print(f"bench_nccl: skipped: {why}")
        return 0
    n = opts.devices or gpu_count()
    cmd = [str(Path(sys.executable).with_name("mpiexec")), "-n", str(n), sys.executable, __file__,
           "--worker", "--kinds", opts.kinds, "--sizes", opts.sizes]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        print(f"bench_nccl: N={n} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        return 1
    print(f"{'N':>2}  {'collective':<21}{'size':>8}  {'time ms':>9}  {'algbw GB/s':>10}  {'busbw GB/s':>10}")
    for line in proc.stdout.splitlines():
        if line.startswith("ROW\t"):
            _, kind, size, seconds = line.split("\t")
            t, s = float(seconds), int(size)
            algbw = algorithm_bytes(kind, s, n) / t / 1e9
            print(f"{n:>2}  {kind:<21}{s >> 20:>5} MB  {t * 1e3:>9.3f}  {algbw:>10.1f}  "
                  f"{algbw * bus_factor(kind, n):>10.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
