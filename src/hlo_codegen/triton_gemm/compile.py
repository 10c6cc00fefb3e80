"""Compiling a Triton GEMM kernel (`source.KernelSource`) with the `triton` package for an arch,
without a GPU: `triton.compile` on `GPUTarget("cuda", 90, 32)` (sm_90) or 80 gives TTIR, TTGIR,
LLVM IR, PTX and a cubin, and the kernel's metadata (name, warps, shared memory, cluster dims).

Where it sits: hlo_codegen.triton_gemm (package docstring). `triton` is the optional `.[triton]`
extra; `triton_available()` says whether it is installed. The compile runs in a child Python
(`python -m hlo_codegen.triton_gemm.compile`): libtriton's LLVM replaces process-wide signal
handlers (SIGINT's, SIGTERM's, SIGHUP's) when it compiles; the calling process keeps its own.
Triton's `@triton.jit` reads a kernel's source from its file, so the child writes the text to a
file of its own (named by its hash) and imports it from there; Triton's own cache makes a
repeated compile fast.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hlo_common.errors import HloError
from hlo_codegen.triton_gemm.source import KernelSource


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


def compile_kernel(source: KernelSource, arch: str = "sm_90") -> CompiledTritonKernel:
    """PTX and cubin of `source` for `arch` (sm_90, sm_80, ...), with its config's warps and stages."""
    request = {"text": source.text, "name": source.name, "signature": source.signature, "arch": arch,
               "num_warps": source.config.get("num_warps", 4),
               "num_stages": source.config.get("num_stages", 3)}
    done = subprocess.run([sys.executable, "-m", "hlo_codegen.triton_gemm.compile"],
                          input=json.dumps(request), capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise HloError(f"Triton could not compile {source.name} for {arch}: {last}")
    out = json.loads(done.stdout)
    return CompiledTritonKernel(out["name"], out["ptx"], base64.b64decode(out["cubin"]), out["num_warps"],
                                out["shared"], tuple(out["cluster_dims"]), source.grid)


def _compile_here(request: dict) -> dict:
    """The child's side: import the kernel from its file and compile it."""
    import triton
    from triton.backends.compiler import GPUTarget

    directory = Path(tempfile.gettempdir()) / f"hlo-triton-{os.getuid()}"
    directory.mkdir(exist_ok=True)
    digest = hashlib.sha256(request["text"].encode()).hexdigest()[:16]
    path = directory / f"k_{digest}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(request["text"])
        os.replace(tmp, path)  # whole or not at all
    spec = importlib.util.spec_from_file_location(f"hlo_triton_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, request["name"])
    ast = triton.compiler.ASTSource(fn=fn, signature=request["signature"], constexprs={})
    capability = int(request["arch"].removeprefix("sm_").rstrip("a"))
    options = {"num_warps": request["num_warps"], "num_stages": request["num_stages"],
               "enable_fp_fusion": True}  # Triton's default, said explicitly (3.9 warns when unset)
    kernel = triton.compile(ast, target=GPUTarget("cuda", capability, 32), options=options)
    meta = kernel.metadata
    return {"name": meta.name, "ptx": kernel.asm["ptx"],
            "cubin": base64.b64encode(kernel.asm["cubin"]).decode(), "num_warps": meta.num_warps,
            "shared": meta.shared,
            "cluster_dims": list(getattr(meta, "cluster_dims", (1, 1, 1)) or (1, 1, 1))}


if __name__ == "__main__":
    json.dump(_compile_here(json.loads(sys.stdin.read())), sys.stdout)


__all__ = ["CompiledTritonKernel", "compile_kernel", "triton_available"]
