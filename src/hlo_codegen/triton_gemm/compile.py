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
import re
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
    scratch_params: int = 0  # Triton's trailing pointer parameters (global and profile scratch)


def compile_kernel(source: KernelSource, arch: str = "sm_90") -> CompiledTritonKernel:
    """PTX and cubin of `source` for `arch` (sm_90, sm_80, ...), with its config's warps and stages."""
    return compile_kernels([source], arch)[0]


def compile_kernels(sources: list[KernelSource], arch: str = "sm_90",
                    failures: dict[str, str] | None = None) -> list[CompiledTritonKernel | None]:
    """`compile_kernel` of each source, all in one child process (Triton's import is most of a
    small kernel's compile time). With `failures`, a kernel Triton cannot compile is None in the
    list and its reason recorded there by name; otherwise it is an HloError."""
    if not sources:
        return []
    requests = [{"text": s.text, "name": s.name, "signature": s.signature, "arch": arch,
                 "num_warps": s.config.get("num_warps", 4), "num_stages": s.config.get("num_stages", 3)}
                for s in sources]
    # no line info: it names the kernel's file (this machine's temporary directory) in the PTX
    env = dict(os.environ, TRITON_DISABLE_LINE_INFO="1")
    done = subprocess.run([sys.executable, "-m", "hlo_codegen.triton_gemm.compile"],
                          input=json.dumps(requests), capture_output=True, text=True, env=env)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        names = ", ".join(s.name for s in sources)
        raise HloError(f"Triton could not compile {names} for {arch}: {last}")
    compiled: list[CompiledTritonKernel | None] = []
    for source, out in zip(sources, json.loads(done.stdout)):
        error = out.get("error")
        if not error and out["global_scratch"]:  # the launch passes a null scratch pointer
            error = f"needs {out['global_scratch']} bytes of global scratch memory; hlo-run gives none"
        if error:
            if failures is None:
                raise HloError(f"Triton could not compile {source.name} for {arch}: {error}")
            failures[source.name] = error
            compiled.append(None)
            continue
        compiled.append(CompiledTritonKernel(
            out["name"], out["ptx"], base64.b64decode(out["cubin"]), out["num_warps"], out["shared"],
            tuple(out["cluster_dims"]), source.grid, ptx_param_count(out["ptx"]) - len(source.signature)))
    return compiled


def ptx_param_count(ptx: str) -> int:
    """The number of parameters of the PTX's (one) kernel entry."""
    match = re.search(r"\.entry\s+\S+\s*\((.*?)\)", ptx, re.S)
    return 0 if match is None or not match.group(1).strip() else match.group(1).count(".param")


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
            "shared": meta.shared, "global_scratch": getattr(meta, "global_scratch_size", 0) or 0,
            "cluster_dims": list(getattr(meta, "cluster_dims", (1, 1, 1)) or (1, 1, 1))}


def _compile_or_say_why(request: dict) -> dict:
    try:
        return _compile_here(request)
    except Exception as exc:  # noqa: BLE001 - Triton's refusal of one kernel; the parent decides
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        return {"error": f"{type(exc).__name__}: {lines[-1][:300]}"}


if __name__ == "__main__":
    json.dump([_compile_or_say_why(request) for request in json.loads(sys.stdin.read())], sys.stdout)


__all__ = ["CompiledTritonKernel", "compile_kernel", "compile_kernels", "ptx_param_count", "triton_available"]
