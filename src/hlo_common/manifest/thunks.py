"""The thunks of a manifest: what `hlo-run` executes, as plain data (XLA's `Thunk` kinds).
# size: the manifest's thunk schema, one dataclass per XLA thunk kind; it reads best whole.

Part of the manifest schema (`hlo_common.manifest`): `hlo-codegen`'s thunk emitter builds these,
`hlo-run` walks them. Every thunk is a dataclass with `to_json()` and a `from_json` that checks
the fields and names the path of a bad one (`thunks[2].body[0].args[1]: missing 'slice'`).
Buffers are named by `BufferSlice`s (allocation index, byte offset, byte size), exactly as XLA's
`BufferAllocation::Slice`:

    KernelThunk       kernel name, launch dims, shared bytes, argument slices (read/written)
    GemmThunk         lhs/rhs/output (and optional c / bias / workspace) slices + a GemmConfig
    ConvolutionThunk  input/filter/output slices + a ConvolutionConfig (the HLO convolution's
                      window, dim_labels, group counts and shapes): a library call, as XLA:GPU's
                      ConvolutionThunk calls cuDNN (hlo-codegen emits it for the host target)
    GemmFusionThunk   a Triton GEMM fusion's computation (HLO text) over operand/output slices:
                      a library call on the host (hlo-codegen emits it for the host target)
    CopyThunk         device-to-device copy of `size` bytes
    MemsetThunk       kMemzero (value 0) or kMemset32BitValue (a repeated 32-bit pattern)
    RngGetAndUpdateStateThunk  writes the 128-bit random-number state into a 16-byte slice and
                      advances it by `delta` (XLA's `rng_state` global: load, add, store)
    CollectiveThunk   (`collective_thunks`) all-reduce, all-gather, ... on several devices
    CudnnConvolutionThunk  (`cudnn_thunks`) a cuDNN graph for one of XLA's `__cudnn$conv*` calls
    WhileThunk        condition and body SequentialThunks; the predicate slice is read back
    ConditionalThunk  a pred or s32 index slice selects one branch SequentialThunk
    SequentialThunk   a list of thunks run in order

    >>> t = CopyThunk("copy.1", BufferSlice(0, 0, 16), BufferSlice(1, 0, 16))
    >>> thunk_from_json(t.to_json(), "t") == t
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Union

from hlo_common.manifest.json_reader import JsonReader, ManifestError


# -- slices ------------------------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class BufferSlice:
    """A byte range of one allocation (XLA's `BufferAllocation::Slice`)."""

    allocation: int
    offset: int
    size: int

    def to_json(self) -> list[int]:
        return [self.allocation, self.offset, self.size]

    @staticmethod
    def from_json(v: Any, path: str) -> BufferSlice:
        if (not isinstance(v, list) or len(v) != 3
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)):
            raise ManifestError(f"{path}: a slice is [allocation, offset, size] of non-negative integers")
        return BufferSlice(*v)

    def __str__(self) -> str:
        return f"{{index:{self.allocation}, offset:{self.offset}, size:{self.size}}}"


def _slice(r: JsonReader, key: str, optional: bool = False) -> BufferSlice | None:
    v = r.data.get(key)
    if v is None:
        if optional:
            return None
        raise ManifestError(f"{r.path}: missing '{key}'")
    return BufferSlice.from_json(v, f"{r.path}.{key}")


# -- thunks ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelArgument:
    """One kernel parameter: its slice, the HLO shape it holds, whether the kernel writes it, and
    the output leaves of the kernel's instruction it holds (shape indices). A kernel takes one
    parameter per distinct slice (XLA's KernelArguments), so an output that reuses an operand's
    buffer is passed as that operand, under the operand's shape: only `outputs` says where it is."""

    slice: BufferSlice
    shape: str
    written: bool
    outputs: tuple[tuple[int, ...], ...] = ()

    def to_json(self) -> dict:
        out = {"slice": self.slice.to_json(), "shape": self.shape, "written": self.written}
        if self.outputs:
            out["outputs"] = [list(index) for index in self.outputs]
        return out

    @staticmethod
    def from_json(v: Any, path: str) -> KernelArgument:
        r = JsonReader(v, path)
        outputs = r._get("outputs", optional=True) or []  # absent in manifests of earlier versions
        if not isinstance(outputs, list) or not all(isinstance(i, list) and all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in i) for i in outputs):
            raise ManifestError(f"{path}.outputs: expected lists of non-negative integers "
                                "(output shape indices)")
        return KernelArgument(_slice(r, "slice"), r.str("shape"), r.bool("written"),
                              tuple(tuple(i) for i in outputs))


@dataclass(frozen=True)
class KernelThunk:
    profile_annotation: str
    kernel: str
    args: tuple[KernelArgument, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0
    kind = "kKernel"

    def to_json(self) -> dict:
        return {"kind": self.kind, "profile_annotation": self.profile_annotation, "kernel": self.kernel,
                "args": [a.to_json() for a in self.args], "grid": list(self.grid),
                "block": list(self.block), "shared_bytes": self.shared_bytes}

    @staticmethod
    def from_json(r: JsonReader) -> KernelThunk:
        args = tuple(KernelArgument.from_json(a, f"{r.path}.args[{i}]") for i, a in enumerate(r.list("args")))
        return KernelThunk(r.str("profile_annotation"), r.str("kernel"), args, r.ints("grid", 3),
                           r.ints("block", 3), r.int("shared_bytes"))

    def describe(self) -> str:
        return (f"kernel={self.kernel}, profile_annotation={self.profile_annotation}, "
                f"launch dimensions={launch_dims_text(self.grid, self.block)}, cluster_dim=nullopt")

    def slices(self) -> list[BufferSlice]:
        return [a.slice for a in self.args]


def launch_dims_text(grid, block) -> str:
    """XLA's `LaunchDimensions::ToString`."""
    return (f"blocks: {{{grid[0]}, {grid[1]}, {grid[2]}}}, "
            f"threads/block: {{{block[0]}, {block[1]}, {block[2]}}}")


@dataclass(frozen=True)
class MatrixLayout:
    """How cuBLAS sees one operand (XLA's `MatrixLayout`): `batch` matrices of rows x cols."""

    batch: int
    rows: int
    cols: int
    order: str  # "row_major" | "column_major"
    leading_dim: int
    batch_stride: int

    def to_json(self) -> dict:
        return {"batch": self.batch, "rows": self.rows, "cols": self.cols, "order": self.order,
                "leading_dim": self.leading_dim, "batch_stride": self.batch_stride}

    @staticmethod
    def from_json(r: JsonReader) -> MatrixLayout:
        order = r.str("order")
        if order not in ("row_major", "column_major"):
            raise ManifestError(f"{r.path}.order: expected row_major or column_major, found {order!r}")
        return MatrixLayout(r.int("batch"), r.int("rows"), r.int("cols"), order, r.int("leading_dim"),
                            r.int("batch_stride"))


EPILOGUES = ("DEFAULT", "RELU", "BIAS", "BIAS_RELU", "GELU", "BIAS_GELU")


@dataclass(frozen=True)
class GemmConfig:
    """What a GEMM computes: `epilogue(alpha * dot(lhs, rhs) + beta * c [+ bias])`, rounded once.

    Shapes are HLO shape texts with layouts; the dot dimension numbers are HLO's; the matrix
    layouts are what cuBLAS needs (lhs [batch, M, K], rhs [batch, K, N], output [batch, M, N])."""

    lhs_shape: str
    rhs_shape: str
    output_shape: str
    lhs_batch_dims: tuple[int, ...]
    rhs_batch_dims: tuple[int, ...]
    lhs_contracting_dims: tuple[int, ...]
    rhs_contracting_dims: tuple[int, ...]
    lhs_matrix: MatrixLayout
    rhs_matrix: MatrixLayout
    output_matrix: MatrixLayout
    alpha_real: float = 1.0
    alpha_imag: float = 0.0
    beta: float = 0.0
    epilogue: str = "DEFAULT"

    def to_json(self) -> dict:
        return {"lhs_shape": self.lhs_shape, "rhs_shape": self.rhs_shape, "output_shape": self.output_shape,
                "lhs_batch_dims": list(self.lhs_batch_dims), "rhs_batch_dims": list(self.rhs_batch_dims),
                "lhs_contracting_dims": list(self.lhs_contracting_dims),
                "rhs_contracting_dims": list(self.rhs_contracting_dims),
                "lhs_matrix": self.lhs_matrix.to_json(), "rhs_matrix": self.rhs_matrix.to_json(),
                "output_matrix": self.output_matrix.to_json(), "alpha_real": self.alpha_real,
                "alpha_imag": self.alpha_imag, "beta": self.beta, "epilogue": self.epilogue}

    @staticmethod
    def from_json(r: JsonReader) -> GemmConfig:
        epilogue = r.str("epilogue")
        if epilogue not in EPILOGUES:
            raise ManifestError(f"{r.path}.epilogue: unknown epilogue {epilogue!r}")
        return GemmConfig(
            r.str("lhs_shape"), r.str("rhs_shape"), r.str("output_shape"), r.ints("lhs_batch_dims"),
            r.ints("rhs_batch_dims"), r.ints("lhs_contracting_dims"), r.ints("rhs_contracting_dims"),
            MatrixLayout.from_json(r.obj("lhs_matrix")), MatrixLayout.from_json(r.obj("rhs_matrix")),
            MatrixLayout.from_json(r.obj("output_matrix")), r.float("alpha_real"), r.float("alpha_imag"),
            r.float("beta"), epilogue)


@dataclass(frozen=True)
class GemmThunk:
    profile_annotation: str
    config: GemmConfig
    lhs: BufferSlice
    rhs: BufferSlice
    output: BufferSlice
    c: BufferSlice | None = None  # read when beta != 0 (XLA: the output aliases it)
    bias: BufferSlice | None = None  # BIAS epilogues: added along the output's most minor elements
    workspace: BufferSlice | None = None
    kind = "kGemm"

    def to_json(self) -> dict:
        out = {"kind": self.kind, "profile_annotation": self.profile_annotation,
               "config": self.config.to_json(), "lhs": self.lhs.to_json(), "rhs": self.rhs.to_json(),
               "output": self.output.to_json()}
        for key in ("c", "bias", "workspace"):
            v = getattr(self, key)
            if v is not None:
                out[key] = v.to_json()
        return out

    @staticmethod
    def from_json(r: JsonReader) -> GemmThunk:
        return GemmThunk(r.str("profile_annotation"), GemmConfig.from_json(r.obj("config")), _slice(r, "lhs"),
                         _slice(r, "rhs"), _slice(r, "output"), _slice(r, "c", True), _slice(r, "bias", True),
                         _slice(r, "workspace", True))

    def describe(self) -> str:
        return (f"profile_annotation={self.profile_annotation}, lhs={self.lhs}, rhs={self.rhs}, "
                f"out={self.output}")

    def slices(self) -> list[BufferSlice]:
        all_slices = (self.lhs, self.rhs, self.output, self.c, self.bias, self.workspace)
        return [s for s in all_slices if s is not None]


CONVOLUTION_KINDS = ("forward",)


@dataclass(frozen=True)
class ConvolutionConfig:
    """What a convolution computes, as HLO says it: `kind` (XLA's CudnnConvKind; "forward" is
    HLO's `convolution`), the shapes with layouts, `window` and `dim_labels` in HLO's text form
    (e.g. "size=3x3 pad=1_1x1_1" and "b01f_01io->b01f") and the group counts."""

    kind: str
    input_shape: str
    filter_shape: str
    output_shape: str
    window: str
    dim_labels: str
    feature_group_count: int = 1
    batch_group_count: int = 1

    def to_json(self) -> dict:
        return {"kind": self.kind, "input_shape": self.input_shape, "filter_shape": self.filter_shape,
                "output_shape": self.output_shape, "window": self.window, "dim_labels": self.dim_labels,
                "feature_group_count": self.feature_group_count, "batch_group_count": self.batch_group_count}

    @staticmethod
    def from_json(r: JsonReader) -> ConvolutionConfig:
        from hlo_common.hlo.attributes import ConvDimensionNumbers, Window

        cfg = ConvolutionConfig(r.str("kind"), r.str("input_shape"), r.str("filter_shape"),
                                r.str("output_shape"), r.str("window"), r.str("dim_labels"),
                                r.int("feature_group_count", minimum=1),
                                r.int("batch_group_count", minimum=1))
        if cfg.kind not in CONVOLUTION_KINDS:
            raise ManifestError(f"{r.path}.kind: unknown convolution kind {cfg.kind!r}")
        for key, parse in (("window", Window.parse), ("dim_labels", ConvDimensionNumbers.parse)):
            try:
                parse(getattr(cfg, key))
            except ValueError as err:
                raise ManifestError(f"{r.path}.{key}: {err}") from None
        return cfg


@dataclass(frozen=True)
class ConvolutionThunk:
    profile_annotation: str
    config: ConvolutionConfig
    input: BufferSlice
    filter: BufferSlice
    output: BufferSlice
    kind = "kConvolution"

    def to_json(self) -> dict:
        return {"kind": self.kind, "profile_annotation": self.profile_annotation,
                "config": self.config.to_json(), "input": self.input.to_json(),
                "filter": self.filter.to_json(), "output": self.output.to_json()}

    @staticmethod
    def from_json(r: JsonReader) -> ConvolutionThunk:
        return ConvolutionThunk(r.str("profile_annotation"), ConvolutionConfig.from_json(r.obj("config")),
                                _slice(r, "input"), _slice(r, "filter"), _slice(r, "output"))

    def describe(self) -> str:
        return (f"profile_annotation={self.profile_annotation}, input={self.input}, filter={self.filter}, "
                f"out={self.output}")

    def slices(self) -> list[BufferSlice]:
        return [self.input, self.filter, self.output]


@dataclass(frozen=True)
class GemmFusionThunk:
    """A Triton GEMM fusion run as one library call on the host: `computation` is an HLO module
    whose entry is the fusion's computation (parameter i reads `operands[i]`, of
    `operand_shapes[i]`), evaluated with numpy there (the dot through numpy's BLAS), its result
    written to `output` (of `output_shape`). The cuda target launches a kernel instead."""

    profile_annotation: str
    computation: str
    operands: tuple[BufferSlice, ...]
    operand_shapes: tuple[str, ...]
    output: BufferSlice
    output_shape: str
    kind = "kGemmFusion"

    def to_json(self) -> dict:
        return {"kind": self.kind, "profile_annotation": self.profile_annotation,
                "computation": self.computation, "operands": [o.to_json() for o in self.operands],
                "operand_shapes": list(self.operand_shapes), "output": self.output.to_json(),
                "output_shape": self.output_shape}

    @staticmethod
    def from_json(r: JsonReader) -> GemmFusionThunk:
        operands = tuple(BufferSlice.from_json(v, f"{r.path}.operands[{i}]")
                         for i, v in enumerate(r.list("operands")))
        shapes = tuple(r.list("operand_shapes"))
        if not all(isinstance(t, str) for t in shapes):
            raise ManifestError(f"{r.path}.operand_shapes: expected shape strings")
        if len(shapes) != len(operands):
            raise ManifestError(f"{r.path}: {len(operands)} operands but {len(shapes)} operand shapes")
        return GemmFusionThunk(r.str("profile_annotation"), r.str("computation"), operands, shapes,
                               _slice(r, "output"), r.str("output_shape"))

    def describe(self) -> str:
        ops = ", ".join(str(o) for o in self.operands)
        return f"profile_annotation={self.profile_annotation}, operands=[{ops}], out={self.output}"

    def slices(self) -> list[BufferSlice]:
        return [*self.operands, self.output]


@dataclass(frozen=True)
class CopyThunk:
    profile_annotation: str
    source: BufferSlice
    destination: BufferSlice
    kind = "kCopy"

    def to_json(self) -> dict:
        return {"kind": self.kind, "profile_annotation": self.profile_annotation,
                "source": self.source.to_json(), "destination": self.destination.to_json()}

    @staticmethod
    def from_json(r: JsonReader) -> CopyThunk:
        t = CopyThunk(r.str("profile_annotation"), _slice(r, "source"), _slice(r, "destination"))
        if t.source.size != t.destination.size:
            raise ManifestError(f"{r.path}: copy from {t.source.size} bytes into {t.destination.size}")
        return t

    def describe(self) -> str:
        return f"profile_annotation={self.profile_annotation}, src={self.source}, dst={self.destination}"

    def slices(self) -> list[BufferSlice]:
        return [self.source, self.destination]


@dataclass(frozen=True)
class MemsetThunk:
    """Fill a slice: with zero bytes (kMemzero) or a repeated 32-bit pattern (kMemset32BitValue)."""

    profile_annotation: str
    destination: BufferSlice
    value: int = 0  # the 32-bit pattern, little-endian in memory

    @property
    def kind(self) -> str:
        return "kMemzero" if self.value == 0 else "kMemset32BitValue"

    def to_json(self) -> dict:
        return {"kind": self.kind, "profile_annotation": self.profile_annotation,
                "destination": self.destination.to_json(), "value": self.value}

    @staticmethod
    def from_json(r: JsonReader) -> MemsetThunk:
        value = r.int("value")
        if value >= 1 << 32:
            raise ManifestError(f"{r.path}.value: {value} does not fit in 32 bits")
        t = MemsetThunk(r.str("profile_annotation"), _slice(r, "destination"), value)
        if value and t.destination.size % 4:
            raise ManifestError(f"{r.path}: a 32-bit memset of {t.destination.size} bytes "
                                "(not a multiple of 4)")
        return t

    def describe(self) -> str:
        value = "" if self.value == 0 else f", value=0x{self.value:08x}"
        return f"profile_annotation={self.profile_annotation}, dst={self.destination}{value}"

    def slices(self) -> list[BufferSlice]:
        return [self.destination]


RNG_INITIAL_STATE = 0x7012395  # XLA:GPU's initializer of the `rng_state` global (and the interpreter's)


@dataclass(frozen=True)
class RngGetAndUpdateStateThunk:
    """rng-get-and-update-state: the current 128-bit state, little-endian, into `destination` (a
    u64[2] holds the low word first), then state += delta modulo 2^128. The state starts at
    RNG_INITIAL_STATE at the start of each run."""

    profile_annotation: str
    destination: BufferSlice
    delta: int
    kind = "kRngGetAndUpdateState"

    def to_json(self) -> dict:
        return {"kind": self.kind, "profile_annotation": self.profile_annotation,
                "destination": self.destination.to_json(), "delta": self.delta}

    @staticmethod
    def from_json(r: JsonReader) -> RngGetAndUpdateStateThunk:
        t = RngGetAndUpdateStateThunk(r.str("profile_annotation"), _slice(r, "destination"),
                                      r.int("delta", minimum=-(1 << 63)))
        if t.destination.size != 16:
            raise ManifestError(f"{r.path}: the 128-bit state needs 16 bytes, the slice has "
                                f"{t.destination.size}")
        return t

    def describe(self) -> str:
        return f"profile_annotation={self.profile_annotation}, dst={self.destination}, delta={self.delta}"

    def slices(self) -> list[BufferSlice]:
        return [self.destination]


@dataclass(frozen=True)
class SequentialThunk:
    thunks: tuple[Thunk, ...] = ()
    profile_annotation: str = ""
    kind = "kSequential"

    def to_json(self) -> dict:
        return {"kind": self.kind, "profile_annotation": self.profile_annotation,
                "thunks": [t.to_json() for t in self.thunks]}

    @staticmethod
    def from_json(r: JsonReader) -> SequentialThunk:
        items = r.list("thunks")
        thunks = tuple(thunk_from_json(t, f"{r.path}.thunks[{i}]") for i, t in enumerate(items))
        return SequentialThunk(thunks, r.str("profile_annotation"))

    def slices(self) -> list[BufferSlice]:
        return []


def _sequence(r: JsonReader, key: str) -> SequentialThunk:
    sub = r.obj(key)
    t = thunk_from_json(sub.data, sub.path)
    if not isinstance(t, SequentialThunk):
        raise ManifestError(f"{sub.path}: expected a kSequential thunk, found {t.kind}")
    return t


@dataclass(frozen=True)
class WhileThunk:
    profile_annotation: str
    predicate: BufferSlice  # the condition's pred[] result, read back after each condition run
    condition: SequentialThunk
    body: SequentialThunk
    trip_count: int | None = None  # known trip count (informational; the condition still runs)
    kind = "kWhile"

    def to_json(self) -> dict:
        out = {"kind": self.kind, "profile_annotation": self.profile_annotation,
               "predicate": self.predicate.to_json(), "condition": self.condition.to_json(),
               "body": self.body.to_json()}
        if self.trip_count is not None:
            out["trip_count"] = self.trip_count
        return out

    @staticmethod
    def from_json(r: JsonReader) -> WhileThunk:
        return WhileThunk(r.str("profile_annotation"), _slice(r, "predicate"), _sequence(r, "condition"),
                          _sequence(r, "body"), r.int("trip_count", optional=True))

    def slices(self) -> list[BufferSlice]:
        return [self.predicate]

    def children(self) -> list[tuple[str, SequentialThunk]]:
        return [("condition", self.condition), ("body", self.body)]


@dataclass(frozen=True)
class ConditionalThunk:
    profile_annotation: str
    branch_index: BufferSlice  # pred[] (true -> branch 0) or s32[] (out of range -> last branch)
    index_is_bool: bool
    branches: tuple[SequentialThunk, ...] = field(default_factory=tuple)
    kind = "kConditional"

    def to_json(self) -> dict:
        return {"kind": self.kind, "profile_annotation": self.profile_annotation,
                "branch_index": self.branch_index.to_json(), "index_is_bool": self.index_is_bool,
                "branches": [b.to_json() for b in self.branches]}

    @staticmethod
    def from_json(r: JsonReader) -> ConditionalThunk:
        branches = []
        for i, b in enumerate(r.list("branches")):
            t = thunk_from_json(b, f"{r.path}.branches[{i}]")
            if not isinstance(t, SequentialThunk):
                raise ManifestError(f"{r.path}.branches[{i}]: expected a kSequential thunk, found {t.kind}")
            branches.append(t)
        t = ConditionalThunk(r.str("profile_annotation"), _slice(r, "branch_index"), r.bool("index_is_bool"),
                             tuple(branches))
        if not branches or (t.index_is_bool and len(branches) != 2):
            raise ManifestError(f"{r.path}: {len(branches)} branches for a "
                                f"{'pred' if t.index_is_bool else 'index'} conditional")
        return t

    def slices(self) -> list[BufferSlice]:
        return [self.branch_index]

    def children(self) -> list[tuple[str, SequentialThunk]]:
        if self.index_is_bool:
            return [("true", self.branches[0]), ("false", self.branches[1])]
        return [(f"branch_{i}", b) for i, b in enumerate(self.branches)]


Thunk = Union[KernelThunk, GemmThunk, ConvolutionThunk, GemmFusionThunk, CopyThunk, MemsetThunk,
              RngGetAndUpdateStateThunk,
              WhileThunk, ConditionalThunk, SequentialThunk]

THUNK_KINDS: dict[str, Callable[[JsonReader], Thunk]] = {
    "kKernel": KernelThunk.from_json,
    "kGemm": GemmThunk.from_json,
    "kConvolution": ConvolutionThunk.from_json,
    "kGemmFusion": GemmFusionThunk.from_json,
    "kCopy": CopyThunk.from_json,
    "kMemzero": MemsetThunk.from_json,
    "kMemset32BitValue": MemsetThunk.from_json,
    "kRngGetAndUpdateState": RngGetAndUpdateStateThunk.from_json,
    "kWhile": WhileThunk.from_json,
    "kConditional": ConditionalThunk.from_json,
    "kSequential": SequentialThunk.from_json,
}


def thunk_from_json(data: Any, path: str) -> Thunk:
    r = JsonReader(data, path)
    kind = r.str("kind")
    build = THUNK_KINDS.get(kind) or _collective_kinds().get(kind) or _cudnn_kinds().get(kind)
    if build is None:
        known = ", ".join(sorted(THUNK_KINDS))
        raise ManifestError(f"{path}: unknown thunk kind {kind!r} (known: {known} and the collectives)")
    return build(r)


def _collective_kinds() -> dict[str, Callable[[JsonReader], Any]]:
    """The kinds of `collective_thunks` (several devices), which imports this module."""
    from hlo_common.manifest.collective_thunks import COLLECTIVE_THUNK_KINDS

    return COLLECTIVE_THUNK_KINDS


def _cudnn_kinds() -> dict[str, Callable[[JsonReader], Any]]:
    """The cuDNN convolution thunk of `cudnn_thunks` (the cuda target), which imports this module."""
    from hlo_common.manifest.cudnn_thunks import CUDNN_THUNK_KINDS

    return CUDNN_THUNK_KINDS


def children(thunk: Thunk) -> list[tuple[str, SequentialThunk]]:
    """The nested sequences of a thunk, labelled as thunk_sequence.txt labels them."""
    get = getattr(thunk, "children", None)
    return get() if get is not None else []


def walk(thunk: Thunk) -> Iterator[Thunk]:
    """Every thunk under `thunk` in pre-order (a nested SequentialThunk too, then its items)."""
    items = thunk.thunks if isinstance(thunk, SequentialThunk) else ()
    for t in items:
        yield t
        if isinstance(t, SequentialThunk):
            yield from walk(t)
        for _, seq in children(t):
            yield from walk(seq)


def thunk_labels(sequence: SequentialThunk) -> list[tuple[Thunk, str]]:
    """(thunk, `NNN kKind name`) for every thunk, numbered from 1 in pre-order as hlo-codegen's
    thunk_sequence.txt numbers them (nested sequences after their thunk)."""
    return [(t, f"{n:03d} {t.kind} {t.profile_annotation}") for n, t in enumerate(walk(sequence), start=1)]
