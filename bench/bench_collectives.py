"""hlo-run's host platform on several devices: time per collective thunk against mpi4py called
directly on buffers of the same size (issue 16 item 7; the goal: within 10 % from 1 MB, i.e.
hlo-run adds no copies).

    .venv/bin/python bench/bench_collectives.py [--devices 2,4,8] [--kinds all-reduce,...]

For each device count N this starts `mpiexec -n N` on itself (`--worker`). Rank 0 compiles, with
hlo-codegen in-process, a module holding one collective of each kind and size (the size is the
bytes each device sends: its operand), every rank loads it onto the host platform's MPI device
(`hlo_run.mpi_runtime`), and its collective thunk runs as the executable runs it
(`MpiHostDevice.collective`: the watchdog, the views of the buffers, the MPI call) on buffers
that stay put, against the same MPI call made by mpi4py on numpy buffers of the same sizes; both
results must agree (a collective-broadcast's root writes its operand into its own result buffer
on both sides, as ncclBroadcast does with distinct send and receive buffers: mpi4py's side copies
then broadcasts). Each side starts after a barrier; each figure is rank 0's median over the
repetitions. f32 data, sum for the reductions. (A whole run also allocates its buffers afresh;
that is the run's cost, not the collective's.) A case whose buffers would take more than
--max-rank-mb per rank is skipped (`-`).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
         "collective-broadcast")
SIZES = (4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20)
ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"


def module_text(kind: str, size: int, n: int) -> tuple[str, int]:
    """(HLO of one collective whose operand is `size` bytes of f32 on N devices, result bytes)."""
    e = size // 4
    group = "{" + ",".join(map(str, range(n))) + "}"
    ids = f"channel_id=1, replica_groups={{{group}}}"
    flat = ids + ", use_global_device_ids=true"
    body, out = {
        "all-reduce": (f"f32[{e}] all-reduce(p), {flat}, to_apply=add", e),
        "all-gather": (f"f32[{e * n}] all-gather(p), {flat}, dimensions={{0}}", e * n),
        "reduce-scatter": (f"f32[{e // n}] reduce-scatter(p), {flat}, dimensions={{0}}, to_apply=add",
                           e // n),
        "all-to-all": (f"f32[{e}] all-to-all(p), {ids}, dimensions={{0}}", e),
        "collective-permute": (f"f32[{e}] collective-permute(p), channel_id=1, source_target_pairs={{"
                               + ",".join(f"{{{d},{(d + 1) % n}}}" for d in range(n)) + "}", e),
        "collective-broadcast": (f"f32[{e}] collective-broadcast(p), {ids}", e),
    }[kind]
    text = (f"HloModule bench, num_partitions={n}\n{ADD}ENTRY e {{ p = f32[{e}] parameter(0)\n"
            f" ROOT r = {body} }}\n")
    return text, out * 4


def direct_call(kind: str, comm, src: np.ndarray, dst: np.ndarray):
    """The mpi4py call hlo-run's thunk makes, on numpy buffers."""
    from mpi4py import MPI

    n, me = comm.Get_size(), comm.Get_rank()
    if kind == "all-reduce":
        return lambda: comm.Allreduce(src, dst, MPI.SUM)
    if kind == "all-gather":
        return lambda: comm.Allgather(src, dst)
    if kind == "reduce-scatter":
        return lambda: comm.Reduce_scatter_block(src, dst, MPI.SUM)
    if kind == "all-to-all":
        return lambda: comm.Alltoall(src, dst)
    if kind == "collective-permute":
        return lambda: comm.Sendrecv(src, (me + 1) % n, 0, dst, (me - 1) % n, 0)
    if me == 0:  # the root's result is its operand, in its own buffer (as ncclBroadcast's recvbuff)
        def bcast_root():
            dst[:] = src
            comm.Bcast(dst, root=0)
        return bcast_root
    return lambda: comm.Bcast(dst, root=0)


def worker(kinds: list[str], sizes: list[int], max_rank_bytes: int) -> None:
    from mpi4py import MPI

    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.hlo.parser import parse_module
    from hlo_common.manifest.collective_thunks import CollectiveThunk
    from hlo_common.manifest.manifest import load_manifest
    from hlo_run.mpi_runtime import MpiHostDevice
    from hlo_run.manifest_runtime import ManifestExecutable

    world = MPI.COMM_WORLD
    n, me = world.Get_size(), world.Get_rank()
    comm = world.Dup()
    rows = []
    for kind in kinds:
        for size in sizes:
            text, out_bytes = module_text(kind, size, n)
            if 2 * (size + out_bytes) > max_rank_bytes:
                rows.append((kind, size, None, None))
                continue
            data = None
            if me == 0:
                data = compile_module(parse_module(text), CompileOptions(target="host")).manifest.to_bytes()
            manifest = load_manifest(world.bcast(data, root=0), "bench")
            exe = ManifestExecutable(manifest, MpiHostDevice(world, 600.0), "bench")
            (thunk,) = [t for t in manifest.all_thunks() if isinstance(t, CollectiveThunk)]
            src = np.random.default_rng(me).standard_normal(size // 4).astype(np.float32)
            dst = np.zeros(out_bytes // 4, np.float32)
            mine = np.zeros_like(dst)
            call = direct_call(kind, comm, src, dst)
            pointers = [(src.ctypes.data, mine.ctypes.data)]
            reps = 30 if size <= (1 << 20) else 10 if size <= (16 << 20) else 5
            ours, theirs = [], []
            for r in range(reps + 1):  # the first of each is a warm-up
                world.Barrier()
                t0 = time.perf_counter()
                exe.device.collective(thunk, pointers, "bench")  # what ManifestExecutable runs
                t1 = time.perf_counter()
                world.Barrier()
                t2 = time.perf_counter()
                call()
                t3 = time.perf_counter()
                if r:
                    ours.append(t1 - t0)
                    theirs.append(t3 - t2)
            assert np.array_equal(mine, dst), f"{kind}: hlo-run and mpi4py disagree"
            exe.close()
            rows.append((kind, size, statistics.median(ours), statistics.median(theirs)))
    comm.Free()
    if me == 0:
        for kind, size, a, b in rows:
            figures = "\t".join("-" if x is None else repr(x) for x in (a, b))
            print(f"ROW\t{kind}\t{size}\t{figures}", flush=True)


def _size_text(size: int) -> str:
    return f"{size >> 20} MB" if size >= 1 << 20 else f"{size >> 10} KB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="2,4,8")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="bytes per device")
    ap.add_argument("--max-rank-mb", type=int, default=400)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    kinds, sizes = opts.kinds.split(","), [int(s) for s in opts.sizes.split(",")]
    if opts.worker:
        try:
            worker(kinds, sizes, opts.max_rank_mb << 20)
        except BaseException:  # one rank failing must end the job, not leave the others waiting
            import traceback

            from mpi4py import MPI

            traceback.print_exc()
            sys.stderr.flush()
            MPI.COMM_WORLD.Abort(1)
        return 0
    mpiexec = Path(sys.executable).with_name("mpiexec")
    print(f"{'N':>2}  {'collective':<21}{'size':>7}  {'hlo-run ms':>11}  {'mpi4py ms':>10}  {'ratio':>6}")
    failed = 0
    large: dict[str, list[float]] = {}  # kind -> ratios at >= 1 MB
    for n in (int(x) for x in opts.devices.split(",")):
        cmd = [str(mpiexec), "-n", str(n), sys.executable, __file__, "--worker", "--kinds", opts.kinds,
               "--sizes", opts.sizes, "--max-rank-mb", str(opts.max_rank_mb)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            print(f"N={n}: failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
            failed += 1
            continue
        for line in proc.stdout.splitlines():
            if not line.startswith("ROW\t"):
                continue
            _, kind, size, ours, theirs = line.split("\t")
            if ours == "-":
                print(f"{n:>2}  {kind:<21}{_size_text(int(size)):>7}  {'-':>11}  {'-':>10}  {'-':>6}")
                continue
            a, b = float(ours), float(theirs)
            if int(size) >= 1 << 20:
                large.setdefault(kind, []).append(a / b)
            print(f"{n:>2}  {kind:<21}{_size_text(int(size)):>7}  {a * 1e3:>11.3f}  {b * 1e3:>10.3f}  "
                  f"{a / b:>6.2f}", flush=True)
    for kind, ratios in large.items():
        mean = float(np.exp(np.mean(np.log(ratios))))
        print(f"{kind}: >= 1 MB, geometric mean of {len(ratios)} ratios {mean:.2f} "
              f"(range {min(ratios):.2f}-{max(ratios):.2f})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
