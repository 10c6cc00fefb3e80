"""Shardy's text attributes, as jax 0.10 writes them into HLO, turned into HloShardings.

jax lowers through Shardy and round-trips its shardings as frontend attributes
(xla/service/spmd/shardy/sdy_round_trip/): the module's `xla.sdy.meshes={mesh = #sdy.mesh<["x"=2,
"y"=4]>}` names the meshes, an instruction's `xla.sdy.sharding="#sdy.sharding<@mesh, [{"x"},
{}]>"` (or `#sdy.sharding_per_value<[<@mesh, ...>, ...]>` for each result) shards each dimension
over mesh axes, major first. A dimension over axes (a, b) is tiled |a|*|b| ways; the axes no
dimension names replicate. As an HloSharding (XLA's ConvertToHloSharding in
xla/service/spmd/shardy/utils): the mesh's device array transposed to [axes of dim 0, ..., axes of
the last dim, the other axes] and reshaped to [tiles of each dim, replication]. Sub-axes
(`"x":(2)2`, the part of "x" of size 2 after a major part of size 2) split an axis first.
"""

from __future__ import annotations

import re

import numpy as np

from hlo_common.hlo.sharding import HloSharding
from hlo_common.hlo.tile_assignment import ShardingError, TileAssignment

_MESH = re.compile(r'(\w+)\s*=\s*#sdy\.mesh<\[(.*?)\](?:\s*,\s*device_ids=\[([\d,\s]*)\])?>')
_AXIS = re.compile(r'"([^"]+)"\s*=\s*(\d+)')
_SHARDING = re.compile(r"<\s*@(\w+)\s*,\s*\[(.*?)\]\s*(?:,[^>]*)?>")
_DIM = re.compile(r"\{([^}]*)\}\s*(?:p\d+)?")
_AXIS_REF = re.compile(r'"([^"]+)"(?::\((\d+)\)(\d+))?')


def unquote(value: str) -> str:
    """A frontend attribute's value as the IR keeps it (quoted, with escaped quotes) in plain text."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return value.replace('\\"', '"').replace("\\\\", "\\")


def parse_meshes(text: str) -> dict[str, tuple[list[tuple[str, int]], tuple[int, ...] | None]]:
    """`{mesh = #sdy.mesh<["x"=2]>, ...}` -> name -> (axes with sizes, device ids or None)."""
    meshes = {}
    for name, axes, ids in _MESH.findall(unquote(text)):
        sizes = [(a, int(s)) for a, s in _AXIS.findall(axes)]
        devices = tuple(int(d) for d in ids.split(",") if d.strip()) if ids else None
        meshes[name] = (sizes, devices)
    return meshes


def parse_shardings(text: str, meshes: dict, ranks: list[int]) -> list[HloSharding]:
    """The shardings of `#sdy.sharding<...>` or `#sdy.sharding_per_value<[...]>`, one per result."""
    text = unquote(text)
    if text.startswith("#sdy.sharding_per_value"):
        text = text[len("#sdy.sharding_per_value"):]
    found = _SHARDING.findall(text)
    if len(found) != len(ranks):
        raise ShardingError(f"{text} holds {len(found)} shardings for {len(ranks)} results")
    return [_one(mesh, dims, meshes, rank) for (mesh, dims), rank in zip(found, ranks)]


def _one(mesh_name: str, dims_text: str, meshes: dict, rank: int) -> HloSharding:
    if mesh_name not in meshes:
        raise ShardingError(f"unknown mesh @{mesh_name}")
    axes, device_ids = meshes[mesh_name]
    dims = [[(a, int(pre) if pre else None, int(size) if size else None)
             for a, pre, size in _AXIS_REF.findall(body)] for body in _DIM.findall(dims_text)]
    if len(dims) != rank:
        raise ShardingError(f"a sharding of {len(dims)} dims for a rank-{rank} value")
    factors = _split_axes(axes, [ref for dim in dims for ref in dim])
    index = {key: k for k, (key, _) in enumerate(factors)}
    order, tiles = [], []
    for dim in dims:
        keys = [k for ref in dim for k in _factor_keys(ref, factors)]
        order += [index[k] for k in keys]
        tiles.append(int(np.prod([factors[index[k]][1] for k in keys], dtype=np.int64)))
    rest = [k for k in range(len(factors)) if k not in order]
    replication = int(np.prod([factors[k][1] for k in rest], dtype=np.int64))
    total = int(np.prod([s for _, s in axes], dtype=np.int64))
    if total == 1 or replication == total:
        return HloSharding("replicated")
    sizes = tuple(s for _, s in factors)
    perm = tuple(order + rest)
    shape = tuple(tiles) + ((replication,) if replication > 1 else ())
    if device_ids is None:
        tiling = TileAssignment.iota(shape, sizes, perm)
    else:
        ids = np.asarray(device_ids).reshape(sizes).transpose(perm).reshape(-1)
        tiling = TileAssignment(shape, devices=tuple(int(d) for d in ids))
    return HloSharding.tiled(tiling, replicate_last=replication > 1)


def _split_axes(axes: list[tuple[str, int]], refs) -> list[tuple[tuple[str, int], int]]:
    """The mesh's axes cut at every sub-axis boundary: ((axis, start), size) major to minor."""
    out = []
    for name, size in axes:
        cuts = {1, size}
        for a, pre, sub in refs:
            if a == name and pre is not None:
                cuts.update({pre, pre * sub})
        bounds = sorted(c for c in cuts if size % c == 0)
        out += [((name, lo), hi // lo) for lo, hi in zip(bounds, bounds[1:])]
    return out


def _factor_keys(ref, factors) -> list[tuple[str, int]]:
    name, pre, sub = ref
    keys = [key for key, _ in factors if key[0] == name]
    if pre is None:
        if not keys:
            raise ShardingError(f"unknown mesh axis {name!r}")
        return keys
    return [key for key, size in factors if key[0] == name and pre <= key[1] < pre * sub]
