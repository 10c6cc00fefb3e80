"""Triton compile time per GEMM kernel, cold and warm (`bench_codegen.py --triton`; a benchmark,
never a test).

Kernels: every GEMM fusion of XLA:GPU's own optimized test modules (testdata/triton/*.xla_gpu.hlo,
XLA's tile configs) as hlo-codegen writes them (`hlo_codegen.triton_gemm`). Each is compiled for
the arch alone, as `compile_kernels` does it (a child Python importing triton, then
`triton.compile`): first with an empty Triton cache (`TRITON_CACHE_DIR` a fresh directory: the
real compile, TTIR -> TTGIR -> LLVM IR -> PTX -> cubin with ptxas), then again with that cache
filled (the warm figure: child start, triton import and a cache hit). The child's start and
triton's import are timed alone too (`startup`), so that part of each figure is visible;
hlo-codegen pays it once per module, for all of the module's kernels.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def gemm_kernels() -> list:
    """(module, KernelSource) of every GEMM fusion of the XLA modules the writer takes."""
    from hlo_codegen.triton_gemm.config import fusion_config
    from hlo_codegen.triton_gemm.program import Unsupported
    from hlo_codegen.triton_gemm.source import kernel_source
    from hlo_common.hlo.parser import parse_module
    from hlo_common.passes.triton_gemm_fallback import is_triton_gemm_fusion

    out = []
    for path in sorted((ROOT / "testdata" / "triton").glob("*.xla_gpu.hlo")):
        module = parse_module(path.read_text(), path.name)
        for comp in module.computations:
            for fusion in comp.instructions:
                if is_triton_gemm_fusion(fusion):
                    try:
                        out.append((path.name.split(".")[0], kernel_source(fusion, fusion_config(fusion))))
                    except Unsupported:
                        pass
    return out


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _startup_seconds() -> float:
    import subprocess
    import sys

    command = [sys.executable, "-c", "import triton, triton.compiler"]
    return _timed(lambda: subprocess.run(command, check=True))


def run(arch: str = "sm_90") -> int:
    from hlo_codegen.triton_gemm.compile import compile_kernels, triton_available

    if not triton_available():
        print("triton is not installed (the .[triton] extra): no Triton compile times")
        return 1
    kernels = gemm_kernels()
    rows = []
    with tempfile.TemporaryDirectory(prefix="triton-cache-") as cache:
        old = os.environ.get("TRITON_CACHE_DIR")
        os.environ["TRITON_CACHE_DIR"] = cache
        try:
            startup = min(_startup_seconds() for _ in range(2))
            for module, source in kernels:
                cold = _timed(lambda: compile_kernels([source], arch))
                warm = min(_timed(lambda: compile_kernels([source], arch)) for _ in range(2))
                rows.append((module, source.name, source.config, cold, warm))
        finally:
            if old is None:
                os.environ.pop("TRITON_CACHE_DIR")
            else:
                os.environ["TRITON_CACHE_DIR"] = old
    print(f"# Triton compile per GEMM kernel for {arch} ({len(rows)} kernels), wall ms; "
          f"child start + triton import alone: {startup * 1e3:.0f} ms")
    print(f"{'module':<22} {'kernel':<34} {'tile m x n x k, warps':<22} {'cold':>7} {'warm':>7}")
    for module, name, c, cold, warm in rows:
        tile = f"{c['block_m']}x{c['block_n']}x{c['block_k']}, {c['num_warps']}"
        print(f"{module:<22} {name:<34} {tile:<22} {cold * 1e3:7.0f} {warm * 1e3:7.0f}")
    colds, warms = [r[3] for r in rows], [r[4] for r in rows]
    print(f"{'median':<80} {statistics.median(colds) * 1e3:7.0f} {statistics.median(warms) * 1e3:7.0f}")
    print(f"{'median less start-up':<80} {(statistics.median(colds) - startup) * 1e3:7.0f} "
          f"{max(statistics.median(warms) - startup, 0) * 1e3:7.0f}")
    return 0


__all__ = ["gemm_kernels", "run"]
