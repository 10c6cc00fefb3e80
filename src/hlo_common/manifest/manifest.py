"""The manifest: one versioned JSON file that carries a compiled module from hlo-codegen to hlo-run.

Where it sits: `hlo-opt | hlo-codegen | hlo-run`. hlo-codegen writes it (XLA's `GpuExecutable` as
data: the optimized HLO, buffer allocations, kernels and the thunk tree); hlo-run reads it and
runs it on the cuda or host platform, or interprets the HLO inside it. Nothing in it depends on
the machine that wrote it or on the time it was written.

Layout (keys sorted; lists keep their meaningful order, kernels are sorted by name):

    format, version        "hlo-toolchain-manifest", FORMAT_VERSION
    module_name, target, arch       e.g. "jit_f", "cuda", "sm_90" ("host" target: arch "host")
    hlo                    the module as compiled (after codegen's fusion wrapping / copy insertion)
    entry                  parameter shapes, the result shape, and the slice of every result leaf
    allocations            XLA's BufferAllocations: size, kind (parameter | constant | output | temp),
                           parameter number and shape index, constant bytes (base64), alignment
    kernels                name, launch dims, shared bytes, parameter count, `ptx` or `llvm_ir`;
                           a Triton kernel also `triton`: cubin, num_warps, cluster dims
    thunks                 the entry SequentialThunk (`hlo_common.manifest.thunks`)
    replica_count, num_partitions   the devices it was compiled for (N = their product; every
                           device runs these thunks, collective thunks name the groups)
    integrity              {"sha256": hex digest of the canonical JSON of everything else}

`Manifest.to_bytes()` is deterministic (sorted keys, fixed separators, base64 constants), so two
runs of hlo-codegen give byte-identical files. `load_manifest(data, name)` rejects, with one
`ManifestError` line naming the problem, a file that is truncated or not JSON, of another format
or version, whose digest does not match (hand-edited), or whose thunks reference unknown
allocations or kernels, slices outside their allocation, or kernels without code for the target.

    >>> m = load_manifest(open("f.manifest.json", "rb").read(), "f.manifest.json")  # doctest: +SKIP
    >>> m.kernels["loop_add_fusion"].grid
    (1, 1, 1)
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from hlo_common.errors import HloParseError
from hlo_common.manifest.collective_thunks import CollectiveThunk
from hlo_common.manifest.json_reader import JsonReader, ManifestError
from hlo_common.manifest.thunks import (
    BufferSlice, ConvolutionThunk, GemmFusionThunk, GemmThunk, KernelThunk, SequentialThunk, Thunk,
    thunk_from_json, walk,
)
from hlo_common.hlo.shape import Shape

FORMAT_NAME = "hlo-toolchain-manifest"
# 2: collective thunks (`collective_thunks`) and the device counts `replica_count`, `num_partitions`
# 3: Triton kernels (`ManifestKernel`'s `triton` metadata: cubin, warps, cluster dims, scratch params)
FORMAT_VERSION = 3
TARGETS = ("cuda", "host")
ALLOCATION_KINDS = ("parameter", "constant", "output", "temp")
# Which field of a kernel holds its code, per target.
KERNEL_CODE_FIELD = {"cuda": "ptx", "host": "llvm_ir"}

__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "Allocation", "EntrySignature", "Manifest", "ManifestError",
    "ManifestKernel", "OutputLeaf", "load_manifest", "looks_like_manifest", "parse_shape_text",
]


def parse_shape_text(text: str, path: str) -> Shape:
    """A shape from its HLO text (`f32[2,3]{1,0}`, tuples); ManifestError naming `path` if bad."""
    from hlo_common.hlo.parser_scanner import Scanner

    scanner = Scanner(text, path)
    try:
        shape = scanner.shape()
        scanner.ws()
    except HloParseError as exc:
        raise ManifestError(f"{path}: bad shape {text!r:.60}: {exc.message}") from None
    if scanner.pos != len(text):
        raise ManifestError(f"{path}: bad shape {text!r:.60}: text after the shape")
    return shape


@dataclass(frozen=True)
class Allocation:
    """One device buffer (XLA's `BufferAllocation`)."""

    index: int
    size: int
    kind: str  # ALLOCATION_KINDS
    alignment: int
    maybe_live_out: bool = False
    parameter_number: int | None = None
    parameter_shape_index: tuple[int, ...] = ()
    constant: bytes | None = None  # the bytes of a constant allocation, in physical layout order
    color: int = 0

    def to_json(self) -> dict:
        out: dict[str, Any] = {"index": self.index, "size": self.size, "kind": self.kind,
                               "alignment": self.alignment, "maybe_live_out": self.maybe_live_out,
                               "color": self.color}
        if self.kind == "parameter":
            out["parameter_number"] = self.parameter_number
            out["parameter_shape_index"] = list(self.parameter_shape_index)
        if self.constant is not None:
            out["constant"] = base64.b64encode(self.constant).decode("ascii")
        return out

    @staticmethod
    def from_json(v: Any, path: str) -> Allocation:
        r = JsonReader(v, path)
        kind = r.str("kind")
        if kind not in ALLOCATION_KINDS:
            raise ManifestError(f"{path}.kind: unknown allocation kind {kind!r}")
        number, index = None, ()
        if kind == "parameter":
            number, index = r.int("parameter_number"), r.ints("parameter_shape_index")
        constant = None
        text = r.str("constant", optional=True)
        if text is not None:
            try:
                constant = base64.b64decode(text.encode("ascii"), validate=True)
            except (ValueError, UnicodeEncodeError):
                raise ManifestError(f"{path}.constant: not valid base64") from None
        alloc = Allocation(r.int("index"), r.int("size"), kind, r.int("alignment", minimum=1),
                           r.bool("maybe_live_out"), number, index, constant, r.int("color"))
        if kind == "constant" and (constant is None or len(constant) != alloc.size):
            have = "no bytes" if constant is None else f"{len(constant)} bytes"
            raise ManifestError(f"{path}: constant allocation of {alloc.size} bytes holds {have}")
        return alloc


@dataclass(frozen=True)
class OutputLeaf:
    """One array leaf of the entry result: where it lives after the run."""

    shape_index: tuple[int, ...]
    shape: str
    slice: BufferSlice

    def to_json(self) -> dict:
        return {"shape_index": list(self.shape_index), "shape": self.shape, "slice": self.slice.to_json()}

    @staticmethod
    def from_json(v: Any, path: str) -> OutputLeaf:
        r = JsonReader(v, path)
        return OutputLeaf(r.ints("shape_index"), r.str("shape"), BufferSlice.from_json(r.data.get("slice"),
                                                                                      f"{path}.slice"))


@dataclass(frozen=True)
class EntrySignature:
    parameter_shapes: tuple[str, ...]
    result_shape: str
    outputs: tuple[OutputLeaf, ...]

    def to_json(self) -> dict:
        return {"parameter_shapes": list(self.parameter_shapes), "result_shape": self.result_shape,
                "outputs": [o.to_json() for o in self.outputs]}

    @staticmethod
    def from_json(r: JsonReader) -> EntrySignature:
        params = r.list("parameter_shapes")
        if not all(isinstance(p, str) for p in params):
            raise ManifestError(f"{r.path}.parameter_shapes: expected shape strings")
        outputs = tuple(OutputLeaf.from_json(o, f"{r.path}.outputs[{i}]")
                        for i, o in enumerate(r.list("outputs")))
        return EntrySignature(tuple(params), r.str("result_shape"), outputs)


@dataclass(frozen=True)
class ManifestKernel:
    """One compiled kernel: PTX (cuda) or LLVM IR with `void @name(ptr, i64, i64)` (host).

    A Triton kernel (a GEMM fusion, `hlo_codegen.triton_gemm`) also carries Triton's metadata:
    its `cubin` for the manifest's arch, `num_warps`, `cluster_dims`, and `scratch_params`, the
    trailing pointer parameters Triton adds (global and profile scratch), passed as null: the
    kernels written here use no scratch memory."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    num_params: int
    ptx: str | None = None
    llvm_ir: str | None = None
    cubin: bytes | None = None
    num_warps: int | None = None
    cluster_dims: tuple[int, int, int] | None = None
    scratch_params: int = 0

    def to_json(self) -> dict:
        out: dict[str, Any] = {"name": self.name, "grid": list(self.grid), "block": list(self.block),
                               "shared_bytes": self.shared_bytes, "num_params": self.num_params}
        if self.ptx is not None:
            out["ptx"] = self.ptx
        if self.llvm_ir is not None:
            out["llvm_ir"] = self.llvm_ir
        if self.num_warps is not None:  # a Triton kernel
            out["triton"] = {"num_warps": self.num_warps,
                             "cluster_dims": list(self.cluster_dims or (1, 1, 1)),
                             "scratch_params": self.scratch_params,
                             "cubin": base64.b64encode(self.cubin or b"").decode("ascii")}
        return out

    @staticmethod
    def from_json(v: Any, path: str) -> ManifestKernel:
        r = JsonReader(v, path)
        kernel = ManifestKernel(r.str("name"), r.ints("grid", 3), r.ints("block", 3), r.int("shared_bytes"),
                                r.int("num_params"), r.str("ptx", optional=True),
                                r.str("llvm_ir", optional=True))
        if "triton" not in r.data:
            return kernel
        t = r.obj("triton")
        try:
            cubin = base64.b64decode(t.str("cubin").encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            raise ManifestError(f"{path}.triton.cubin: not valid base64") from None
        return replace(kernel, cubin=cubin or None, num_warps=t.int("num_warps", minimum=1),
                       cluster_dims=t.ints("cluster_dims", 3), scratch_params=t.int("scratch_params"))


@dataclass
class Manifest:
    module_name: str
    target: str
    arch: str
    hlo: str
    entry: EntrySignature
    allocations: list[Allocation]
    kernels: dict[str, ManifestKernel]
    thunks: SequentialThunk
    replica_count: int = 1
    num_partitions: int = 1
    format: str = FORMAT_NAME
    version: int = FORMAT_VERSION
    _shapes: dict = field(default_factory=dict, repr=False, compare=False)

    # -- writing --------------------------------------------------------------------------------
    def body_json(self) -> dict:
        return {"format": self.format, "version": self.version, "module_name": self.module_name,
                "target": self.target, "arch": self.arch, "hlo": self.hlo, "entry": self.entry.to_json(),
                "allocations": [a.to_json() for a in self.allocations],
                "kernels": [self.kernels[k].to_json() for k in sorted(self.kernels)],
                "thunks": self.thunks.to_json(), "replica_count": self.replica_count,
                "num_partitions": self.num_partitions}

    def to_bytes(self) -> bytes:
        """The file: indented JSON with sorted keys and the integrity digest; deterministic."""
        body = self.body_json()
        body["integrity"] = {"sha256": body_digest(body)}
        return (json.dumps(body, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode("ascii")

    # -- queries --------------------------------------------------------------------------------
    def parameter_shapes(self) -> list[Shape]:
        return [self.shape(t, f"entry.parameter_shapes[{i}]")
                for i, t in enumerate(self.entry.parameter_shapes)]

    def result_shape(self) -> Shape:
        return self.shape(self.entry.result_shape, "entry.result_shape")

    def shape(self, text: str, path: str = "shape") -> Shape:
        cached = self._shapes.get(text)
        if cached is None:
            cached = self._shapes[text] = parse_shape_text(text, path)
        return cached

    @property
    def devices(self) -> int:
        return self.replica_count * self.num_partitions

    def all_thunks(self) -> list[Thunk]:
        return list(walk(self.thunks))

    # -- checks ---------------------------------------------------------------------------------
    def validate(self) -> None:
        """Cross-reference checks; a ManifestError names the first problem."""
        if self.target not in TARGETS:
            raise ManifestError(f"target {self.target!r} is not one of {', '.join(TARGETS)}")
        for i, a in enumerate(self.allocations):
            if a.index != i:
                raise ManifestError(f"allocations[{i}] has index {a.index}")
        self._validate_parameters()
        self._validate_entry_outputs()
        self._validate_kernels()
        for n, thunk in enumerate(self.all_thunks(), start=1):
            where = f"thunk {n:03d} ({thunk.kind} {thunk.profile_annotation or '-'})"
            for s in thunk.slices():
                self.check_slice(s, where)
            if isinstance(thunk, KernelThunk):
                self._validate_kernel_thunk(thunk, where)
            elif isinstance(thunk, GemmThunk):
                self.shape(thunk.config.lhs_shape, where)
                self.shape(thunk.config.rhs_shape, where)
                self.shape(thunk.config.output_shape, where)
            elif isinstance(thunk, ConvolutionThunk):
                for text in (thunk.config.input_shape, thunk.config.filter_shape, thunk.config.output_shape):
                    self.shape(text, where)
            elif isinstance(thunk, GemmFusionThunk):
                for text in (*thunk.operand_shapes, thunk.output_shape):
                    self.shape(text, where)
            elif isinstance(thunk, CollectiveThunk) and thunk.devices() > self.devices:
                raise ManifestError(f"{where} names device {thunk.devices() - 1}, but the manifest is "
                                    f"for {self.devices} device(s)")

    def check_slice(self, s: BufferSlice, where: str) -> None:
        if s.allocation >= len(self.allocations):
            raise ManifestError(f"{where} references unknown allocation {s.allocation} "
                                f"(the manifest has {len(self.allocations)})")
        size = self.allocations[s.allocation].size
        if s.offset + s.size > size:
            raise ManifestError(f"{where}: slice {s} lies outside allocation {s.allocation} ({size} bytes)")

    def _validate_parameters(self) -> None:
        params = self.parameter_shapes()
        for a in self.allocations:
            if a.kind != "parameter":
                continue
            where = f"allocation {a.index}"
            if a.parameter_number >= len(params):
                raise ManifestError(f"{where}: parameter {a.parameter_number}, but the entry takes "
                                    f"{len(params)}")
            shape = params[a.parameter_number]
            try:
                leaf = shape.subshape(a.parameter_shape_index)
            except (IndexError, TypeError):
                raise ManifestError(f"{where}: shape index {list(a.parameter_shape_index)} is not in "
                                    f"parameter {a.parameter_number} ({shape})") from None
            if leaf.is_tuple or leaf.byte_size() > a.size:
                raise ManifestError(f"{where}: {a.size} bytes cannot hold parameter {a.parameter_number} "
                                    f"{list(a.parameter_shape_index)} ({leaf})")

    def _validate_entry_outputs(self) -> None:
        result = self.result_shape()
        leaves = [idx for idx, s in result.leaf_shapes() if s.is_array]
        got = [o.shape_index for o in self.entry.outputs]
        if got != leaves:
            raise ManifestError(f"entry.outputs name leaves {got}, the result {result} has array leaves "
                                f"{leaves}")
        for o in self.entry.outputs:
            where = f"entry output {list(o.shape_index)}"
            self.check_slice(o.slice, where)
            if self.shape(o.shape, where).byte_size() != o.slice.size:
                raise ManifestError(f"{where}: a {o.slice.size}-byte slice for {o.shape}")

    def _validate_kernels(self) -> None:
        code_field = KERNEL_CODE_FIELD[self.target]
        for name, k in self.kernels.items():
            if k.name != name:
                raise ManifestError(f"kernel {name!r} is recorded under the name {k.name!r}")
            if getattr(k, code_field) is None:
                raise ManifestError(f"kernel {name} has no {code_field} for target {self.target}")

    def _validate_kernel_thunk(self, thunk: KernelThunk, where: str) -> None:
        kernel = self.kernels.get(thunk.kernel)
        if kernel is None:
            raise ManifestError(f"{where} references unknown kernel '{thunk.kernel}'")
        if kernel.num_params != len(thunk.args):
            raise ManifestError(f"{where} passes {len(thunk.args)} arguments to kernel {kernel.name}, "
                                f"which takes {kernel.num_params}")
        if (kernel.grid, kernel.block, kernel.shared_bytes) != (thunk.grid, thunk.block, thunk.shared_bytes):
            raise ManifestError(f"{where}: launch dimensions differ from kernel {kernel.name}'s")


def body_digest(body: dict) -> str:
    """sha256 of the canonical compact JSON of the manifest body (without `integrity`)."""
    canonical = json.dumps({k: v for k, v in body.items() if k != "integrity"}, sort_keys=True,
                           separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def looks_like_manifest(text: str | bytes) -> bool:
    """True when the input is JSON (an object) rather than HLO text, which never starts with `{`."""
    head = text.lstrip()[:1]
    return head in ("{", b"{")


def load_manifest(data: str | bytes, name: str = "<manifest>") -> Manifest:
    """Parse, check and return a manifest; a ManifestError (`<name>: ...`, one line) otherwise."""
    try:
        return _load(data)
    except ManifestError as exc:
        raise ManifestError(f"{name}: {exc.one_line()}") from None
    except RecursionError:  # 5,000 nested JSON arrays, or thunks nested as deep
        raise ManifestError(f"{name}: nested too deeply (JSON values or thunks deeper than the reader's "
                            "recursion limit); hlo-codegen never writes such a manifest") from None


def _load(data: str | bytes) -> Manifest:
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ManifestError(f"not UTF-8 at byte offset {exc.start}") from None
    try:
        body = json.loads(data)
    except json.JSONDecodeError as exc:
        at_end = exc.pos >= len(data.rstrip()) - 1 or exc.msg.startswith("Unterminated")
        what = "truncated" if at_end else "not valid JSON"
        raise ManifestError(f"{what}: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    r = JsonReader(body, "manifest")
    fmt = body.get("format")
    if fmt != FORMAT_NAME:
        raise ManifestError(f"not an {FORMAT_NAME} file (format {fmt!r})")
    version = body.get("version")
    if version != FORMAT_VERSION:
        raise ManifestError(f"manifest format version {version!r}; this tool reads version {FORMAT_VERSION} "
                            "(compile the module again with this hlo-codegen)")
    integrity = r.obj("integrity").str("sha256")
    digest = body_digest(body)
    if integrity != digest:
        raise ManifestError(f"integrity check failed: the content does not match its sha256 "
                            f"({integrity[:12]}... recorded, {digest[:12]}... computed); "
                            "was it edited by hand?")
    manifest = _from_body(r)
    manifest.validate()
    return manifest


def _from_body(r: JsonReader) -> Manifest:
    allocations = [Allocation.from_json(a, f"allocations[{i}]") for i, a in enumerate(r.list("allocations"))]
    kernels: dict[str, ManifestKernel] = {}
    for i, k in enumerate(r.list("kernels")):
        kernel = ManifestKernel.from_json(k, f"kernels[{i}]")
        if kernel.name in kernels:
            raise ManifestError(f"kernels[{i}]: a second kernel named {kernel.name}")
        kernels[kernel.name] = kernel
    top = r.obj("thunks")
    thunks = thunk_from_json(top.data, "thunks")
    if not isinstance(thunks, SequentialThunk):
        raise ManifestError(f"thunks: expected a kSequential thunk, found {thunks.kind}")
    return Manifest(r.str("module_name"), r.str("target"), r.str("arch"), r.str("hlo"),
                    EntrySignature.from_json(r.obj("entry")), allocations, kernels, thunks,
                    r.int("replica_count", minimum=1), r.int("num_partitions", minimum=1))
