"""Compile time a user feels: `hlo-opt m.hlo | hlo-codegen --target cuda` as two processes, cold
and warm, against XLA:GPU's deviceless compile of the same module in a fresh process (a benchmark,
never a test; `bench/bench_codegen.py` runs it by default).

    .venv/bin/python bench/bench_codegen.py [--runs 3] [--tools DIR] [--no-xla] [MODULE.hlo ...]

Modules: a two-instruction module (start-up alone), the JAX transformer layer
(`testdata/transformer_layer.hlo`), the fusion bench's `transformer_fwd` / `transformer_bwd`,
stacks of 2, 4 and 8 of those layers (`bench/make_transformer_stack.py`), and the largest real
model modules of the corpus up to about 1,400 instructions; or the files given. Columns:

    cold   the shell pipe with an empty kernel cache (`HLO_TOOLCHAIN_CACHE_DIR` set to a new
           directory): every kernel is emitted, lowered, compiled to PTX and linked
    warm   the same pipe again on the cache the cold run filled (the second compile of a module)
    XLA    `bench/xla_compile_worker.py` on the module: a fresh Python that imports jax and compiles
           for an H100 without a GPU (`XLA_TARGET_CONFIG` names its GpuTargetConfigProto file)

With `--compare-tools DIR` the pipe of the tools in DIR (another checkout's: the code before a
change) is timed too, in the same rounds: per round the other tools, these tools, then XLA, so
that both see the same load; the table then has their cold and CPU columns beside these.
`--xla-python PY` runs XLA's worker under PY (a Python with jax and its CUDA plugin), by default
this Python.

Each figure is the best wall time of `--runs` runs (the machine is shared: the minimum is the
figure least disturbed by other work); the CPU columns add user and system time of every process
and thread of the cold pipe and of XLA's process (XLA compiles on several threads), a figure that
other work on the machine disturbs less. The tools run with Python's bytecode cache on, as an
installed package has it (`PYTHONDONTWRITEBYTECODE` is dropped; one untimed run writes it).
`--keep-env` leaves the environment as it is (with `PYTHONDONTWRITEBYTECODE=1` and no `__pycache__`
beside the sources, every run compiles the tools' Python afresh). `--tools DIR` times the
`hlo-opt` / `hlo-codegen` found in DIR (another checkout's, to compare).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
TINY = "HloModule tiny\n\nENTRY main {\n  a = f32[4] parameter(0)\n  ROOT b = f32[4] negate(a)\n}\n"
STACK_LAYERS = (2, 4, 8)
# Real models of the corpus (training and inference steps of JAX / Keras programs), largest first.
CORPUS_MODELS = (
    "backends_cpu_benchmarks_hlo__dlrm_keras_jax_f32_train_step.hlo",
    "backends_cpu_benchmarks_hlo__bench_mass_matrix_35.hlo",
    "backends_cpu_benchmarks_hlo__diffrax.b380012920.hlo",
    "backends_cpu_benchmarks_hlo__dlrm_keras_jax_f32_test_step.hlo",
    "backends_cpu_benchmarks_hlo__jax.issue.33666.linx.slow_0100.module_0013.hlo",
)


@dataclass
class Row:
    name: str
    instructions: int
    cold: float | None = None
    warm: float | None = None
    xla: float | None = None
    cold_cpu: float | None = None
    xla_cpu: float | None = None
    note: str = ""
    other_cold: float | None = None  # --compare-tools: the other tools' cold pipe
    other_cpu: float | None = None


def default_modules(workdir: Path) -> list[Path]:
    """The module files of the table (the generated ones written to `workdir`)."""
    sys.path.insert(0, str(BENCH))
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    from corpus_lib import CORPUS_DIR
    from make_transformer_stack import transformer_stack

    tiny = workdir / "two_instructions.hlo"
    tiny.write_text(TINY)
    paths = [tiny, ROOT / "testdata" / "transformer_layer.hlo"]
    paths += [ROOT / "testdata" / "fusion" / f"transformer_{d}.hlo" for d in ("fwd", "bwd")]
    for layers in STACK_LAYERS:
        path = workdir / f"transformer_stack_{layers}.hlo"
        path.write_text(transformer_stack(layers))
        paths.append(path)
    return paths + [CORPUS_DIR / name for name in CORPUS_MODELS if (CORPUS_DIR / name).is_file()]


def instruction_count(path: Path) -> int:
    from hlo_common.hlo.parser import parse_module

    module = parse_module(path.read_text(), path.name)
    return sum(len(comp.instructions) for comp in module.computations)


KEEP_ENV = False  # --keep-env: the tools see this process's environment unchanged
XLA_PYTHON = sys.executable  # --xla-python: the Python that runs XLA's worker


def tool_env(cache_dir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if KEEP_ENV or k != "PYTHONDONTWRITEBYTECODE"}
    if cache_dir is not None:
        env["HLO_TOOLCHAIN_CACHE_DIR"] = str(cache_dir)
    return env


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_pipe(tools: Path, module: Path, out: Path, cache_dir: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of `hlo-opt module | hlo-codegen --target cuda -o out` (two processes)."""
    env = tool_env(cache_dir)
    cpu = _children_cpu()
    start = time.perf_counter()
    opt = subprocess.Popen([str(tools / "hlo-opt"), str(module)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env)
    codegen = subprocess.run([str(tools / "hlo-codegen"), "--target", "cuda", "-o", str(out), "-"],
                             stdin=opt.stdout, capture_output=True, env=env)
    opt.stdout.close()
    opt_err = opt.stderr.read()
    opt.wait()
    elapsed = time.perf_counter() - start
    if opt.returncode != 0 or codegen.returncode != 0:
        message = (opt_err if opt.returncode else codegen.stderr).decode(errors="replace").strip()
        raise RuntimeError(message.splitlines()[-1] if message else "failed")
    return elapsed, _children_cpu() - cpu


def time_xla(module: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of a fresh process compiling `module` with XLA:GPU for an H100, no GPU."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run([XLA_PYTHON, str(BENCH / "xla_compile_worker.py"), str(module)],
                          capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    line = proc.stdout.decode(errors="replace").strip()
    if proc.returncode != 0 or not line.startswith("ok "):
        raise RuntimeError(line or proc.stderr.decode(errors="replace").strip().splitlines()[-1])
    return elapsed, _children_cpu() - cpu


def measure(path: Path, tools: Path, runs: int, with_xla: bool, workdir: Path,
            other: Path | None = None) -> Row:
    """Best of `runs` rounds; each round times the other tools' pipe (cold), these tools' pipe
    (cold, then warm on the cache it filled) and XLA, in that order."""
    row = Row(path.stem, instruction_count(path))
    out = workdir / "out.manifest.json"
    colds, warms, others, xlas = [], [], [], []
    for k in range(runs):
        try:
            if other is not None:
                others.append(time_pipe(other, path, out, workdir / f"cache-other-{path.stem}-{k}"))
            cache = workdir / f"cache-{path.stem}-{k}"
            colds.append(time_pipe(tools, path, out, cache))
            warms.append(time_pipe(tools, path, out, cache))
            shutil.rmtree(cache, ignore_errors=True)
        except RuntimeError as exc:
            row.note = f"ours failed: {exc}"[:100]
        if with_xla:
            try:
                xlas.append(time_xla(path))
            except RuntimeError as exc:
                row.note = (row.note + f" XLA failed: {exc}")[:160]
                with_xla = False
    if colds and warms:
        row.cold, row.cold_cpu = min(w for w, _ in colds), min(c for _, c in colds)
        row.warm = min(w for w, _ in warms)
    if others:
        row.other_cold, row.other_cpu = min(w for w, _ in others), min(c for _, c in others)
    if xlas:
        row.xla, row.xla_cpu = min(w for w, _ in xlas), min(c for _, c in xlas)
    return row


def print_table(rows: list[Row]) -> None:
    def cell(v: float | None) -> str:
        return f"{v:.2f} s" if v is not None else "n/a"

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}x" if a is not None and b else "n/a"

    other = any(r.other_cold is not None for r in rows)
    head = "| module | instructions |" + (" other: cold | other/XLA |" if other else "")
    print(head + " ours cold | ours warm | XLA | cold/XLA | warm/XLA |"
          + (" CPU: other cold |" if other else "") + " CPU: ours cold | CPU: XLA |")
    print("|---|---:|" + "---:|" * (7 + 3 * other))
    for r in rows:
        first = f"| {r.name} | {r.instructions:,} |" + (f" {cell(r.other_cold)} | {ratio(r.other_cold, r.xla)} |"
                                                        if other else "")
        print(first + f" {cell(r.cold)} | {cell(r.warm)} | {cell(r.xla)} | {ratio(r.cold, r.xla)} | "
              f"{ratio(r.warm, r.xla)} |" + (f" {cell(r.other_cpu)} |" if other else "")
              + f" {cell(r.cold_cpu)} | {cell(r.xla_cpu)} |" + (f" {r.note}" if r.note else ""))


def run(paths: list[Path], tools: Path, runs: int, with_xla: bool, other: Path | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as tmp:
        workdir = Path(tmp)
        paths = paths or default_modules(workdir)
        for t in [tools] + ([other] if other is not None else []):  # writes the bytecode caches
            time_pipe(t, paths[0], workdir / "warmup.json", workdir / "warmup-cache")
        bytecode = "as the environment has it" if KEEP_ENV else "cached"
        others = f"; other tools: {other}" if other is not None else ""
        print(f"tools: {tools}{others}; Python bytecode {bytecode}; best of {runs} runs; wall seconds; "
              f"load average at the start: {os.getloadavg()[0]:.1f}")
        rows = []
        for path in paths:
            rows.append(measure(path, tools, runs, with_xla, workdir, other))
            print(f"  {rows[-1]}", file=sys.stderr, flush=True)
        print_table(rows)
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


def default_tools() -> Path:
    beside = Path(sys.executable).parent
    return beside if (beside / "hlo-codegen").exists() else Path(shutil.which("hlo-codegen") or "").parent
