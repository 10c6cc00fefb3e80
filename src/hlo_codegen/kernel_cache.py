"""hlo-codegen's kernel cache: compiled kernels on disk, found by what they are made from.

Where it sits: between the thunk emitter and the kernel backend (`kernel_backend.EmitterBackend`):
`CachingBackend.compile` looks a fusion up before emitting it. A hit skips the fusion analysis,
emission, lowering, LLVM's PTX generation and nvJitLink; a miss compiles, and `finish` (once the
kernels compiling on threads are complete) stores. XLA keeps
a kernel cache across runs too (`--xla_gpu_kernel_cache_file`, `xla/service/gpu/kernel_reuse_cache.cc`);
this one is a directory any number of processes share (`hlo-codegen --cache-dir`, `--no-cache`).

The key (sha256, `kernel_key`) covers everything the kernel's text is made from:

- the fusion: its instruction without metadata (no emitter reads metadata), its operands as their
  positions and shapes with layouts, and the text of the fused computation and of every
  computation it calls. Names inside the fusion stay in the key: the kernel's text carries them
  (PTX names shared-memory symbols after the reduction hero, the LLVM IR names values and
  functions after instructions), so a renamed fusion is compiled again rather than given another
  fusion's names. Identical fusions with other names in one module already share one kernel
  (the thunk emitter's kernel reuse);
- the kernel arguments: which operands and outputs share a buffer, and which are written;
- the target, the architecture and the device description the emitters size launches for;
- the code version (`code_version`): a hash of hlo_codegen's and hlo_common's files, the Python,
  numpy and llvmlite versions, and for cuda the libdevice bitcode.

The kernel's own name is not in the key: the module decides it (`loop_add_fusion_3` when three
others came first). An entry holds the texts with a placeholder where the name was, and only
when every occurrence of the name could be replaced (`_template`); a hit puts the new name back.
So a compile with the cache gives byte for byte what a compile without it gives.

Entries are `<dir>/kernels/<key[:2]>/<key>.json`, written to a temporary file in that directory
and renamed into place: a reader never sees half a file, and two processes writing one entry
leave one of two equal files; no locks. An entry that does not parse, or whose checksum does not
match, is ignored and rewritten. The cache never fails a compile: what cannot be read is a miss,
what cannot be written is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.printer import print_computation, print_instruction
from hlo_common.manifest.manifest import ManifestKernel

from hlo_codegen.thunk_emitter import CompiledKernel, KernelArgumentSpec, KernelNamer

ENV_CACHE_DIR = "HLO_TOOLCHAIN_CACHE_DIR"
ENTRY_FORMAT = 1
_PLACEHOLDER = "__hlo_kernel_cache_name_{}__"
_IDENT = r"A-Za-z0-9_$."


def default_cache_dir() -> Path:
    """`$HLO_TOOLCHAIN_CACHE_DIR`, else `$XDG_CACHE_HOME/hlo-toolchain`, else
    `~/.cache/hlo-toolchain` (the XDG base directory rules)."""
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "hlo-toolchain"


# -- the key ---------------------------------------------------------------------------------------
_CODE_VERSION: dict[str, str] = {}


def code_version(target: str) -> str:
    """A hash of what compiles kernels besides their input: the source of hlo_codegen and
    hlo_common (every file, so any edit changes it), the Python, numpy and llvmlite versions, and
    for cuda the libdevice bitcode linked into PTX. Computed once per process."""
    version = _CODE_VERSION.get(target)
    if version is None:
        h = hashlib.sha256(_source_hash().encode())
        h.update(repr(_library_versions()).encode())
        if target == "cuda":
            h.update(_libdevice_hash().encode())
        version = _CODE_VERSION[target] = h.hexdigest()
    return version


def _source_hash() -> str:
    version = _CODE_VERSION.get("source")
    if version is None:
        import hlo_codegen
        import hlo_common

        h = hashlib.sha256()
        for package in (hlo_codegen, hlo_common):
            root = Path(package.__file__).parent
            files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
            for path in files:
                h.update(f"{package.__name__}/{path.relative_to(root).as_posix()}\0".encode())
                h.update(hashlib.sha256(path.read_bytes()).digest())
        version = _CODE_VERSION["source"] = h.hexdigest()
    return version


def _library_versions() -> tuple:
    import llvmlite
    import numpy

    return (sys.version_info[:3], numpy.__version__, llvmlite.__version__)


def _libdevice_hash() -> str:
    from hlo_codegen.llvm.libdevice import find_libdevice

    path = find_libdevice()
    return hashlib.sha256(path.read_bytes()).hexdigest() if path is not None else "no libdevice"


def _called_computations(fusion: HloInstruction) -> list[HloComputation]:
    """The fused computation and every computation below it, each once, in a fixed order."""
    out: list[HloComputation] = []
    stack = [fusion.fused_computation()]
    while stack:
        comp = stack.pop()
        if any(c is comp for c in out):
            continue
        out.append(comp)
        for instr in comp.instructions:
            stack.extend(reversed(instr.called_computations()))
    return out


def fusion_text(fusion: HloInstruction) -> str:
    """The fusion as the key sees it: the instruction with its operands replaced by their
    positions and shapes, then every computation it calls, names inside kept."""
    positions: dict[str, str] = {}
    for i, op in enumerate(fusion.operands):
        positions.setdefault(op.name, f"operand{i}")
    head = print_instruction(fusion, print_metadata=False)
    head = re.sub(r"%([A-Za-z_][A-Za-z0-9_.\-]*)", lambda m: positions.get(m.group(1), m.group(0)), head)
    shapes = ", ".join(op.shape.to_string() for op in fusion.operands)
    bodies = "".join(print_computation(c, print_metadata=False) for c in _called_computations(fusion))
    return f"{head}\noperands: {shapes}\n{bodies}"


def kernel_key(fusion: HloInstruction, args: list[KernelArgumentSpec], target: str, arch: str,
               device_json: str) -> str:
    """The cache key of `fusion` compiled with these arguments for this target (see above)."""
    pattern = [(a.shape, a.written, a.operands, a.outputs) for a in args]
    parts = (ENTRY_FORMAT, code_version(target), target, arch, device_json, fusion_text(fusion), pattern)
    return hashlib.sha256(repr(parts).encode()).hexdigest()


# -- entries ---------------------------------------------------------------------------------------
def _name_pattern(name: str) -> re.Pattern:
    """`name` as a whole identifier, or as the stem of PTX's `<name>_param_<i>`."""
    return re.compile(rf"(?<![{_IDENT}]){re.escape(name)}(?=(?:_param_\d+)?(?![{_IDENT}]))")


def _template(text: str, name: str, placeholder: str) -> str | None:
    """`text` with the kernel name replaced by `placeholder`, or None when the name also occurs
    in some other form (part of another identifier): then only this name could reuse it."""
    if placeholder in text:
        return None
    out, count = _name_pattern(name).subn(placeholder, text)
    return out if count == text.count(name) else None


def _entry_payload(kernels: list[CompiledKernel], names: list[tuple[str, str]]) -> dict | None:
    """The JSON of an entry for `kernels`, compiled under `names` ((preferred, given) pairs)."""
    if len(names) != len(kernels):
        return None
    out = []
    for i, (ck, (preferred, given)) in enumerate(zip(kernels, names)):
        if ck.kernel.name != given:
            return None
        placeholder = _PLACEHOLDER.format(i)
        texts = {"ptx": ck.kernel.ptx, "llvm_ir": ck.kernel.llvm_ir, **{f"artifact:{k}": v
                                                                        for k, v in ck.artifacts.items()}}
        templated = {}
        for field, text in texts.items():
            if text is None:
                continue
            t = _template(text, given, placeholder)
            if t is None:
                return None
            templated[field] = t
        k = ck.kernel
        out.append({"preferred_name": preferred, "grid": list(k.grid), "block": list(k.block),
                    "shared_bytes": k.shared_bytes, "num_params": k.num_params,
                    "arg_indices": list(ck.arg_indices), "texts": templated})
    return {"format": ENTRY_FORMAT, "kernels": out}


def _checksum(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _instantiate(payload: dict, unique_name: KernelNamer,
                 reserved: list[tuple[str, str]]) -> list[CompiledKernel] | None:
    """The kernels of an entry under the names the module gives them (appended to `reserved`),
    or None when a new name already occurs in the texts (a direct compile might then differ)."""
    out = []
    for i, k in enumerate(payload["kernels"]):
        name = unique_name(k["preferred_name"])
        reserved.append((k["preferred_name"], name))
        placeholder = _PLACEHOLDER.format(i)
        if any(name in text for text in k["texts"].values()):
            return None
        texts = {f: t.replace(placeholder, name) for f, t in k["texts"].items()}
        record = ManifestKernel(name, tuple(k["grid"]), tuple(k["block"]), k["shared_bytes"],
                                k["num_params"], ptx=texts.get("ptx"), llvm_ir=texts.get("llvm_ir"))
        artifacts = {f.split(":", 1)[1]: t for f, t in texts.items() if f.startswith("artifact:")}
        out.append(CompiledKernel(record, tuple(k["arg_indices"]), artifacts))
    return out


class KernelCache:
    """The entries under `directory / "kernels"`."""

    def __init__(self, directory: str | os.PathLike):
        self.root = Path(directory) / "kernels"

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def load(self, key: str) -> dict | None:
        """The payload stored under `key`; None when there is none or it is damaged."""
        try:
            data = json.loads(self.path(key).read_bytes())
            payload = data["payload"]
            if data.get("key") != key or data.get("checksum") != _checksum(payload) \
                    or payload.get("format") != ENTRY_FORMAT:
                return None
            return payload
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None

    def store(self, key: str, payload: dict) -> None:
        """Write the entry atomically (temp file + rename); errors leave the cache as it was."""
        data = json.dumps({"key": key, "checksum": _checksum(payload), "payload": payload},
                          sort_keys=True).encode()
        target = self.path(key)
        tmp = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=target.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        except OSError:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


class CachingBackend:
    """A kernel backend that asks `cache` before `inner` (an `EmitterBackend`) compiles.
    `hits`, `misses` and `stored` count fusions."""

    def __init__(self, inner, cache: KernelCache):
        self.inner = inner
        self.cache = cache
        self.target = inner.target
        self.arch = inner.arch
        self._device_json = inner.device.to_json()
        self.hits = self.misses = self.stored = 0
        self._to_store: list[tuple[str, list[CompiledKernel], list[tuple[str, str]]]] = []

    def compile(self, fusion: HloInstruction, args: list[KernelArgumentSpec],
                unique_name: KernelNamer) -> list[CompiledKernel]:
        key = kernel_key(fusion, args, self.target, self.arch, self._device_json)
        reserved: list[tuple[str, str]] = []
        payload = self.cache.load(key)
        if payload is not None:
            try:
                kernels = _instantiate(payload, unique_name, reserved)
            except (KeyError, TypeError, ValueError, AttributeError):  # well-formed JSON, wrong shape
                kernels = None
            if kernels is not None:
                self.hits += 1
                return kernels
        self.misses += 1
        given: list[tuple[str, str]] = []
        kernels = self.inner.compile(fusion, args, _recording_namer(unique_name, reserved, given))
        self._to_store.append((key, kernels, given))
        return kernels

    def finish(self) -> None:
        """Let the inner backend complete its kernels, then store the new entries."""
        to_store, self._to_store = self._to_store, []
        finish = getattr(self.inner, "finish", None)
        if finish is not None:
            finish()
        for key, kernels, given in to_store:
            payload = _entry_payload(kernels, given)
            if payload is not None:
                self.cache.store(key, payload)
                self.stored += 1


def _recording_namer(unique_name: KernelNamer, reserved: list[tuple[str, str]],
                     given: list[tuple[str, str]]) -> KernelNamer:
    """`unique_name` that first hands out the names a failed hit already took (so the module's
    names come out as without the cache) and records every (preferred, given) pair."""
    pending = list(reserved)

    def name(preferred: str) -> str:
        if pending and pending[0][0] == preferred:
            result = pending.pop(0)[1]
        else:
            result = unique_name(preferred)
        given.append((preferred, result))
        return result

    return name
