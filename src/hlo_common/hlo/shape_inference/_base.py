"""Shared pieces of shape inference: the error type, the registry and small shape helpers.

Every rule module registers one function per opcode (or family) with `@rule("add", ...)`; a rule
takes the instruction and an `InferenceContext` and returns the result `Shape` with the default
layout, or calls `fail(...)` with a sentence saying what was found and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import ml_dtypes
import numpy as np

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.errors import VerificationError
from hlo_common.hlo.shape import Layout, Shape

PRED = PRIMITIVE_TYPES["pred"]
S32 = PRIMITIVE_TYPES["s32"]
U32 = PRIMITIVE_TYPES["u32"]
U64 = PRIMITIVE_TYPES["u64"]


class ShapeInferenceError(VerificationError):
    """The operands or attributes of an instruction do not admit a result shape.

    Raised by `infer_shape` (and so by the verifier and the parser); the message names the
    instruction (and its computation when it has one) and says what was found and expected.
    """

    def __init__(self, problem: str, instr: Any = None, opcode: str | None = None):
        self.problem = problem
        self.opcode = opcode or getattr(instr, "opcode", None)
        comp = getattr(getattr(instr, "parent", None), "name", None)
        name = getattr(instr, "name", None)
        source = getattr(instr, "source", None)  # FILE:LINE:COL first when it was parsed from text
        place = source[0].place(source[1]) if source is not None else None
        super().__init__(f"{self.opcode}: {problem}", comp, name, place)
        if comp is None and name is not None:
            self.args = (f"instruction %{name} ({self.opcode}): {problem}",)


class InferenceFailure(Exception):
    """Internal: a rule rejects its input; `infer_shape` wraps it into ShapeInferenceError."""


class NeedsDeclaredShape(InferenceFailure):
    """The result shape depends on information only the written shape carries."""


def fail(message: str) -> None:
    raise InferenceFailure(message)


def need_declared(instr, what: str) -> Shape:
    """The declared shape, or a failure saying that `what` can only come from it."""
    if instr.shape is None:
        raise NeedsDeclaredShape(f"the result shape cannot be inferred ({what}); write it out")
    return instr.shape


RuleFn = Callable[[Any, "InferenceContext"], Shape]
RULES: dict[str, RuleFn] = {}


def rule(*opcodes: str) -> Callable[[RuleFn], RuleFn]:
    def register(fn: RuleFn) -> RuleFn:
        for op in opcodes:
            assert op not in RULES, f"two shape rules for {op}"
            RULES[op] = fn
        return fn

    return register


@dataclass
class InferenceContext:
    """Per-run caches (program shapes of called computations) and the module's device counts."""

    replica_count: int = 1
    num_partitions: int = 1
    _programs: dict[int, tuple[list[Shape], Shape]] = field(default_factory=dict)

    def program_shape(self, comp) -> tuple[list[Shape], Shape]:
        """(parameter shapes by number, root shape) of a called computation."""
        key = id(comp)
        hit = self._programs.get(key)
        if hit is None:
            params = sorted((i for i in comp.instructions if i.opcode == "parameter"),
                            key=lambda p: p.parameter_number)
            if comp.root is None:
                fail(f"called computation {comp.name} has no root, expected one")
            hit = ([p.shape for p in params], comp.root.shape)
            self._programs[key] = hit
        return hit

    @staticmethod
    def for_module(module) -> InferenceContext:
        def count(key: str) -> int:
            text = module.header_attr(key) if module is not None else None
            try:
                return int(text) if text is not None else 1
            except ValueError:
                return 1

        return InferenceContext(count("replica_count"), count("num_partitions"))


# -- attribute access ------------------------------------------------------------------------------
_MISSING = object()


def attr(instr, key: str, default: Any = _MISSING) -> Any:
    v = instr.attrs.get(key, _MISSING)
    if v is _MISSING:
        if default is _MISSING:
            fail(f"found no attribute '{key}', expected one")
        return default
    return v


def ints_attr(instr, key: str, default: Any = _MISSING) -> tuple[int, ...]:
    v = attr(instr, key, default)
    if isinstance(v, int):
        return (v,)
    if not isinstance(v, tuple):
        fail(f"attribute '{key}' is {v}, expected a list of integers")
    return v


def int_attr(instr, key: str, default: Any = _MISSING) -> int:
    v = attr(instr, key, default)
    if isinstance(v, tuple) and len(v) == 1:
        return v[0]
    if not isinstance(v, int):
        fail(f"attribute '{key}' is {v}, expected an integer")
    return v


def word_attr(instr, key: str, default: Any = _MISSING) -> str:
    v = attr(instr, key, default)
    return v if v is None else str(v)


def computation_attr(instr, key: str):
    comp = attr(instr, key)
    if isinstance(comp, list) or not hasattr(comp, "instructions"):
        fail(f"attribute '{key}' is {comp}, expected one computation")
    return comp


def one_dimension(instr, key: str = "dimensions") -> int:
    dims = ints_attr(instr, key)
    if len(dims) != 1:
        fail(f"'{key}' is {{{','.join(map(str, dims))}}}, expected exactly one dimension")
    return dims[0]


# -- shape helpers ---------------------------------------------------------------------------------
_DEFAULT_LAYOUTS = [Layout.default(r) for r in range(12)]
_STATIC = [("",) * r for r in range(12)]


def default_layout(rank: int) -> Layout:
    return _DEFAULT_LAYOUTS[rank] if rank < len(_DEFAULT_LAYOUTS) else Layout.default(rank)


def make(etype: PrimitiveType, dims, dynamic=None) -> Shape:
    """An array shape with the default layout (dynamic flags optional, "" = static)."""
    dims = tuple(dims)
    rank = len(dims)
    if dynamic is None:
        dynamic = _STATIC[rank] if rank < len(_STATIC) else ("",) * rank
    return Shape(etype, dims, default_layout(rank), None, tuple(dynamic))


def like(shape: Shape, etype: PrimitiveType | None = None) -> Shape:
    """`shape` (array or tuple) with default layouts and, for an array, maybe another element type."""
    if shape.tuple_shapes is not None:
        return Shape.tuple_of(like(s) for s in shape.tuple_shapes)
    if not shape.element_type.is_array_type:
        return shape  # token, opaque or a buffer `b(...)`: no layout of its own to reset
    if (etype is None or etype is shape.element_type) and shape.layout == default_layout(len(shape.dims)):
        return shape  # shapes are immutable: one with the default layout is its own answer
    return make(etype or shape.element_type, shape.dims, shape.dynamic or None)


def tuple_of(shapes) -> Shape:
    return Shape.tuple_of(like(s) for s in shapes)


def scalar(etype: PrimitiveType) -> Shape:
    return make(etype, ())


def token() -> Shape:
    return Shape.token()


def describe(shape: Shape) -> str:
    return shape.to_string(print_layout=False)


def expect_array(shape: Shape, what: str) -> None:
    if shape is None or not shape.is_array:
        fail(f"{what} is {describe(shape) if shape is not None else 'nothing'}, expected an array")


def expect_token(shape: Shape, what: str) -> None:
    if not shape.is_token:
        fail(f"{what} is {describe(shape)}, expected token[]")


def operand_shape(instr, i: int, what: str | None = None) -> Shape:
    if i >= len(instr.operands):
        fail(f"expected at least {i + 1} operands, found {len(instr.operands)}")
    s = instr.operands[i].shape
    if what is not None:
        expect_array(s, what)
    return s


def check_dim_list(dims, rank: int, what: str, *, unique: bool = True, ascending: bool = False) -> None:
    for d in dims:
        if not 0 <= d < rank:
            fail(f"{what} {{{','.join(map(str, dims))}}} holds {d}, expected dimensions in [0, {rank})")
    if unique and len(set(dims)) != len(dims):
        fail(f"{what} {{{','.join(map(str, dims))}}} repeats a dimension, expected each at most once")
    if ascending and list(dims) != sorted(dims):
        fail(f"{what} {{{','.join(map(str, dims))}}} is out of order, expected ascending dimensions")


def same_type_ignoring_fp(a: PrimitiveType, b: PrimitiveType) -> bool:
    if a is b:
        return True
    return (a.is_float and b.is_float) or (a.is_complex and b.is_complex)


def _type_rank(t: PrimitiveType) -> tuple:
    comp = t
    if t.is_complex:
        comp = PRIMITIVE_TYPES["f32" if t.bits == 64 else "f64"]
    exp = sig = -1
    if comp.is_float:
        info = ml_dtypes.finfo(comp.np_dtype)
        exp, sig = int(info.maxexp), int(info.nmant) + 1
    return (t.is_complex, exp, sig, comp.bits, comp.kind == "signed")


def higher_precision(a: PrimitiveType, b: PrimitiveType) -> PrimitiveType:
    """XLA's HigherPrecisionElementType: complex first, then exponent range, then significand."""
    if a is b:
        return a
    return a if _type_rank(a) >= _type_rank(b) else b


def dilated_bound(bound: int, dilation: int) -> int:
    return 0 if bound == 0 else (bound - 1) * dilation + 1


def strided_bound(bound: int, window: int, stride: int) -> int:
    if window > bound:
        return 0
    return (bound - window) // stride + 1


def window_output_dims(base_dims, window, what: str) -> list[int]:
    """Dimensions of a windowed operation's output (reduce-window, convolution, select-and-scatter)."""
    if len(window.dims) != len(base_dims):
        fail(f"window has {len(window.dims)} dimensions, expected {len(base_dims)} like {what}")
    out = []
    for i, (b, w) in enumerate(zip(base_dims, window.dims)):
        if w.size <= 0 or w.stride <= 0 or w.base_dilation < 1 or w.window_dilation < 1:
            fail(f"window dimension {i} has size {w.size}, stride {w.stride}, lhs_dilate "
                 f"{w.base_dilation}, rhs_dilate {w.window_dilation}; expected all positive")
        padded = w.padding_low + dilated_bound(b, w.base_dilation) + w.padding_high
        out.append(strided_bound(padded, dilated_bound(w.size, w.window_dilation), w.stride))
    return out


def np_shape(value) -> tuple[int, ...]:
    return tuple(np.shape(value))
