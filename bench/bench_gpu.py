"""Our time against XLA:GPU's on a real GPU, per module of a fixed set (issue 10 item 6; `make
bench-gpu`, see ../shared/design/performance.md "With a GPU").

    PYTHONPATH=src python3 bench/bench_gpu.py [-k SUBSTRING] [--runs 20] [--batch 10] [--out DIR]
                                              [--check-gpu]

Needs only what a GPU machine here has (jax with its CUDA plugin, cuda-bindings, numpy, ...) and
the project's sources on PYTHONPATH. Per module: hlo-opt's gpu pipeline and hlo-codegen --target
cuda in-process; our time is CUDA events around the whole thunk sequence (hlo-run's cuda device,
buffers bound once); XLA:GPU's is the same module text compiled by jax's CUDA backend and run on
the same inputs (host clock to `block_until_ready`); bytes moved come from
`bench/kernel_stats.py` of our optimized module, and a device-to-device copy of half that many
bytes (so it too moves them once read and once written) is timed in the same run. Every figure
is the median of `--runs` samples after a warm-up, a sample being `--batch` runs back to back
divided by their number: the GPU runs them one after the other on its stream, so the host's
dispatch and the final synchronization (tens of microseconds, as long as a small kernel) count
once per batch and XLA's column is not charged them where ours (device events) is not. The
table goes to stdout and to `OUT/gpu-<date>-<card>.txt` (default bench/results/). Without a
usable GPU it prints one line and exits 1 (`--check-gpu` does only that check).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
# jax must not take most of the GPU's memory before hlo-run's device allocates its buffers.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# The fixed set: (label, path relative to the repository root).
MODULES = (
    ("gelu_bf16 (seed)", "testdata/gelu.hlo"),
    ("reduce_row", "testdata/fusion/reduce_row.hlo"),
    ("reduce_row_bf16", "testdata/fusion/reduce_row_bf16.hlo"),
    ("reduce_column", "testdata/fusion/reduce_column.hlo"),
    ("transpose_2d", "testdata/fusion/transpose_2d.hlo"),
    ("transpose_3d_021", "testdata/fusion/transpose_3d_021.hlo"),
    ("transpose_3d_210", "testdata/fusion/transpose_3d_210.hlo"),
    ("softmax_f32", "testdata/fusion/softmax_f32.hlo"),
    ("softmax_bf16", "testdata/fusion/softmax_bf16.hlo"),
    ("layernorm_f32", "testdata/fusion/layernorm_f32.hlo"),
    ("rmsnorm_f32", "testdata/fusion/rmsnorm_f32.hlo"),
    ("rmsnorm_bf16", "testdata/fusion/rmsnorm_bf16.hlo"),
    ("transformer_fwd", "testdata/fusion/transformer_fwd.hlo"),
    # library calls and Triton GEMM fusions (issues 18 and 20; testdata/bench/make_modules.py,
    # testdata/triton/make_modules.py): both sides call cuDNN / run GEMM kernels
    ("gemm_bf16_2048", "testdata/bench/gemm_bf16_2048.hlo"),
    ("gemm_bf16_4096", "testdata/bench/gemm_bf16_4096.hlo"),
    ("gemm_bias_gelu_bf16", "testdata/triton/bias_gelu_bf16.hlo"),
    ("int8_x_bf16_matmul", "testdata/triton/int8_bf16.hlo"),
    ("attention_bf16", "testdata/triton/attention_bf16.hlo"),
    ("resnet50_stage_bf16 (b32)", "testdata/bench/resnet50_stage_bf16.hlo"),
)


@dataclass
class Row:
    label: str
    ours_s: float | None
    xla_s: float | None
    bytes_moved: int
    copy_s: float | None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return self.ours_s / self.xla_s if self.ours_s and self.xla_s else None

    @property
    def gbps(self) -> float | None:
        return self.bytes_moved / self.ours_s / 1e9 if self.ours_s else None

    @property
    def copy_gbps(self) -> float | None:
        return self.bytes_moved / self.copy_s / 1e9 if self.copy_s else None


def gpu_unavailable() -> str | None:
    """Why no GPU run is possible here, in one line, or None."""
    try:
        from hlo_run.backends.cuda import CudaBackend
    except ImportError as e:
        return f"cannot import hlo-run's cuda backend ({e})"
    return CudaBackend.unavailable_reason()


def median_time(fn: Callable[[], float], runs: int, warmup: int = 3) -> float:
    """Median seconds of `fn` (which returns its own measured seconds) after `warmup` calls."""
    for _ in range(warmup):
        fn()
    return statistics.median(fn() for _ in range(runs))


BATCH = 10  # runs back to back per timed sample (--batch)


def load_modules(only: str = "") -> list[tuple[str, Path, str]]:
    """(label, path, text) of the fixed set, filtered by `only` (raises when a file is missing)."""
    out = []
    for label, rel in MODULES:
        if only in label:
            path = ROOT / rel
            out.append((label, path, path.read_text()))
    return out


def random_inputs(module, seed: int = 0) -> list:
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for p in module.entry.parameters:
        s = p.shape
        et = s.element_type
        if et.is_float:
            a = rng.standard_normal(s.dims)
        elif et.is_pred:
            a = rng.integers(0, 2, s.dims)
        else:
            a = rng.integers(0, 8, s.dims)
        out.append(np.asarray(a).astype(et.np_dtype))
    return out


class CudaTimers:
    """The real timers: our manifest on hlo-run's cuda device, XLA through jax, a D2D copy."""

    def __init__(self, runs: int, device=None, target: str = "cuda", batch: int = BATCH):
        """`device`/`target`: another hlo-run device and hlo-codegen target for `ours` (the tests
        use the host device); by default the GPU through hlo-run's CudaDevice."""
        if device is None:
            from hlo_run.backends.cuda import CudaDevice

            device = CudaDevice()
        self.runs = runs
        self.batch = batch
        self.device = device
        self.target = target
        self.arch = "sm_%d%d" % tuple(device.cc) if target == "cuda" else "sm_90"

    def card(self) -> str:
        try:
            import jax

            return jax.devices("cuda")[0].device_kind
        except Exception:  # noqa: BLE001
            return f"gpu-{self.arch}"

    def ours(self, opt_text: str, args: list) -> float:
        from hlo_codegen.compiler import CompileOptions, compile_module
        from hlo_common.hlo.parser import parse_module
        from hlo_run.manifest_runtime import ManifestExecutable

        options = CompileOptions(target=self.target, arch=self.arch)
        result = compile_module(parse_module(opt_text, "bench"), options)
        exe = ManifestExecutable(result.manifest, self.device, "bench")
        # The body of ManifestExecutable.run without upload and download: buffers bound once,
        # then only the thunk sequence between the events.
        buffers, borrowed = exe._allocate(args)
        try:
            exe._bind(buffers, args, borrowed)
            exe.buffers = buffers
            exe.bases = {i: self.device.address(b) for i, b in buffers.items()}
            exe._times = {}
            exe._progress = None

            from hlo_run.manifest_runtime import RNG_INITIAL_STATE

            # hlo-run times every thunk with its own synchronizing events; here one pair of
            # events brackets the whole sequence, so the per-thunk timer is a no-op meanwhile.
            real_timer = self.device.timer

            def once() -> float:
                elapsed = real_timer()
                self.device.timer = lambda: (lambda: 0.0)
                try:
                    for _ in range(self.batch):
                        exe.rng_state = RNG_INITIAL_STATE
                        exe._sequence(exe.manifest.thunks, top=True)
                finally:
                    self.device.timer = real_timer
                return elapsed() / self.batch
            return median_time(once, self.runs)
        finally:
            for i, b in buffers.items():
                if i not in exe.constants and i not in borrowed:
                    self.device.release(b)

    def xla(self, text: str, args: list) -> float:
        return median_time(xla_runner(text, args, "cuda", self.batch), self.runs)

    def copy(self, nbytes: int) -> float:
        size = max(4, nbytes // 2 // 4 * 4)
        src, dst = self.device.allocate(size, 256), self.device.allocate(size, 256)
        try:
            a, b = self.device.address(src), self.device.address(dst)

            def once() -> float:
                elapsed = self.device.timer()
                for _ in range(self.batch):
                    self.device.copy(b, a, size)
                return elapsed() / self.batch
            return median_time(once, self.runs)
        finally:
            self.device.release(src)
            self.device.release(dst)


def xla_runner(text: str, args: list, platform: str, batch: int = 1) -> Callable[[], float]:
    """A function that runs the module text `batch` times back to back with XLA on `platform`
    (jax's backend, the recipe of ../shared/design/xla-reference.md) and returns the seconds until
    the last results are ready, divided by `batch`; `.results()` on it gives the last outputs as
    numpy arrays (tuples flattened)."""
    import jax
    import jax.extend  # noqa: F401  (not imported by `import jax`)
    import numpy as np
    from jax._src.lib import _jax, xla_client as xc

    be = jax.extend.backend.get_backend(platform)
    dev = be.local_devices()[0]
    proto = xc.hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    mlir = _jax.mlir.hlo_to_stablehlo(proto)
    exe = be.compile_and_load(mlir, _jax.DeviceList((dev,)), xc.CompileOptions())
    with jax.enable_x64(True):  # 64-bit inputs stay 64-bit
        dev_args = [jax.device_put(a, dev) for a in args]
    last: list = []

    def once() -> float:
        t0 = time.perf_counter()
        for _ in range(batch):  # queued on one stream; only the last is waited for
            out = exe.execute_sharded(dev_args)
        arrays = [x for o in out.disassemble_into_single_device_arrays() for x in o]
        for x in arrays:
            x.block_until_ready()
        seconds = (time.perf_counter() - t0) / batch
        last[:] = arrays
        return seconds

    once.results = lambda: [np.asarray(x) for x in last]  # type: ignore[attr-defined]
    return once


def measure(label: str, path: Path, text: str, timers) -> Row:
    """One row: hlo-opt in-process, bytes from kernel_stats, then the three timers."""
    from fusion_vs_xla import run_hlo_opt
    from kernel_stats import kernel_stats
    from hlo_common.hlo.parser import parse_module

    opt_text, err, _ = run_hlo_opt(path, [])
    if opt_text is None:
        return Row(label, None, None, 0, None, f"hlo-opt: {err}")
    nbytes = kernel_stats(parse_module(opt_text, path.name)).bytes
    args = random_inputs(parse_module(text, path.name))
    note = []
    ours = xla = None
    try:
        ours = timers.ours(opt_text, args)
    except Exception as e:  # noqa: BLE001  (a failing module is a row, not the end of the run)
        note.append(f"ours: {type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}")
    try:
        xla = timers.xla(text, args)
    except Exception as e:  # noqa: BLE001
        note.append(f"xla: {type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}")
    return Row(label, ours, xla, nbytes, timers.copy(nbytes), "; ".join(note))


def _us(s: float | None) -> str:
    return f"{s * 1e6:10.1f}" if s else f"{'-':>10}"


def format_table(rows: list[Row], card: str, date: str, runs: int, batch: int = BATCH) -> str:
    lines = [f"make bench-gpu: {date}, {card}, median of {runs} samples of {batch} back-to-back runs "
             "each, after warm-up",
             f"{'module':18} {'ours us':>10} {'XLA us':>10} {'ratio':>6} {'MB':>8} {'GB/s':>8} "
             f"{'copy GB/s':>9} {'of copy':>7}  note"]
    for r in rows:
        ratio = f"{r.ratio:6.2f}" if r.ratio else f"{'-':>6}"
        gbps = f"{r.gbps:8.0f}" if r.gbps else f"{'-':>8}"
        cgbps = f"{r.copy_gbps:9.0f}" if r.copy_gbps else f"{'-':>9}"
        share = f"{r.gbps / r.copy_gbps:7.0%}" if r.gbps and r.copy_gbps else f"{'-':>7}"
        lines.append(f"{r.label:18} {_us(r.ours_s)} {_us(r.xla_s)} {ratio} {r.bytes_moved / 1e6:8.1f} "
                     f"{gbps} {cgbps} {share}  {r.note}".rstrip())
    timed = [r for r in rows if r.ratio]
    if timed:
        worst = max(timed, key=lambda r: r.ratio)
        lines.append(f"{len(timed)} of {len(rows)} modules timed on both; slower than XLA: "
                     f"{sum(r.ratio > 1.0 for r in timed)} (worst {worst.label} {worst.ratio:.2f}x)")
    return "\n".join(lines) + "\n"


def result_path(out_dir: Path, date: str, card: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", card).strip("-").lower() or "gpu"
    return out_dir / f"gpu-{date}-{slug}.txt"


def main(argv: list[str] | None = None, timers=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", dest="only", default="", help="only modules whose label contains this")
    ap.add_argument("--runs", type=int, default=20, help="timed runs per measurement (>= 20 for the table)")
    ap.add_argument("--batch", type=int, default=BATCH, help="runs back to back per timed sample")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"), help="directory of the result file")
    ap.add_argument("--check-gpu", action="store_true", help="only check that a GPU is usable")
    opts = ap.parse_args(argv)
    if timers is None:
        reason = gpu_unavailable()
        if reason is not None:
            print(f"bench-gpu: no usable GPU: {reason}", file=sys.stderr)
            return 1
        if opts.check_gpu:
            return 0
    modules = load_modules(opts.only)
    if not modules:
        print(f"bench-gpu: no module of the set matches {opts.only!r}", file=sys.stderr)
        return 1
    sys.path.insert(0, str(ROOT / "bench"))
    timers = timers if timers is not None else CudaTimers(opts.runs, batch=opts.batch)
    date = datetime.date.today().isoformat()
    rows = []
    for label, path, text in modules:
        rows.append(measure(label, path, text, timers))
        print(f"... {label}", file=sys.stderr, flush=True)
    table = format_table(rows, timers.card(), date, opts.runs, opts.batch)
    sys.stdout.write(table)
    out = result_path(Path(opts.out), date, timers.card())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
