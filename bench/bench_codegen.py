"""hlo-codegen's compile time: the pipe a user runs, cold and warm, against XLA; or per kernel, by
phase (a benchmark, never a test).

    .venv/bin/python bench/bench_codegen.py [--runs 3] [--tools DIR] [--compare-tools DIR] [--xla-python PY]
                                            [--no-xla] [--keep-env] [MODULE.hlo ...]
    .venv/bin/python bench/bench_codegen.py --phases [--targets host,cuda] [--corpus 24] [--top 10]
                                            [--profile N] [MODULE.hlo ...]
    .venv/bin/python bench/bench_codegen.py --triton [--arch sm_90]

With `--triton` it prints Triton's compile time per GEMM kernel, cold (an empty Triton cache)
and warm (Triton's cache filled): `bench/triton_compile_time.py`.

Without `--phases` it prints the table of `bench/compile_pipe.py`: `hlo-opt m.hlo | hlo-codegen
--target cuda` with an empty and with a filled kernel cache, and XLA:GPU's deviceless compile of
the same module in a fresh process.

With `--phases`, modules: testdata/gelu.hlo, testdata/transformer_layer.hlo (or the files given) and every
k-th corpus module, `--corpus` of them (0: none). Each goes through hlo-opt's gpu pipeline in
this process (the raw text when that fails), then through `compile_module` for each target with
a kernel backend that times every kernel's phases in CPU milliseconds of this process (less
noisy than wall time on a shared machine):

    emit       the fusion emitter building the kernel IR (without the optimization below)
    optimize   `optimize_kernel`: inlining, CSE, DCE, vectorization of the kernel IR
    lower      kernel IR -> LLVM IR text (`lower_to_host` / `lower_to_nvptx`)
    jit        host: `compile_host_module` (parse, optimize, MCJIT) at the optimization level
               hlo-run picks for the launch (`opt_level_for`) - what hlo-run pays at load
    ptx        cuda: `compile_to_ptx` (LLVM O3 + NVPTX code generation)
    cubin      cuda: nvJitLink's `ptx_to_cubin`

It prints one table per target (mean / median / max ms per kernel and the total for each phase)
and the slowest kernels. Kernels the thunk emitter reuses are compiled once and counted once.
The host JIT cache is cleared before every module so each kernel pays its real compile time.
`--profile N` runs cProfile over the N slowest kernels' emission and lowering (not the LLVM
phases, which are native code) and prints the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
sys.path.insert(0, str(ROOT / "bench"))
DEFAULT_MODULES = [ROOT / "testdata" / "gelu.hlo", ROOT / "testdata" / "transformer_layer.hlo"]
PHASES = {"host": ("emit", "optimize", "lower", "jit"), "cuda": ("emit", "optimize", "lower", "ptx", "cubin")}


@dataclass
class KernelTiming:
    module: str
    kernel: str
    target: str
    ms: dict[str, float] = field(default_factory=dict)
    fusion_text: str = ""

    @property
    def total(self) -> float:
        return sum(self.ms.values())


class _Clock:
    """Accumulates process CPU milliseconds into the phase of the kernel being compiled."""

    def __init__(self) -> None:
        self.current: KernelTiming | None = None

    @contextmanager
    def phase(self, name: str):
        start = time.process_time()
        try:
            yield
        finally:
            if self.current is not None:
                self.current.ms[name] = self.current.ms.get(name, 0.0) + (time.process_time() - start) * 1e3


CLOCK = _Clock()


def _install_optimize_timer() -> None:
    """Time `optimize_kernel` separately from the rest of emission: wrap the name in every
    emitter module that imported it (a benchmark-only patch, undone never: this process only
    benchmarks)."""
    import importlib
    import pkgutil

    import hlo_codegen.emitters as emitters
    from hlo_codegen.kernel_ir import transforms

    original = transforms.optimize_kernel

    def timed(kernel, *args, **kwargs):
        with CLOCK.phase("optimize"):
            return original(kernel, *args, **kwargs)

    for info in pkgutil.iter_modules(emitters.__path__):
        mod = importlib.import_module(f"hlo_codegen.emitters.{info.name}")
        if getattr(mod, "optimize_kernel", None) is original:
            mod.optimize_kernel = timed


def timed_backend(target: str, module_name: str, out: list[KernelTiming]):
    """An EmitterBackend whose kernels record their phase times in `out`."""
    from hlo_codegen.kernel_backend import EmitterBackend, argument_ids, fusion_emitter
    from hlo_common.hlo.printer import print_instruction

    class TimedBackend(EmitterBackend):
        def compile(self, fusion, args, unique_name):
            record = KernelTiming(module_name, fusion.name, target, fusion_text=print_instruction(fusion))
            CLOCK.current = record
            try:
                with CLOCK.phase("emit"):
                    kernel = fusion_emitter(fusion).emit(argument_ids(fusion, args))
                record.ms["emit"] -= record.ms.get("optimize", 0.0)  # emit excludes the optimization
                kernel.name = record.kernel = unique_name(kernel.name)
                return [self._lower_timed(kernel, len(args))]
            finally:
                CLOCK.current = None
                out.append(record)

        def _lower_timed(self, kernel, num_args):
            from hlo_codegen.thunk_emitter import CompiledKernel
            from hlo_common.manifest.manifest import ManifestKernel

            ptx = llvm_ir = None
            if self.target == "cuda":
                from hlo_codegen.llvm import lower_to_nvptx
                from hlo_codegen.ptx import compile_to_ptx, ptx_to_cubin

                with CLOCK.phase("lower"):
                    ll = lower_to_nvptx(kernel)
                with CLOCK.phase("ptx"):
                    ptx = compile_to_ptx(ll, self.arch)
                with CLOCK.phase("cubin"):
                    ptx_to_cubin(ptx, self.arch)
            else:
                from hlo_codegen.kernel_ir.ir import buffer_bytes
                from hlo_codegen.llvm import lower_to_host
                from hlo_run.host_kernel import compile_host_module, opt_level_for

                with CLOCK.phase("lower"):
                    llvm_ir = lower_to_host(kernel)
                with CLOCK.phase("jit"):  # at the level hlo-run's host platform picks
                    nbytes = sum(buffer_bytes(b) for b in kernel.params)
                    compile_host_module(llvm_ir, opt_level_for(nbytes))
            record = ManifestKernel(kernel.name, tuple(kernel.grid), tuple(kernel.block),
                                    kernel.shared_memory_bytes, num_args, ptx=ptx, llvm_ir=llvm_ir)
            return CompiledKernel(record, tuple(range(num_args)), {})

    return TimedBackend(target)


def optimized_text(text: str, name: str) -> str:
    """hlo-opt's gpu pipeline in this process; the input itself when that fails."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module
    from hlo_common.hlo_pass.pipeline import RunOptions
    from hlo_opt.pipelines import build_gpu_pipeline

    try:
        module = parse_module(text, name)
        if not module.is_scheduled:
            build_gpu_pipeline().run_with(module, RunOptions())
        return print_module(module)
    except Exception:  # noqa: BLE001 - codegen also takes unoptimized HLO
        return text


def compile_timed(text: str, name: str, target: str) -> list[KernelTiming]:
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_run import host_kernel
    from hlo_common.hlo.parser import parse_module

    host_kernel.clear_cache()
    out: list[KernelTiming] = []
    compile_module(parse_module(text, name), CompileOptions(target=target), timed_backend(target, name, out))
    return out


def sample_corpus(count: int) -> list[tuple[str, str]]:
    if count <= 0:
        return []
    from corpus_lib import corpus_modules

    modules = corpus_modules()
    stride = max(1, len(modules) // count)
    return list(modules[::stride][:count])


def print_phase_table(target: str, rows: list[KernelTiming]) -> None:
    print(f"\n## {target}: {len(rows)} kernels, CPU ms per kernel")
    print(f"{'phase':<10} {'mean':>9} {'median':>9} {'max':>9} {'total s':>9}")
    for phase in PHASES[target] + ("all",):
        values = [r.total if phase == "all" else r.ms.get(phase, 0.0) for r in rows]
        if values:
            print(f"{phase:<10} {statistics.mean(values):>9.2f} {statistics.median(values):>9.2f} "
                  f"{max(values):>9.2f} {sum(values) / 1e3:>9.2f}")


def print_slowest(target: str, rows: list[KernelTiming], top: int) -> None:
    phases = PHASES[target]
    print(f"\n## {target}: slowest kernels (CPU ms)")
    print(f"{'module':<34} {'kernel':<32} " + " ".join(f"{p:>8}" for p in phases) + f" {'total':>8}")
    for r in sorted(rows, key=lambda r: -r.total)[:top]:
        cells = " ".join(f"{r.ms.get(p, 0.0):>8.1f}" for p in phases)
        print(f"{r.module[:34]:<34} {r.kernel[:32]:<32} {cells} {r.total:>8.1f}")


def profile_kernels(rows: list[KernelTiming], sources: dict[str, str], n: int) -> None:
    """cProfile of emission + lowering (no LLVM) of the modules holding the n slowest kernels."""
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.hlo.parser import parse_module

    slow = sorted(rows, key=lambda r: -(r.ms.get("emit", 0) + r.ms.get("optimize", 0) + r.ms.get("lower", 0)))
    names = list(dict.fromkeys(r.module for r in slow[:n]))
    prof = cProfile.Profile()
    for name in names:
        module = parse_module(sources[name], name)
        backend = timed_backend("host", name, [])
        backend._lower_timed = _lower_only(backend)
        prof.enable()
        compile_module(module, CompileOptions(target="host"), backend)
        prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
    print(f"\n## cProfile of emit + optimize + lower over {', '.join(names)} (by cumulative time)")
    print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))


def _lower_only(backend):
    def lower(kernel, num_args):
        from hlo_codegen.llvm import lower_to_host
        from hlo_codegen.thunk_emitter import CompiledKernel
        from hlo_common.manifest.manifest import ManifestKernel

        ir = lower_to_host(kernel)
        record = ManifestKernel(kernel.name, tuple(kernel.grid), tuple(kernel.block),
                                kernel.shared_memory_bytes, num_args, llvm_ir=ir)
        return CompiledKernel(record, tuple(range(num_args)), {})
    return lower


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description="hlo-codegen's compile time: the pipe, or per kernel and phase")
    ap.add_argument("modules", nargs="*", type=Path)
    ap.add_argument("--phases", action="store_true", help="per kernel and phase, in this process")
    ap.add_argument("--triton", action="store_true",
                    help="Triton compile time per GEMM kernel, cold and warm")
    ap.add_argument("--arch", default="sm_90", help="--triton: the arch to compile for")
    ap.add_argument("--runs", type=int, default=3, help="pipe: best of this many runs")
    ap.add_argument("--tools", type=Path, help="pipe: the directory holding hlo-opt and hlo-codegen")
    ap.add_argument("--compare-tools", type=Path, metavar="DIR",
                    help="pipe: also time the hlo-opt / hlo-codegen in DIR (the code before), in the same rounds")
    ap.add_argument("--xla-python", metavar="PY", help="pipe: the Python (with jax's CUDA plugin) for XLA's worker")
    ap.add_argument("--no-xla", action="store_true", help="pipe: leave out XLA's column")
    ap.add_argument("--keep-env", action="store_true",
                    help="pipe: run the tools in this environment as it is (PYTHONDONTWRITEBYTECODE kept)")
    ap.add_argument("--targets", default="host,cuda")
    ap.add_argument("--corpus", type=int, default=24, help="how many corpus modules (every k-th)")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    return ap


def main(argv: list[str] | None = None) -> int:
    opts = _parser().parse_args(argv)
    if opts.triton:
        from triton_compile_time import run as run_triton

        return run_triton(opts.arch)
    if not opts.phases:
        import compile_pipe
        from compile_pipe import default_tools, run

        compile_pipe.KEEP_ENV = opts.keep_env
        compile_pipe.XLA_PYTHON = opts.xla_python or sys.executable
        return run(opts.modules, opts.tools or default_tools(), opts.runs, not opts.no_xla, opts.compare_tools)
    opts.modules = opts.modules or DEFAULT_MODULES
    _install_optimize_timer()
    sources = {p.name: p.read_text() for p in opts.modules}
    sources.update(sample_corpus(opts.corpus))
    optimized = {name: optimized_text(text, name) for name, text in sources.items()}
    by_target: dict[str, list[KernelTiming]] = {}
    failed: list[str] = []
    for target in opts.targets.split(","):
        rows = by_target.setdefault(target, [])
        for name, text in optimized.items():
            try:
                rows.extend(compile_timed(text, name, target))
            except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
                failed.append(f"{target} {name}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
    from_corpus = len(optimized) - len(opts.modules)
    print(f"{len(optimized)} modules ({len(opts.modules)} given, {from_corpus} from the corpus); "
          f"{len(failed)} module compilations failed")
    for line in failed:
        print("  failed:", line)
    for target, rows in by_target.items():
        given = [r for r in rows if r.module in {p.name for p in opts.modules}]
        print(f"\n# {target}: the given modules ({len(given)} kernels)")
        print_phase_table(target, given)
        print(f"\n# {target}: all modules")
        print_phase_table(target, rows)
        print_slowest(target, rows, opts.top)
    if opts.profile:
        profile_kernels(by_target.get("host", []), optimized, opts.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
