"""Compiling a Triton GEMM kernel (`source.KernelSource`) with the `triton` package for an arch,
without a GPU: `triton.compile` on `GPUTarget("cuda", 90, 32)` (sm_90) or 80 gives TTIR, TTGIR,
LLVM IR, PTX and a cubin, and the kernel's metadata (name, warps, shared memory, cluster dims).

Where it sits: hlo_codegen.triton_gemm (package docstring). `triton` is the optional `.[triton]`
extra; `triton_available()` says whether it is installed. The compile runs in a child Python
(`hlo_codegen.triton_gemm.child`): libtriton's LLVM replaces process-wide signal handlers
(SIGINT's, SIGTERM's, SIGHUP's) when it compiles; the calling process keeps its own. The child
works while the caller goes on (`start_compile`; hlo-codegen emits the other kernels meanwhile).
With a kernel cache directory, each compiled kernel is kept there too (keyed by its request, the
compiling code and Triton's files, `_triton_entry_key`): a second compile of the module starts no
child at all. Triton's own cache makes a repeated compile in a child fast.
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
import threading
from dataclasses import dataclass

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
                    failures: dict[str, str] | None = None,
                    cache_dir: str | None = None) -> list[CompiledTritonKernel | None]:
    """`compile_kernel` of each source, all in one child process (Triton's import is most of a
    small kernel's compile time), but those found in the kernel cache under `cache_dir`. With
    `failures`, a kernel Triton cannot compile is None in the list and its reason recorded there
    by name; otherwise it is an HloError."""
    return start_compile(sources, arch, cache_dir).result(failures)


class PendingCompile:
    """`compile_kernels` under way: the child compiles on while the caller does other work (a
    thread of this process hands the requests over and reads the answer); `result` waits."""

    def __init__(self, sources: list[KernelSource], arch: str, cache_dir: str | None):
        self.sources, self.arch = sources, arch
        requests = [{"text": s.text, "name": s.name, "signature": s.signature, "arch": arch,
                     "num_warps": s.config.get("num_warps", 4), "num_stages": s.config.get("num_stages", 3)}
                    for s in sources]
        self._cache = _kernel_cache(cache_dir)
        self._keys = [_triton_entry_key(r) for r in requests] if self._cache is not None else []
        self._results = [_cached(self._cache, k) for k in self._keys] if self._cache is not None \
            else [None] * len(requests)
        self._missing = [i for i, r in enumerate(self._results) if r is None]
        self._done: list = []  # the child's CompletedProcess, or the exception running it raised
        self._children: list[subprocess.Popen] = []  # the child, once started (for `cancel`)
        self._thread = None
        if not self._missing:
            return
        self._thread = threading.Thread(target=self._run, args=([requests[i] for i in self._missing],),
                                        name="triton-child", daemon=True)
        self._thread.start()

    def _run(self, requests: list[dict]) -> None:
        try:
            self._done.append(_run_child(requests, self._children))
        except BaseException as exc:  # noqa: BLE001 - raised again by `result`, in the caller's thread
            self._done.append(exc)

    def cancel(self) -> None:
        """Kill the child, if still running, and wait for it."""
        for child in self._children:
            child.kill()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def result(self, failures: dict[str, str] | None = None) -> list[CompiledTritonKernel | None]:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            done = self._done[0]
            if isinstance(done, BaseException):
                raise done
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                raise HloError(f"Triton could not compile {self._names()} for {self.arch}: {last}")
            for i, out in zip(self._missing, json.loads(done.stdout)):
                self._results[i] = out
                if self._cache is not None and not out.get("error"):
                    self._cache.store(self._keys[i], {"format": cache_format(), "triton": out})
        return [_compiled(s, out, self.arch, failures) for s, out in zip(self.sources, self._results)]

    def _names(self) -> str:
        return ", ".join(s.name for s in self.sources)


def start_compile(sources: list[KernelSource], arch: str = "sm_90",
                  cache_dir: str | None = None) -> PendingCompile:
    """Start `compile_kernels` of `sources`; its `result` gives what compile_kernels returns."""
    return PendingCompile(sources, arch, cache_dir)


def _compiled(source: KernelSource, out: dict, arch: str,
              failures: dict[str, str] | None) -> CompiledTritonKernel | None:
    error = out.get("error")
    if not error and out["global_scratch"]:  # the launch passes a null scratch pointer
        error = f"needs {out['global_scratch']} bytes of global scratch memory; hlo-run gives none"
    if error:
        if failures is None:
            raise HloError(f"Triton could not compile {source.name} for {arch}: {error}")
        failures[source.name] = error
        return None
    return CompiledTritonKernel(
        out["name"], out["ptx"], base64.b64decode(out["cubin"]), out["num_warps"], out["shared"],
        tuple(out["cluster_dims"]), source.grid, ptx_param_count(out["ptx"]) - len(source.signature))


# -- the child --------------------------------------------------------------------------------------
def _run_child(requests: list[dict], started: list[subprocess.Popen] | None = None) -> subprocess.CompletedProcess:
    """The child's answer to `requests`; the child is added to `started` as soon as it runs."""
    # no line info: it names the kernel's file (this machine's temporary directory) in the PTX
    env = dict(os.environ, TRITON_DISABLE_LINE_INFO="1")
    with subprocess.Popen([sys.executable, "-m", "hlo_codegen.triton_gemm.child"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as child:
        if started is not None:
            started.append(child)
        stdout, stderr = child.communicate(json.dumps(requests))
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


# -- kernel cache entries ---------------------------------------------------------------------------
_ENTRY_FORMAT = 1
_TRITON_FILES: list[str] = []


def cache_format() -> int:
    from hlo_codegen.kernel_cache import ENTRY_FORMAT

    return ENTRY_FORMAT


def _kernel_cache(cache_dir: str | None):
    if cache_dir is None:
        return None
    from hlo_codegen.kernel_cache import KernelCache

    return KernelCache(cache_dir)


def _triton_files() -> str:
    """The fingerprint of the installed Triton's files (`child._fingerprint`), once per process."""
    if not _TRITON_FILES:
        from pathlib import Path

        from hlo_codegen.triton_gemm.child import _fingerprint

        spec = importlib.util.find_spec("triton")
        _TRITON_FILES.append(_fingerprint(Path(spec.origin).parent))
    return _TRITON_FILES[0]


def _triton_entry_key(request: dict) -> str:
    """The cache key of a Triton kernel: the request (source text, kernel name, signature, arch,
    warps, stages), the code that compiles it (`kernel_cache.code_version`) and Triton's files.
    The name is in the key: the cubin carries it, so an entry is for that name only."""
    from hlo_codegen.kernel_cache import code_version

    parts = ("triton", _ENTRY_FORMAT, code_version("cuda"), _triton_files(),
             json.dumps(request, sort_keys=True))
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _cached(cache, key: str) -> dict | None:
    payload = cache.load(key)  # checks the entry's key, checksum and format
    out = payload.get("triton") if payload is not None else None
    if not isinstance(out, dict) or not (out.get("error") is None and "ptx" in out and "cubin" in out):
        return None
    return out


def ptx_param_count(ptx: str) -> int:
    """The number of parameters of the PTX's (one) kernel entry."""
    match = re.search(r"\.entry\s+\S+\s*\((.*?)\)", ptx, re.S)
    return 0 if match is None or not match.group(1).strip() else match.group(1).count(".param")


__all__ = ["CompiledTritonKernel", "PendingCompile", "compile_kernel", "compile_kernels", "ptx_param_count",
           "start_compile", "triton_available"]
