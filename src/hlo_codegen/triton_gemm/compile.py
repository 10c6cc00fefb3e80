"""Compiling a Triton GEMM kernel (`source.KernelSource`) with the `triton` package for an arch,
without a GPU: `triton.compile` on `GPUTarget("cuda", 90, 32)` (sm_90) or 80 gives TTIR, TTGIR,
LLVM IR, PTX and a cubin, and the kernel's metadata (name, warps, shared memory, cluster dims).

Where it sits: hlo_codegen.triton_gemm (package docstring). `triton` is the optional `.[triton]`
extra; `triton_available()` says whether it is installed. Triton's `@triton.jit` reads a
kernel's source from its file, so the text is written to a file of its own (named by its hash,
under a temporary directory of this process) and imported from there.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import signal
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from hlo_codegen.triton_gemm.source import KernelSource

_DIR: Path | None = None


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


@dataclass(frozen=True)
class CompiledTritonKernel:
    name: str
    ptx: str
    cubin: bytes
    num_warps: int
    shared_bytes: int
    cluster_dims: tuple[int, ...]
    grid: tuple[int, int, int]


def _module_of(source: KernelSource):
    global _DIR
    if _DIR is None:
        _DIR = Path(tempfile.mkdtemp(prefix="hlo-triton-"))
    digest = hashlib.sha256(source.text.encode()).hexdigest()[:16]
    path = _DIR / f"k_{digest}.py"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(source.text)
        os.replace(tmp, path)  # whole or not at all
    spec = importlib.util.spec_from_file_location(f"hlo_triton_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _python_signal_handlers_kept():
    """Triton's compiler (LLVM inside libtriton) installs its own C-level handlers for SIGINT,
    SIGTERM and SIGHUP, after which Ctrl-C no longer raises KeyboardInterrupt in this process:
    Python's handlers are put back afterwards (main thread only, as signals are handled there)."""
    names = ("SIGINT", "SIGTERM", "SIGHUP")
    saved = {getattr(signal, n): signal.getsignal(getattr(signal, n)) for n in names if hasattr(signal, n)}
    try:
        yield
    finally:
        if threading.current_thread() is threading.main_thread():
            for sig, handler in saved.items():
                if handler is not None:
                    signal.signal(sig, handler)


def compile_kernel(source: KernelSource, arch: str = "sm_90") -> CompiledTritonKernel:
    """PTX and cubin of `source` for `arch` (sm_90, sm_80, ...), with its config's warps and stages."""
    import triton
    from triton.backends.compiler import GPUTarget

    capability = int(arch.removeprefix("sm_").rstrip("a"))
    fn = getattr(_module_of(source), source.name)
    ast = triton.compiler.ASTSource(fn=fn, signature=dict(source.signature), constexprs={})
    options = {"num_warps": source.config.get("num_warps", 4),
               "num_stages": source.config.get("num_stages", 3),
               "enable_fp_fusion": True}  # Triton's default, said explicitly (3.9 warns when unset)
    with _python_signal_handlers_kept():
        kernel = triton.compile(ast, target=GPUTarget("cuda", capability, 32), options=options)
    meta = kernel.metadata
    cluster = tuple(getattr(meta, "cluster_dims", (1, 1, 1)) or (1, 1, 1))
    return CompiledTritonKernel(meta.name, kernel.asm["ptx"], kernel.asm["cubin"], meta.num_warps,
                                meta.shared, cluster, source.grid)


__all__ = ["CompiledTritonKernel", "compile_kernel", "triton_available"]
