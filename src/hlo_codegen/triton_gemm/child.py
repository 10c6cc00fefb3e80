"""The child Python that compiles Triton GEMM kernels (`python -m hlo_codegen.triton_gemm.child`):
it imports `triton`, then reads a JSON list of requests on stdin and writes one JSON
result per request (the PTX, the cubin in base64 and Triton's metadata, or `{"error": ...}`).

Where it sits: `compile.start_compile` runs it, on a thread of hlo-codegen that waits for its
answer while the other kernels are emitted. It imports only the standard library and Triton (not
hlo_common, whose numpy would add a tenth of a second). An empty stdin means no work: it exits
quietly.

Triton's own cache names a compiled kernel after `triton.runtime.cache.triton_key()`, a hash of
Triton's sources and of its 600 MB `libtriton.so` that each new process computes again (a quarter
of a second, most of a warm child's time). The child keeps that hash in Triton's cache directory
(beside the kernels it names), in a file named after the size and modification time of every file
the hash covers, and a later child reads it instead; Triton's own warm-up pool
(`triton/_compile_warmup_pool.py`) hands a known key to its workers the same way. A Triton
installed again changes those times, hence the file's name.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

# What triton_key() reads: its own file, the compiler and backend packages, libtriton and the
# language package (`triton/runtime/cache.py`); a superset here, every file under them.
_KEY_PARTS = ("runtime/cache.py", "compiler", "backends", "language", "_C")


def _fingerprint(triton_dir: Path) -> str:
    """A hash of the name, size and modification time of every file triton_key() covers."""
    h = hashlib.sha256()
    for part in _KEY_PARTS:
        top = triton_dir / part
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in paths:
            st = path.stat()
            h.update(f"{path.relative_to(triton_dir).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def remembered_triton_key() -> None:
    """Make `triton.runtime.cache.triton_key` return the key kept in Triton's cache directory,
    computing and keeping it first when there is none. Anything unexpected leaves Triton as it is."""
    import triton
    import triton.runtime.cache as cache

    try:
        key_dir = triton.knobs.cache.dir
        name = f"hlo-toolchain-triton-key-{_fingerprint(Path(cache.__file__).parent.parent)}.txt"
        path = Path(key_dir) / name
        try:
            key = path.read_text()
        except OSError:
            key = cache.triton_key()
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".triton-key.", dir=path.parent)
            with os.fdopen(fd, "w") as f:
                f.write(key)
            os.replace(tmp, path)  # whole or not at all; concurrent children write equal files
    except (OSError, AttributeError, TypeError):  # no cache directory, or another Triton's layout
        return
    if key:
        cache.triton_key = lambda: key


def compile_here(request: dict) -> dict:
    """Import the kernel from its file and compile it: Triton's `@triton.jit` reads a kernel's
    source from its file, so the text is written to a file of its own (named by its hash)."""
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


def compile_or_say_why(request: dict) -> dict:
    try:
        return compile_here(request)
    except Exception as exc:  # noqa: BLE001 - Triton's refusal of one kernel; the parent decides
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        return {"error": f"{type(exc).__name__}: {lines[-1][:300]}"}


def warm_up() -> None:
    """What every compile needs first: Triton's import and key (before the requests are read)."""
    import triton.compiler  # noqa: F401
    import triton.runtime.cache as cache

    remembered_triton_key()
    cache.triton_key()


def main() -> int:
    warm_up()
    text = sys.stdin.read()
    if not text.strip():
        return 0
    json.dump([compile_or_say_why(request) for request in json.loads(text)], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
