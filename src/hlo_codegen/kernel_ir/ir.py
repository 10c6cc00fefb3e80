"""The kernel IR's data structures: `Kernel` > (`Function`s, body `Block`) > `Op` > `Value`.

Where it sits: emitters (emitters/*.py, with elemental/ for scalar code) build a `Kernel`; the
transforms (transforms.py) inline and vectorize it; the printer/parser give its text form; the
LLVM lowering (hlo_codegen.llvm) turns it into NVPTX or host LLVM IR.

An `Op` has a name from `OP_SPECS`, operand `Value`s, result `Value`s, attributes and regions
(`Block`s with arguments). Buffers (kernel parameters, shared memory, constant globals) are not
SSA values: `load` / `store` name them with the `buffer` attribute. Index maps are `IndexingMap`
attributes (`map`). Every value name is unique within a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np


@dataclass(eq=False)
class Value:
    name: str
    type: str

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


@dataclass(eq=False)
class Block:
    args: list[Value] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)

    def walk(self) -> Iterator[Op]:
        """Every op of the block and of nested regions, in program order."""
        for op in self.ops:
            yield op
            for region in op.regions:
                yield from region.walk()


@dataclass(eq=False)
class Op:
    name: str
    operands: list[Value] = field(default_factory=list)
    results: list[Value] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    regions: list[Block] = field(default_factory=list)

    @property
    def result(self) -> Value:
        return self.results[0]

    def __repr__(self) -> str:
        return f"<{self.name} -> {[r.name for r in self.results]}>"


@dataclass(frozen=True)
class OpSpec:
    """What the transforms, the verifier and the lowering need to know about an op."""

    kind: str  # "pure" (no side effect), "memory" (reads or writes buffers), "control", "sync"
    top_level_only: bool = False  # barriers and warp shuffles: only directly in the kernel body
    kernel_only: bool = False  # thread ids etc.: not allowed inside subgraph functions
    terminator: bool = False


_PURE = OpSpec("pure")
OP_SPECS: dict[str, OpSpec] = {}
for _name in (
        "constant addi subi muli divsi divui remsi remui andi ori xori shli shrsi shrui maxsi minsi "
        "maxui minui absi ctlz ctpop addf subf mulf divf remf maximumf minimumf powf atan2 copysign "
        "negf absf sqrt rsqrt exp expm1 log log1p tanh sin cos tan sinh cosh asin acos atan asinh "
        "acosh atanh erf cbrt floor ceil round roundeven trunc cmpi cmpf select extsi extui trunci "
        "sitofp uitofp fptosi fptoui extf truncf bitcast index_cast index_castui apply_indexing "
        "vector.extract vector.insert complex.create complex.re complex.im complex.add complex.sub "
        "complex.mul complex.div complex.neg complex.abs complex.eq complex.ne").split():
    OP_SPECS[_name] = _PURE
OP_SPECS.update({
    "thread_id": OpSpec("pure", kernel_only=True),
    "block_id": OpSpec("pure", kernel_only=True),
    "load": OpSpec("memory"),
    "store": OpSpec("memory"),
    # atomic_rmw @buf @combiner %index, %value {kind = K}: atomically buf[index] =
    # combiner(buf[index], value); no result. `kind` (optional) says the combiner is exactly one
    # native read-modify-write (ATOMIC_KINDS), which the lowering may use instead of a
    # compare-and-swap loop around the combiner.
    "atomic_rmw": OpSpec("memory"),
    "call": OpSpec("pure"),  # subgraph functions only read buffers
    "loop": OpSpec("control"),
    "if": OpSpec("control"),
    "yield": OpSpec("control", terminator=True),
    "return": OpSpec("control", terminator=True),
    "sync_threads": OpSpec("sync", top_level_only=True, kernel_only=True),
    "shuffle_reduce": OpSpec("sync", top_level_only=True, kernel_only=True),
})

# Arithmetic op families, used by the lowering tables and the elemental emitter.
INT_BINARY = ("addi subi muli divsi divui remsi remui andi ori xori shli shrsi shrui maxsi minsi maxui "
              "minui").split()
FLOAT_BINARY = "addf subf mulf divf remf maximumf minimumf powf atan2 copysign".split()
FLOAT_UNARY = ("negf absf sqrt rsqrt exp expm1 log log1p tanh sin cos tan sinh cosh asin acos atan "
               "asinh acosh atanh erf cbrt floor ceil round roundeven trunc").split()
CASTS = "extsi extui trunci sitofp uitofp fptosi fptoui extf truncf bitcast index_cast index_castui".split()
# Native atomic read-modify-write kinds: `assign` writes the value (an overwrite combiner).
ATOMIC_KINDS = "addf addi maxsi minsi maxui minui andi ori xori assign".split()
CMPI_PREDICATES = "eq ne slt sle sgt sge ult ule ugt uge".split()
CMPF_PREDICATES = "oeq one olt ole ogt oge ord ueq une ult ule ugt uge uno".split()


@dataclass
class Buffer:
    """A flat 1-D buffer of `num_elements` elements of HLO type `hlo_type` (physical order).

    kind: "param" (a kernel argument in global memory), "shared" (per-block shared memory) or
    "global" (constant data in the kernel module, `data` holds it). `packed` sub-byte buffers
    hold 8/bits elements per byte, low bits first; otherwise each element has a byte of its own
    (pred as 0/1, s4 in the low nibble). `written` marks parameters the kernel stores to."""

    name: str
    kind: str
    hlo_type: str
    num_elements: int
    written: bool = False
    packed: bool = False
    data: np.ndarray | None = None


@dataclass(eq=False)
class Function:
    """A subgraph function: `args` (index values first, then injected scalars) -> `result_types`."""

    name: str
    args: list[Value]
    result_types: list[str]
    body: Block = field(default_factory=Block)


@dataclass(eq=False)
class Kernel:
    """One GPU kernel: launch grid and block sizes, buffers, subgraph functions and a body."""

    name: str
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    buffers: list[Buffer] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    body: Block = field(default_factory=Block)
    _names: Any = field(default=None, repr=False)  # the builder's NameTable

    @property
    def params(self) -> list[Buffer]:
        return [b for b in self.buffers if b.kind == "param"]

    @property
    def num_threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def num_blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def shared_memory_bytes(self) -> int:
        return sum(buffer_bytes(b) for b in self.buffers if b.kind == "shared")

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)


def hlo_bits(hlo_type: str) -> int:
    from hlo_common.hlo.dtypes import PRIMITIVE_TYPES

    return PRIMITIVE_TYPES[hlo_type].bits


def buffer_bytes(b: Buffer) -> int:
    bits = hlo_bits(b.hlo_type)
    if b.packed:
        return (b.num_elements * bits + 7) // 8
    return b.num_elements * max(1, bits // 8)
