"""Registers, spills and local memory of every kernel hlo-codegen writes, from `ptxas -v` (issue 10
item 5; needs no GPU, only `ptxas` from the `nvidia-cuda-nvcc` wheel of the `test` extra).

    .venv/bin/python bench/ptxas_report.py [-k SUBSTRING] [--set testdata|fusion|corpus ...]
                                           [--arch sm_90] [--jobs N]

Module sets: `testdata` (testdata/*.hlo) and `fusion` (testdata/fusion/*.hlo), both through
hlo-opt's gpu pipeline and hlo-codegen --target cuda (in-process); `corpus` (the XLA emitter
tests of the shared corpus, `*emitters_tests_*.hlo`: a fused computation each, wrapped in a
fusion and emitted, lowered and compiled to PTX). Every kernel's PTX goes through
`ptxas -arch=ARCH -v`; one line per kernel: registers per thread, spill stores and loads (bytes),
stack frame and local memory (bytes). The exit status is 1 when a kernel spills or uses local
memory, or a module fails to compile, 2 when ptxas cannot be found.

ptxas is looked up in this order: `$PTXAS`; the `nvidia` namespace package of the running Python
(`nvidia/cuda_nvcc/bin/ptxas` of CUDA 12 wheels, `nvidia/cu*/bin/ptxas` of CUDA 13 ones); `PATH`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # this tree's sources, whatever the venv has installed
sys.path.insert(0, str(ROOT / "bench"))

CORPUS_DIR = Path(os.environ.get("HLO_CORPUS_DIR", ROOT.parent / "shared" / "corpus" / "xla"))
SETS = ("testdata", "fusion", "corpus")


def find_ptxas() -> str | None:
    """The path of a ptxas executable, or None (see the module docstring for the order)."""
    env = os.environ.get("PTXAS")
    if env:
        return env if os.access(env, os.X_OK) else None
    try:
        import nvidia  # the namespace package the NVIDIA wheels install into
        roots = [Path(p) for p in getattr(nvidia, "__path__", [])]
    except ImportError:
        roots = []
    for root in roots:
        for candidate in [root / "cuda_nvcc" / "bin" / "ptxas", *sorted(root.glob("cu*/bin/ptxas"),
                                                                       reverse=True)]:
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return shutil.which("ptxas")


@dataclass
class KernelReport:
    module: str
    kernel: str
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    local_memory: int = 0
    error: str = ""

    @property
    def bad(self) -> bool:
        return bool(self.error or self.spill_stores or self.spill_loads or self.local_memory)


_FUNC_RE = re.compile(r"Function properties for ([\w$.]+)\s*\n\s*(\d+) bytes stack frame, (\d+) bytes spill "
                      r"stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Compiling entry function '([\w$.]+)'.*?Used (\d+) registers(.*?)$", re.S | re.M)


def parse_ptxas_output(text: str) -> dict[str, dict[str, int]]:
    """kernel -> {registers, spill_stores, spill_loads, stack_frame, local_memory} from `ptxas -v`."""
    out: dict[str, dict[str, int]] = {}
    for m in _FUNC_RE.finditer(text):
        out.setdefault(m.group(1), {}).update(stack_frame=int(m.group(2)), spill_stores=int(m.group(3)),
                                              spill_loads=int(m.group(4)))
    for m in _USED_RE.finditer(text):
        lmem = re.search(r"(\d+) bytes lmem", m.group(3))
        out.setdefault(m.group(1), {}).update(registers=int(m.group(2)),
                                              local_memory=int(lmem.group(1)) if lmem else 0)
    return out


def run_ptxas(ptxas: str, ptx: str, arch: str) -> tuple[dict[str, dict[str, int]], str]:
    """(per-kernel figures, error text) of one PTX module."""
    with tempfile.TemporaryDirectory(prefix="ptxas_") as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        proc = subprocess.run([ptxas, f"-arch={arch}", "-v", str(src), "-o", str(Path(tmp) / "k.cubin")],
                              capture_output=True, text=True, check=False)
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        lines = [ln for ln in text.splitlines() if "error" in ln.lower()] or text.splitlines() or [""]
        return {}, f"ptxas exit {proc.returncode}: {lines[0][:200]}"
    return parse_ptxas_output(text), ""


# ----------------------------------------------------------------------------- the module sets

def module_paths(sets: tuple[str, ...], only: str = "") -> list[tuple[str, Path]]:
    out = []
    if "testdata" in sets:
        out += [("testdata", p) for p in sorted((ROOT / "testdata").glob("*.hlo"))]
    if "fusion" in sets:
        out += [("fusion", p) for p in sorted((ROOT / "testdata" / "fusion").glob("*.hlo"))]
    if "corpus" in sets:
        out += [("corpus", p) for p in sorted(CORPUS_DIR.glob("*emitters_tests_*.hlo"))]
    return [(s, p) for s, p in out if only in p.name]


def ptx_of_module(kind: str, path: Path, arch: str) -> dict[str, str]:
    """kernel name -> PTX, for one module of a set (raises on a compile error)."""
    if kind == "corpus":
        from hlo_codegen.emitters import emit_kernel, wrap_computation_in_fusion
        from hlo_codegen.emitters import in_place_argument_ids
        from hlo_codegen.llvm import lower_to_nvptx
        from hlo_codegen.ptx import compile_to_ptx
        from hlo_common.hlo.parser import parse_module

        module = parse_module(path.read_text(), str(path))
        root = module.entry.root
        fusion = root if root.opcode == "fusion" else wrap_computation_in_fusion(module, module.entry)
        kernel = emit_kernel(fusion, argument_ids=in_place_argument_ids(fusion))  # scatters in place
        return {kernel.name: compile_to_ptx(lower_to_nvptx(kernel), arch)}
    from fusion_vs_xla import run_hlo_opt
    from hlo_codegen.compiler import CompileOptions, compile_module
    from hlo_common.hlo.parser import parse_module

    text, err, _ = run_hlo_opt(path, [])
    if text is None:
        raise RuntimeError(f"hlo-opt: {err}")
    result = compile_module(parse_module(text, path.name), CompileOptions(target="cuda", arch=arch))
    return {name: k.ptx for name, k in sorted(result.manifest.kernels.items()) if k.ptx}


def ptx_arch(ptx: str, arch: str) -> str:
    """The arch ptxas compiles the PTX for: its own `.target` when that is `arch` with a feature
    suffix (Triton's GEMM kernels target sm_90a, for wgmma), else `arch`."""
    target = re.search(r"^\.target\s+(sm_\d+[af]?)", ptx, re.M)
    return target.group(1) if target and target.group(1).rstrip("af") == arch else arch


def report_module(ptxas: str, kind: str, path: Path, arch: str) -> list[KernelReport]:
    module = f"{kind}/{path.name}"
    try:
        ptx = ptx_of_module(kind, path, arch)
    except Exception as e:  # noqa: BLE001  (a compile failure is reported as the module's line)
        text = e.one_line() if hasattr(e, "one_line") else str(e)
        first = (text.splitlines() or [""])[0][:200]
        return [KernelReport(module, "-", error=f"{type(e).__name__}: {first}")]
    out = []
    for name, code in ptx.items():
        figures, err = run_ptxas(ptxas, code, ptx_arch(code, arch))
        if err:
            out.append(KernelReport(module, name, error=err))
            continue
        for entry, f in sorted(figures.items()):
            out.append(KernelReport(module, entry, **f))
    return out


def _short(module: str) -> str:
    return module.replace("backends_gpu_codegen_emitters_tests_", "").replace("codegen_emitters_tests_", "")


def format_table(reports: list[KernelReport]) -> str:
    head = f"{'module':58} {'kernel':44} {'regs':>5} {'spill st':>8} {'spill ld':>8} {'stack':>6} {'lmem':>6}"
    lines = [head, "-" * len(head)]
    for r in reports:
        if r.error:
            lines.append(f"{_short(r.module)[:58]:58} {r.kernel[:44]:44} ERROR {r.error}")
        else:
            flag = "  SPILLS" if r.bad else ""
            lines.append(f"{_short(r.module)[:58]:58} {r.kernel[:44]:44} {r.registers:5d} "
                         f"{r.spill_stores:8d} "
                         f"{r.spill_loads:8d} {r.stack_frame:6d} {r.local_memory:6d}{flag}")
    ok = [r for r in reports if not r.error]
    bad = sum(r.bad and not r.error for r in reports)
    errors = sum(bool(r.error) for r in reports)
    regs = sorted(r.registers for r in ok)
    summary = (f"{len(ok)} kernels: {bad} spill or use local memory, {errors} failed to compile; registers "
               f"per thread min {regs[0]} median {regs[len(regs) // 2]} max {regs[-1]}" if regs
               else f"no kernel compiled ({errors} failures)")
    return "\n".join(lines + [summary])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", dest="only", default="", help="only modules whose file name contains this")
    ap.add_argument("--set", dest="sets", action="append", choices=SETS,
                    help="module set (repeatable; default: all three)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=1, help="modules compiled at once (threads)")
    opts = ap.parse_args(argv)
    ptxas = find_ptxas()
    if ptxas is None:
        print("error: ptxas not found (install the test extra: pip install nvidia-cuda-nvcc, or set PTXAS)",
              file=sys.stderr)
        return 2
    paths = module_paths(tuple(opts.sets or SETS), opts.only)
    if not paths:
        print("error: no module matches", file=sys.stderr)
        return 1
    with ThreadPoolExecutor(max(1, opts.jobs)) as pool:
        results = list(pool.map(lambda kp: report_module(ptxas, kp[0], kp[1], opts.arch), paths))
    reports = [r for rs in results for r in rs]
    print(f"ptxas: {ptxas}")
    print(format_table(reports))
    return 1 if any(r.bad for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
