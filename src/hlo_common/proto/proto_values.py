"""Shapes, literals and shardings of XLA's protos (xla/xla_data.proto) in HLO text and numpy; the
pieces `proto_to_hlo` writes an instruction from, and `literal_from_proto` reads a snapshot's
arguments with.

    >>> from hlo_common.proto.messages import ShapeProto
    >>> shape_text(ShapeProto(element_type=11, dimensions=[2, 3], layout={"minor_to_major": [0, 1]}))
    'f32[2,3]{0,1}'
"""

from __future__ import annotations

import numpy as np

from hlo_common.errors import InputError
from hlo_common.hlo.attributes import METADATA_ORDER
from hlo_common.hlo.dtypes import BUFFER, PRIMITIVE_TYPES, PrimitiveType
from hlo_common.hlo.strings import quote_string
from hlo_common.proto.literal_wire import WIRE_DTYPES, packed_values, set_packed
from hlo_common.proto.proto_tables import SHARDING_WORD

# Enum numbers as the XLA of jaxlib 0.10 writes them: BUFFER is 34 there and the f6 types follow it
# (hlo_common.hlo.dtypes keeps an older XLA's numbers for these three).
_BY_PROTO_ID = {t.proto_id: t for t in PRIMITIVE_TYPES.values()} | {
    34: BUFFER, 35: PRIMITIVE_TYPES["f6e3m2fn"], 36: PRIMITIVE_TYPES["f6e2m3fn"]}
PROTO_ID = {t.name: k for k, t in _BY_PROTO_ID.items()}
TUPLE_ID, TOKEN_ID = 13, 17


class ProtoError(InputError):
    """A proto that does not describe a valid module; the message names the field or instruction."""


def primitive(type_id: int, where: str) -> PrimitiveType:
    t = _BY_PROTO_ID.get(type_id)
    if t is None:
        raise ProtoError(f"{where}: unknown element_type {type_id}")
    return t


def _layout_text(layout, rank: int) -> str:
    if not layout.minor_to_major and rank or not rank and not _has_extras(layout):
        return ""
    extras = ""
    if layout.tiles:
        extras += "T" + "".join("(" + ",".join(map(str, t.dimensions)) + ")" for t in layout.tiles)
    if layout.tail_padding_alignment_in_elements > 1:
        extras += f"L({layout.tail_padding_alignment_in_elements})"
    if layout.element_size_in_bits:
        extras += f"E({layout.element_size_in_bits})"
    if layout.memory_space:
        extras += f"S({layout.memory_space})"
    if layout.dynamic_shape_metadata_prefix_bytes:
        extras += f"M({layout.dynamic_shape_metadata_prefix_bytes})"
    body = ",".join(map(str, layout.minor_to_major))
    return "{" + body + (":" + extras if extras else "") + "}"


def _has_extras(layout) -> bool:
    return bool(layout.tiles or layout.element_size_in_bits or layout.memory_space
                or layout.dynamic_shape_metadata_prefix_bytes
                or layout.tail_padding_alignment_in_elements > 1)


def shape_text(shape, where: str = "shape") -> str:
    """HLO text of a ShapeProto: `f32[<=4,2]{1,0}`, `(s32[], token[])`, `b(f32[8]{0})`."""
    et = shape.element_type
    if et == TUPLE_ID:
        return "(" + ", ".join(shape_text(s, where) for s in shape.tuple_shapes) + ")"
    t = primitive(et, where)
    if t.kind == "buffer":
        if len(shape.tuple_shapes) != 1:
            raise ProtoError(f"{where}: a buffer shape holds one array shape")
        return f"b({shape_text(shape.tuple_shapes[0], where)})"
    if not t.is_array_type:
        return f"{t.name}[]"
    dyn = list(shape.is_dynamic_dimension) or [False] * len(shape.dimensions)
    if len(dyn) != len(shape.dimensions):
        raise ProtoError(f"{where}: is_dynamic_dimension has {len(dyn)} entries for "
                         f"{len(shape.dimensions)} dimensions")
    # An unbounded dynamic size is written as a negative number (Shape::kUnboundedSize).
    dims = ",".join("?" if n < 0 else ("<=" if d else "") + str(n) for n, d in zip(shape.dimensions, dyn))
    layout = _layout_text(shape.layout, len(shape.dimensions)) if shape.HasField("layout") else ""
    return f"{t.name}[{dims}]{layout}"


def program_shape_text(ps, where: str) -> str:
    params = ", ".join(shape_text(p, where) for p in ps.parameters)
    return f"({params})->{shape_text(ps.result, where)}"


# LiteralProto's field for each element type (xla/literal.cc, LiteralBase::Piece::WriteToProto).
_BYTES_FIELD = {"s8": "s8s", "u8": "u8s", "s16": "s16s", "u16": "u16s", "f16": "f16s", "bf16": "bf16s",
                "s1": "s1s", "s2": "s2s", "s4": "s4s", "u1": "u1s", "u2": "u2s", "u4": "u4s",
                "f4e2m1fn": "f4e2m1fns", "f8e3m4": "f8e3m4s", "f8e4m3b11fnuz": "f8e4m3b11fnuzs",
                "f8e4m3fn": "f8e4m3fns", "f8e4m3fnuz": "f8e4m3fnuzs", "f8e4m3": "f8e4m3s",
                "f8e5m2fnuz": "f8e5m2fnuzs", "f8e5m2": "f8e5m2s", "f8e8m0fnu": "f8e8m0fnus"}
_REPEATED_FIELD = {"pred": "preds", "s32": "s32s", "s64": "s64s", "u32": "u32s", "u64": "u64s",
                   "f32": "f32s", "f64": "f64s", "c64": "c64s", "c128": "c128s"}


def literal_from_proto(lit, where: str = "literal"):
    """A LiteralProto as the interpreter holds values: a numpy array in the shape's dimensions
    (row-major whatever the layout) or a tuple of them."""
    shape = lit.shape
    if shape.element_type == TUPLE_ID:
        return tuple(literal_from_proto(e, f"{where}.tuple_literals[{k}]")
                     for k, e in enumerate(lit.tuple_literals))
    t = primitive(shape.element_type, f"{where}.shape")
    if not t.is_array_type:
        return np.zeros((), dtype=np.bool_)
    dims = tuple(shape.dimensions)
    count = int(np.prod(dims, dtype=np.int64))
    flat = _flat_values(lit, t, count, where)
    arr = flat.reshape(_physical_dims(shape, dims))
    return arr.transpose(_to_logical(shape, len(dims))).copy()  # C order; 0-d stays 0-d


def _flat_values(lit, t: PrimitiveType, count: int, where: str) -> np.ndarray:
    if t.name in _BYTES_FIELD:
        data = getattr(lit, _BYTES_FIELD[t.name])
        dtype = np.dtype(t.np_dtype).newbyteorder("<") if t.bits >= 16 else t.np_dtype
        if len(data) != count * t.byte_size:
            raise ProtoError(f"{where}: {_BYTES_FIELD[t.name]} holds {len(data)} bytes for "
                             f"{count} {t.name} elements")
        return np.frombuffer(data, dtype=dtype).astype(t.np_dtype)
    name = _REPEATED_FIELD.get(t.name)
    if name is None:
        raise ProtoError(f"{where}: {t.name} literals are not read from protos")
    values = packed_values(lit, name) if name in WIRE_DTYPES else getattr(lit, name)
    per = 2 if t.is_complex else 1
    if len(values) != count * per:
        raise ProtoError(f"{where}: {name} holds {len(values)} values for {count} {t.name} elements")
    if t.is_complex:
        pairs = np.asarray(values, dtype=np.float32 if t.name == "c64" else np.float64)
        out = np.empty(count, dtype=t.np_dtype)  # real/imag set apart: inf * 1j would make NaNs
        out.real, out.imag = pairs[0::2], pairs[1::2]
        return out
    return np.asarray(values, dtype=t.np_dtype)


def _physical_dims(shape, dims: tuple[int, ...]) -> tuple[int, ...]:
    m2m = list(shape.layout.minor_to_major) if shape.HasField("layout") else []
    if len(m2m) != len(dims):
        return dims
    return tuple(dims[d] for d in reversed(m2m))


def _to_logical(shape, rank: int) -> tuple[int, ...]:
    m2m = list(shape.layout.minor_to_major) if shape.HasField("layout") else []
    if len(m2m) != rank:
        return tuple(range(rank))
    major_to_minor = list(reversed(m2m))
    return tuple(major_to_minor.index(d) for d in range(rank))


def literal_to_proto(value, shape_proto, out) -> None:
    """Fill LiteralProto `out` with `value` (numpy array or tuple) of ShapeProto `shape_proto`,
    elements in the layout's order as XLA writes them."""
    out.shape.CopyFrom(shape_proto)
    if shape_proto.element_type == TUPLE_ID:
        for v, s in zip(value, shape_proto.tuple_shapes):
            literal_to_proto(v, s, out.tuple_literals.add())
        return
    t = primitive(shape_proto.element_type, "shape")
    if not t.is_array_type:
        return
    arr = np.asarray(value, dtype=t.np_dtype).reshape(tuple(shape_proto.dimensions))
    m2m = list(shape_proto.layout.minor_to_major) if shape_proto.HasField("layout") else []
    if len(m2m) == arr.ndim:
        arr = arr.transpose(tuple(reversed(m2m)))
    flat = np.ascontiguousarray(arr).reshape(-1)
    if t.name in _BYTES_FIELD:
        data = flat.astype(np.dtype(t.np_dtype).newbyteorder("<")) if t.bits >= 16 else flat
        setattr(out, _BYTES_FIELD[t.name], data.tobytes())
    elif t.is_complex:
        set_packed(out, _REPEATED_FIELD[t.name], np.stack([flat.real, flat.imag], 1).reshape(-1))
    elif _REPEATED_FIELD[t.name] in WIRE_DTYPES:
        set_packed(out, _REPEATED_FIELD[t.name], flat)
    else:
        getattr(out, _REPEATED_FIELD[t.name]).extend(flat.tolist())


_SHARDING_WORD = SHARDING_WORD


def sharding_text(s) -> str:
    """HLO text of an OpSharding (xla/hlo/ir/hlo_sharding.cc, HloSharding::ToString)."""
    text = _sharding_body(s)
    if s.is_shard_group:
        text = text[:-1] + f" {'shard_like' if s.shard_group_type else 'shard_as'} {s.shard_group_id}}}"
    if s.metadata:
        meta = [metadata_text(m) for m in s.metadata]
        inner = meta[0] if len(meta) == 1 else ", ".join("{" + m + "}" for m in meta)
        text = text[:-1] + f" metadata={{{inner}}}}}"
    return text


def metadata_text(m) -> str:
    """`op_type="..." op_name="..." ...` in XLA's order (OpMetadataToString), defaults left out."""
    parts = []
    for key in METADATA_ORDER:
        if key == "deduplicated_name":  # OpMetadataToString (xla/hlo/ir/hlo_instruction.cc) leaves it out
            continue
        value = getattr(m, key, None)
        if value:
            parts.append(f"{key}={quote_string(value) if isinstance(value, str) else value}")
    return " ".join(parts)


def _sharding_body(s) -> str:
    if s.type == 2:
        return "{" + ", ".join(sharding_text(e) for e in s.tuple_shardings) + "}"
    if s.type in _SHARDING_WORD and s.type != 1:
        return "{" + _SHARDING_WORD[s.type] + "}"
    if s.type == 1:
        return "{maximal device=" + str(s.tile_assignment_devices[0]) + "}"
    dims = ",".join(map(str, s.tile_assignment_dimensions))
    if s.iota_reshape_dims:
        devices = "<=[" + ",".join(map(str, s.iota_reshape_dims)) + "]"
        perm = list(s.iota_transpose_perm)
        if perm and perm != list(range(len(perm))):
            devices += "T(" + ",".join(map(str, perm)) + ")"
    else:
        devices = ",".join(map(str, s.tile_assignment_devices))
    text = f"devices=[{dims}]{devices}"
    if s.replicate_on_last_tile_dim:
        text += " last_tile_dim_replicate"
    if s.last_tile_dims:
        words = ", ".join(_SHARDING_WORD.get(d, "replicated") for d in s.last_tile_dims)
        text += " last_tile_dims={" + words + "}"
    return "{" + text + "}"
