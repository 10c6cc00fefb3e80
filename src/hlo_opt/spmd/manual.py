"""Manual regions (jax's `shard_map`) as jax 0.10 writes them through Shardy: a
`xla.sdy.GlobalToLocalShape` custom call hands each device its tile of the operands
(`xla.sdy.in_shardings`), a `call` runs the body on those per-device values (its collectives
written by the user), and `xla.sdy.LocalToGlobalShape` takes the per-device results back as
tiles of a global value (`xla.sdy.out_shardings`). XLA's GSPMD form of the same is the
`SPMDFullToShardShape` / `SPMDShardToFullShape` pair around `{manual}` values
(xla/service/spmd/shardy/sdy_round_trip/, spmd_partitioner.cc's HandleCustomCall).

Both forms are taken: `target` names either edge by its Shardy name; a GSPMD edge's global tiling
is the sharding of the full-shape side (the operand entering, the result leaving). Values inside
a region are `MANUAL`: already per-device, never resharded. Only regions manual over every mesh
axis (every device) are taken so far.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.tile_assignment import ShardingError
from hlo_opt.spmd.errors import SpmdError
from hlo_opt.spmd.sdy_attrs import parse_meshes, parse_shardings, unquote
from hlo_opt.spmd.tiling import Tiling, from_sharding

MANUAL = "manual"
TO_LOCAL = "xla.sdy.GlobalToLocalShape"
TO_GLOBAL = "xla.sdy.LocalToGlobalShape"
_EDGES = {TO_LOCAL: TO_LOCAL, TO_GLOBAL: TO_GLOBAL,  # GSPMD's names for the same edges
          "SPMDFullToShardShape": TO_LOCAL, "SPMDShardToFullShape": TO_GLOBAL}


def target(instr: HloInstruction) -> str | None:
    """TO_LOCAL or TO_GLOBAL for a region's edge (in either form), else None."""
    if instr.opcode != "custom-call":
        return None
    return _EDGES.get(instr.attrs.get("custom_call_target"))


def is_manual(t) -> bool:
    if isinstance(t, tuple):
        return any(is_manual(e) for e in t)
    return t == MANUAL


def like(shape):
    """MANUAL for every leaf of `shape`."""
    return tuple(like(s) for s in shape.tuple_shapes) if shape.is_tuple else MANUAL


def region_tilings(instr: HloInstruction, n: int) -> list[Tiling]:
    """The global tilings at a region's edge: of each operand entering (GlobalToLocalShape), of
    each result leaving (LocalToGlobalShape)."""
    if instr.attrs.get("custom_call_target") not in (TO_LOCAL, TO_GLOBAL):
        return _gspmd_tilings(instr, n)
    attrs = dict(instr.frontend_attributes)
    key = "xla.sdy.in_shardings" if target(instr) == TO_LOCAL else "xla.sdy.out_shardings"
    module = instr.parent.parent
    header = module.header_attr("frontend_attributes") or ""
    if key not in attrs or "xla.sdy.meshes" not in header:
        raise SpmdError(f"{target(instr)} without {key} or the module's xla.sdy.meshes", instr)
    meshes = parse_meshes(header[header.index("xla.sdy.meshes"):])
    values = instr.operands if target(instr) == TO_LOCAL else [instr]
    ranks = [v.shape.rank for v in values]
    try:
        shardings = parse_shardings(attrs[key], meshes, ranks)
    except ShardingError as exc:
        raise SpmdError(f"cannot import {key}: {exc}", instr) from None
    axes = unquote(attrs.get("xla.sdy.manual_axes", ""))
    for mesh_axes, _ in meshes.values():
        if any(f'"{name}"' not in axes for name, _ in mesh_axes):
            raise SpmdError("a region manual over some mesh axes only is not partitioned yet", instr)
    return [from_sharding(s, r, n) for s, r in zip(shardings, ranks)]


def _gspmd_tilings(instr: HloInstruction, n: int) -> list[Tiling]:
    """SPMDFullToShardShape: the tiling of its operand's sharding (jax pins it with a `Sharding`
    call); SPMDShardToFullShape: of its own sharding."""
    full = instr.operands[0] if target(instr) == TO_LOCAL else instr
    sharding = full.sharding
    if sharding is None or sharding.kind == "manual":
        side = "operand" if full is not instr else "result"
        raise SpmdError(f"{instr.attrs.get('custom_call_target')}: its full-shape {side} has no tiled or "
                        f"replicated sharding", instr)
    tiling = from_sharding(sharding, full.shape.rank, n)
    if tiling is None:
        raise SpmdError(f"a region manual over some devices only ({sharding}) is not partitioned yet", instr)
    return [tiling]


def check_local(instr: HloInstruction, global_shape, tiling: Tiling, local_shape) -> None:
    """A region's per-device shape must be its global value's tile (issue 17 item 8)."""
    dims = tiling.local_dims(global_shape.dims)
    if dims != tuple(local_shape.dims):
        raise SpmdError(f"manual region: the per-device shape {local_shape} is not the tile "
                        f"{list(dims) if dims else 'of uneven size'} of {global_shape} under "
                        f"{tiling.to_sharding()}", instr)
