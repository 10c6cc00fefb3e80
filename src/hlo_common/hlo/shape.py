"""Shapes with layouts, as XLA writes them: `f32[2,4]{1,0}`, `(f32[2]{0}, s32[])`, `bf16[<=8,?]`, `b(f32[8])`.

A `Shape` is immutable. Arrays carry an element type, dimensions, per-dimension dynamic flags and
a `Layout` (minor-to-major order plus the rarer extras after `:` such as tiles `T(8,128)` or the
element size `E(4)`); tuples carry their element shapes; a buffer shape `b(<array shape>)` (the
type XLA gives a mutable buffer that custom calls create) carries the array it holds.

    >>> str(Shape.array(F32, (2, 4)))
    'f32[2,4]{1,0}'
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from hlo_common.hlo.dtypes import BUFFER, PRIMITIVE_TYPES, PrimitiveType

# Order in which XLA's Layout::Print emits the extras after the ':' (see xla/layout.cc).
LAYOUT_EXTRA_ORDER = ("D", "T", "L", "#", "*", "E", "S", "SC", "P", "M")


@dataclass(frozen=True)
class Layout:
    minor_to_major: tuple[int, ...]
    # Extras keyed by their letter ("T", "E", "S", ...), value = the text inside the letter's
    # parentheses (for "T" the whole tile list such as "(8,128)(2,1)").
    extras: tuple[tuple[str, str], ...] = ()

    def extra(self, key: str) -> str | None:
        for k, v in self.extras:
            if k == key:
                return v
        return None

    @property
    def memory_space(self) -> int:
        v = self.extra("S")
        return int(v) if v else 0

    @property
    def element_size_in_bits(self) -> int:
        v = self.extra("E")
        return int(v) if v else 0

    def __str__(self) -> str:
        body = ",".join(str(d) for d in self.minor_to_major)
        if self.extras:
            parts = []
            for key, val in sorted(self.extras, key=lambda kv: LAYOUT_EXTRA_ORDER.index(kv[0])):
                parts.append(f"T{val}" if key == "T" else f"{key}({val})")
            body += ":" + "".join(parts)
        return "{" + body + "}"

    @staticmethod
    def default(rank: int) -> Layout:
        return Layout(tuple(range(rank - 1, -1, -1)))

    def is_default(self) -> bool:
        n = len(self.minor_to_major)
        return self.minor_to_major == tuple(range(n - 1, -1, -1))


@dataclass(frozen=True)
class Shape:
    element_type: PrimitiveType | None  # None for tuples
    dims: tuple[int, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple[Shape, ...] | None = None
    # Per dimension: "" static, "<=" bounded dynamic, "?" unbounded dynamic.
    dynamic: tuple[str, ...] = field(default=())
    buffer_of: Shape | None = None  # the array shape a buffer shape `b(...)` holds

    def __hash__(self) -> int:
        """Hashed once (shapes key many caches; the generated hash re-hashed every field, nested
        shapes and layouts included, on each lookup)."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.element_type, self.dims, self.layout, self.tuple_shapes, self.dynamic, self.buffer_of))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        """Pickled without the cached hash: another process hashes strings differently."""
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    # -- constructors -------------------------------------------------------------------------
    @staticmethod
    def array(etype: PrimitiveType | str, dims, layout: Layout | tuple | None = "default") -> Shape:
        if isinstance(etype, str):
            etype = PRIMITIVE_TYPES[etype]
        dims = tuple(int(d) for d in dims)
        if isinstance(layout, str):
            layout = Layout.default(len(dims)) if etype.is_array_type else None
        elif isinstance(layout, tuple):
            layout = Layout(layout)
        return Shape(etype, dims, layout, None, ("",) * len(dims))

    @staticmethod
    def tuple_of(shapes) -> Shape:
        return Shape(None, (), None, tuple(shapes), ())

    @staticmethod
    def token() -> Shape:
        return Shape(PRIMITIVE_TYPES["token"], (), None, None, ())

    @staticmethod
    def buffer(array: Shape) -> Shape:
        """The buffer shape `b(<array>)` (ShapeUtil::MakeBufferShape); `array` must be an array."""
        if not array.is_array:
            raise ValueError(f"a buffer holds an array, not {array}")
        return Shape(BUFFER, (), None, None, (), array)

    # -- queries ------------------------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.tuple_shapes is not None

    @cached_property
    def is_array(self) -> bool:  # cached as num_elements: asked of every operand by most passes
        return self.tuple_shapes is None and self.element_type.is_array_type

    @property
    def is_buffer(self) -> bool:
        return self.buffer_of is not None

    @property
    def is_token(self) -> bool:
        return self.tuple_shapes is None and self.element_type.name == "token"

    @property
    def rank(self) -> int:
        return len(self.dims)

    @cached_property
    def num_elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def is_dynamic(self) -> bool:
        return any(self.dynamic)

    @property
    def minor_to_major(self) -> tuple[int, ...]:
        if self.layout is None:
            return tuple(range(self.rank - 1, -1, -1))
        return self.layout.minor_to_major

    def byte_size(self) -> int:
        """Bytes of an array buffer (sub-byte types packed per E(n) layouts, else one byte each)."""
        if not self.is_array:
            return 0
        et = self.element_type
        if et.bits < 8 and self.layout is not None and self.layout.element_size_in_bits:
            return (self.num_elements * self.layout.element_size_in_bits + 7) // 8
        return self.num_elements * et.byte_size

    def leaf_shapes(self) -> list[tuple[tuple[int, ...], Shape]]:
        """(shape index, array shape) for every non-tuple leaf, depth first."""
        if not self.is_tuple:
            return [((), self)]
        out = []
        for i, s in enumerate(self.tuple_shapes):
            out.extend(((i,) + idx, leaf) for idx, leaf in s.leaf_shapes())
        return out

    def subshape(self, index) -> Shape:
        s = self
        for i in index:
            s = s.tuple_shapes[i]
        return s

    # -- modification -------------------------------------------------------------------------
    def with_layout(self, layout: Layout | tuple | None) -> Shape:
        if isinstance(layout, tuple):
            layout = Layout(layout)
        return replace(self, layout=layout)

    def with_dims(self, dims) -> Shape:
        dims = tuple(dims)
        return Shape(self.element_type, dims, Layout.default(len(dims)), None, ("",) * len(dims))

    def with_element_type(self, etype: PrimitiveType | str) -> Shape:
        if isinstance(etype, str):
            etype = PRIMITIVE_TYPES[etype]
        return replace(self, element_type=etype)

    def with_default_layouts(self) -> Shape:
        if self.buffer_of is not None:
            return Shape.buffer(self.buffer_of.with_default_layouts())
        if self.is_tuple:
            return Shape.tuple_of(s.with_default_layouts() for s in self.tuple_shapes)
        if not self.is_array:
            return self
        return replace(self, layout=Layout.default(self.rank))

    def without_layout(self) -> Shape:
        if self.buffer_of is not None:
            return Shape.buffer(self.buffer_of.without_layout())
        if self.is_tuple:
            return Shape.tuple_of(s.without_layout() for s in self.tuple_shapes)
        return replace(self, layout=None)

    # -- comparison / printing ----------------------------------------------------------------
    def compatible(self, other: Shape) -> bool:
        """Same element types and dims, layouts ignored (ShapeUtil::Compatible)."""
        if self.is_tuple or other.is_tuple:
            if not (self.is_tuple and other.is_tuple) or len(self.tuple_shapes) != len(other.tuple_shapes):
                return False
            return all(a.compatible(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes))
        if self.buffer_of is not None or other.buffer_of is not None:
            return self.buffer_of is not None and other.buffer_of is not None \
                and self.buffer_of.compatible(other.buffer_of)
        return self.element_type is other.element_type and self.dims == other.dims

    def same_dims(self, other: Shape) -> bool:
        return not self.is_tuple and not other.is_tuple and self.dims == other.dims

    def to_string(self, print_layout: bool = True) -> str:
        if self.buffer_of is not None:
            return f"b({self.buffer_of.to_string(print_layout)})"
        if self.is_tuple:
            return "(" + ", ".join(s.to_string(print_layout) for s in self.tuple_shapes) + ")"
        et = self.element_type.name
        if not self.element_type.is_array_type:
            return f"{et}[]"
        dims = ",".join(f"{dyn}{d}" if dyn != "?" else "?" for d, dyn in zip(self.dims, self.dynamic))
        text = f"{et}[{dims}]"
        if print_layout and self.layout is not None and (self.rank > 0 or self.layout.extras):
            text += str(self.layout)
        return text

    def __str__(self) -> str:
        return self.to_string(True)

    def __repr__(self) -> str:
        return f"Shape({self})"
