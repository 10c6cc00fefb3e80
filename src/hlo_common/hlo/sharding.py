"""HloSharding: how an instruction's value is laid out over devices (XLA's xla/hlo/ir/hlo_sharding.h
and tile_assignment.h), parsed from and printed to XLA's text.

    {replicated}  {manual}  {unknown}  {unreduced}  {maximal device=3}
    {devices=[2,1]0,1}                          tiles: a device array, one device per tile
    {devices=[2,2]<=[4]}  {devices=[2,2]<=[2,2]T(1,0)}   the same array as an iota (V2 form):
                                                the ids 0..N-1 reshaped, transposed, reshaped
    {devices=[2,1,2]<=[4] last_tile_dim_replicate}      the last tile dim replicates
    {devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}   the last dims are subgroups
    {{replicated}, {maximal device=0}}          one sharding per leaf of a tuple

Each may end with ` shard_as N` / ` shard_like N` and ` metadata={...}`. Printing follows XLA's
HloSharding::Print (an iota is printed canonicalized, as XLA's IotaTileAssignment::Create keeps
it: dims of size one dropped, dims the transpose keeps together merged); `validate` is XLA's
HloSharding::Validate against a shape and the number of devices.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from hlo_common.hlo.shape import Shape
from hlo_common.hlo.tile_assignment import (
    ShardingError, TileAssignment, group_minor_iota_dims_sorted, iota_transpose, join_ints, reshaped,
)

SUBGROUP_TYPES = ("manual", "maximal", "replicated", "unreduced")
_LEAF_KINDS = ("replicated", "manual", "unknown", "unreduced")


@dataclass(frozen=True)
class HloSharding:
    """One sharding: `kind` is replicated, manual, unknown, unreduced, maximal, tiled or tuple."""

    kind: str
    device: int | None = None  # maximal
    tiles: TileAssignment | None = None  # tiled
    last_tile_dim_replicate: bool = False
    subgroup_types: tuple[str, ...] = ()
    elements: tuple[HloSharding, ...] = ()  # tuple
    shard_group: str | None = None  # "shard_as 1" / "shard_like 1"
    metadata: str | None = None  # the text inside metadata={...}, kept as written

    @staticmethod
    def parse(text: str) -> HloSharding:
        return _Reader(text).sharding()

    @staticmethod
    def tiled(tiles: TileAssignment, replicate_last: bool = False, subgroups: tuple[str, ...] = (),
              **fields) -> HloSharding:
        """A tiled sharding as XLA's parser builds it (HloSharding::PartialTile / Subgroup): a last
        dim that replicates has its devices sorted within each group, and subgroup dims that say
        nothing fold into the simpler forms."""
        if replicate_last:
            return _partial_tile(tiles, **fields)
        if subgroups:
            return _subgroup(tiles, subgroups, **fields)
        return HloSharding("tiled", tiles=tiles, **fields)

    @property
    def tiled_data_rank(self) -> int:
        """Dims of the tile array that tile the data (the rest replicate or are subgroups)."""
        return len(self.tiles.dims) - int(self.last_tile_dim_replicate) - len(self.subgroup_types)

    def __str__(self) -> str:
        if self.kind == "tuple":
            parts = []
            for k, element in enumerate(self.elements):
                sep = "" if k == 0 else (f", /*index={k}*/" if k % 5 == 0 else ", ")
                parts.append(sep + str(element))
            return "{" + "".join(parts) + "}"
        tail = (f" {self.shard_group}" if self.shard_group else "") + \
            (f" metadata={{{self.metadata}}}" if self.metadata is not None else "")
        if self.kind in _LEAF_KINDS:
            return f"{{{self.kind}{tail}}}"
        if self.kind == "maximal":
            return f"{{maximal device={self.device}{tail}}}"
        text = str(self.tiles)
        if self.last_tile_dim_replicate:
            text += " last_tile_dim_replicate"
        if self.subgroup_types:
            text += " last_tile_dims={" + ", ".join(self.subgroup_types) + "}"
        return "{" + text + tail + "}"

    def validate(self, shape: Shape, num_devices: int | None) -> None:
        """Raise ShardingError when the sharding cannot describe `shape` over `num_devices`."""
        if shape.is_token:
            return
        if self.kind == "tuple":
            leaves = [leaf for _, leaf in shape.leaf_shapes()] if shape.is_tuple else None
            if leaves is None:
                raise ShardingError(f"sharding {self} is a tuple but the shape {shape} is not")
            if len(leaves) != len(self.elements) and not (not leaves and len(self.elements) == 1):
                raise ShardingError(f"shape {shape} has {len(leaves)} leaves while sharding {self} has "
                                    f"{len(self.elements)}")
            for leaf, element in zip(leaves, self.elements):
                element.validate(leaf, num_devices)
            return
        if shape.is_tuple:
            raise ShardingError(f"the shape {shape} is a tuple but sharding {self} is not")
        self._validate_leaf(shape, num_devices)

    def _validate_leaf(self, shape: Shape, num_devices: int | None) -> None:
        if self.kind in _LEAF_KINDS:
            return
        if self.kind == "maximal":
            _in_range(self.device, num_devices)
            return
        if self.tiles.num_elements == 1:
            raise ShardingError(f"sharding {self} has a single device: write {{replicated}} or "
                                "{maximal device=N}")
        if shape.rank != self.tiled_data_rank:
            raise ShardingError(f"sharding {self} tiles {self.tiled_data_rank} dims, the shape {shape} has "
                                f"{shape.rank}")
        if self.tiles.devices is None:
            if num_devices is not None and self.tiles.num_elements != num_devices:
                raise ShardingError(f"sharding {self} has {self.tiles.num_elements} devices, the module "
                                    f"{num_devices}")
            return
        seen: set[int] = set()
        for device in self.tiles.devices:
            _in_range(device, num_devices)
            if device in seen:
                raise ShardingError(f"device {device} appears twice in sharding {self}")
            seen.add(device)
        if num_devices is not None and len(seen) != num_devices:
            raise ShardingError(f"sharding {self} has {len(seen)} devices, the module {num_devices}")


def _partial_tile(tiles: TileAssignment, **fields) -> HloSharding:
    """XLA's HloSharding::PartialTile: the last tile dim replicates."""
    dims, group = tiles.dims, tiles.dims[-1]
    if len(dims) == 1 or group == tiles.num_elements:
        return HloSharding("replicated", **fields)
    if group == 1:
        return HloSharding("tiled", tiles=reshaped(tiles, dims[:-1]), **fields)
    if tiles.devices is None:
        if tiles.iota_dims[tiles.perm[-1]] == group:
            return HloSharding("tiled", tiles=tiles, last_tile_dim_replicate=True, **fields)
        grouped = group_minor_iota_dims_sorted(tiles.iota_dims, tiles.perm, group)
        if grouped is not None:
            return HloSharding("tiled", tiles=TileAssignment.iota(dims, *grouped),
                               last_tile_dim_replicate=True, **fields)
    ids = np.sort(tiles.array().reshape(-1, group), axis=1).reshape(-1)
    return HloSharding("tiled", tiles=TileAssignment(dims, devices=tuple(int(d) for d in ids)),
                       last_tile_dim_replicate=True, **fields)


_TYPE_ORDER = ("maximal", "manual", "unreduced", "replicated")  # XLA's kOrderedTypes, those printed


def _subgroup(tiles: TileAssignment, types: tuple[str, ...], **fields) -> HloSharding:
    """XLA's HloSharding::Subgroup: subgroup dims of size one dropped, dims of one type merged, types
    in XLA's order; the forms that say no more than manual/replicated/unreduced become those."""
    data = len(tiles.dims) - len(types)
    if len(set(types)) == 1 and int(np.prod(tiles.dims[:data], dtype=np.int64)) == 1 \
            and types[0] in ("manual", "replicated", "unreduced"):
        return HloSharding(types[0], **fields)
    by_type: dict[str, list[int]] = {}
    for k, t in enumerate(types):
        if tiles.dims[data + k] != 1:
            by_type.setdefault(t, []).append(data + k)
    merging = len(by_type) > 1 or any(len(v) > 1 for v in by_type.values()) or \
        sum(len(v) for v in by_type.values()) != len(types)
    if merging:
        order = list(range(data)) + [d for t in _TYPE_ORDER for d in by_type.get(t, [])]
        merged_types = tuple(t for t in _TYPE_ORDER if t in by_type)
        shape = tuple(tiles.dims[:data]) + tuple(int(np.prod([tiles.dims[d] for d in by_type[t]]))
                                                 for t in merged_types)
        full = order + [d for d in range(len(tiles.dims)) if d not in order]  # size-one dims last
        moved = iota_transpose(tiles, full) if tiles.devices is None else None
        if moved is not None:
            tiles = TileAssignment.iota(shape, moved.iota_dims, moved.perm)
        else:
            ids = tiles.array().transpose(full).reshape(-1)
            tiles = TileAssignment(shape, devices=tuple(int(d) for d in ids))
        types = merged_types
    if types == ("replicated",):
        return _partial_tile(tiles, **fields)
    if types == ("manual",) and tiles.num_elements == tiles.dims[-1]:
        return HloSharding("manual", **fields)
    if types and types[-1] == "replicated":
        partial = _partial_tile(tiles, **fields)
        return HloSharding("tiled", tiles=partial.tiles, subgroup_types=types, **fields)
    return HloSharding("tiled", tiles=tiles, subgroup_types=types, **fields)


def _in_range(device: int, num_devices: int | None) -> None:
    if device < 0 or (num_devices is not None and device >= num_devices):
        raise ShardingError(f"device {device} is outside the module's {num_devices} devices")


_TOKEN = re.compile(r"\s*(\{|\}|,|<=|\[|\]|=|T\(|\)|/\*index=\d+\*/|-?\d+|[A-Za-z_][\w]*)")


class _Reader:
    """A small recursive reader of the sharding text (the parser hands it the whole `{...}`)."""

    def __init__(self, text: str):
        self.text, self.pos = text, 0

    def error(self, what: str) -> ShardingError:
        return ShardingError(f"{what} at offset {self.pos} of sharding {self.text}")

    def peek(self) -> str:
        m = _TOKEN.match(self.text, self.pos)
        return m.group(1) if m else self.text[self.pos:].strip()[:1]

    def take(self, expected: str | None = None) -> str:
        m = _TOKEN.match(self.text, self.pos)
        if not m or (expected is not None and m.group(1) != expected):
            raise self.error(f"expected {expected or 'a token'}, found {self.peek() or 'the end'!r}")
        self.pos = m.end()
        return m.group(1)

    def ints(self, close: str) -> tuple[int, ...]:
        out = []
        while self.peek() != close:
            if out:
                self.take(",")
            out.append(self._int())
        self.take(close)
        return tuple(out)

    def _int(self) -> int:
        token = self.take()
        if not re.fullmatch(r"-?\d+", token):
            raise self.error(f"expected a number, found {token!r}")
        return int(token)

    def sharding(self) -> HloSharding:
        result = self._one()
        if self.text[self.pos:].strip():
            raise self.error("unexpected text after the sharding")
        return result

    def _one(self) -> HloSharding:
        self.take("{")
        if self.peek() in ("{", "}"):
            return self._tuple()
        word = self.take()
        fields: dict = {}
        if word in _LEAF_KINDS:
            kind = word
        elif word == "maximal":
            kind = "maximal"
            self.take("device")
            self.take("=")
            fields["device"] = self._int()
        elif word == "devices":
            kind = "tiled"
            fields["tiles"] = self._tiles()
        else:
            raise self.error(f"unknown sharding {word!r}")
        self._attributes(fields, kind)
        if kind == "tiled":
            return HloSharding.tiled(fields.pop("tiles"), fields.pop("last_tile_dim_replicate", False),
                                     fields.pop("subgroup_types", ()), **fields)
        return HloSharding(kind, **fields)

    def _tuple(self) -> HloSharding:
        elements = []
        while self.peek() != "}":
            if elements:
                self.take(",")
            if self.peek().startswith("/*index="):
                self.take()
            elements.append(self._one())
        self.take("}")
        return HloSharding("tuple", elements=tuple(elements))

    def _tiles(self) -> TileAssignment:
        self.take("=")
        self.take("[")
        dims = self.ints("]")
        if self.peek() == "<=":
            self.take("<=")
            self.take("[")
            reshape = self.ints("]")
            perm = None
            if self.peek() == "T(":
                if len(reshape) == 1:  # XLA's parser takes no transpose of a one-dim iota
                    raise self.error("a one-dim iota takes no T(...)")
                self.take("T(")
                perm = self.ints(")")
            return TileAssignment.iota(dims, reshape, perm)
        devices = [self._int()]
        while self.peek() == ",":
            self.take(",")
            devices.append(self._int())
        if len(devices) != int(np.prod(dims, dtype=np.int64)):
            raise self.error(f"[{join_ints(dims)}] needs {int(np.prod(dims))} devices, "
                             f"{len(devices)} are listed")
        return TileAssignment(dims, devices=tuple(devices))

    def _attributes(self, fields: dict, kind: str) -> None:
        while self.peek() != "}":
            word = self.take()
            if word == "last_tile_dim_replicate" and kind == "tiled":
                fields["last_tile_dim_replicate"] = True
            elif word == "last_tile_dims" and kind == "tiled":
                self.take("=")
                self.take("{")
                types = []
                while self.peek() != "}":
                    if types:
                        self.take(",")
                    t = self.take()
                    if t not in SUBGROUP_TYPES:
                        raise self.error(f"unknown subgroup type {t!r}")
                    types.append(t)
                self.take("}")
                fields["subgroup_types"] = tuple(types)
            elif word in ("shard_as", "shard_like"):
                fields["shard_group"] = f"{word} {self._int()}"
            elif word == "metadata":
                self.take("=")
                fields["metadata"] = self._balanced()
            else:
                raise self.error(f"unknown sharding attribute {word!r}")
        self.take("}")
        if fields.get("last_tile_dim_replicate") and fields.get("subgroup_types"):
            raise self.error("last_tile_dim_replicate and last_tile_dims together")

    def _balanced(self) -> str:
        """The text inside `{...}` (metadata is kept as written)."""
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        if not self.text.startswith("{", self.pos):
            raise self.error("expected '{' after metadata=")
        depth, start, quoted = 0, self.pos + 1, False
        for k in range(self.pos, len(self.text)):
            c = self.text[k]
            if quoted:
                quoted = c != '"' or self.text[k - 1] == "\\"
            elif c == '"':
                quoted = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    self.pos = k + 1
                    return self.text[start:k]
        raise self.error("unbalanced braces in metadata")
