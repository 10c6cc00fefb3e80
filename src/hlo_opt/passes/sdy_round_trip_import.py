"""SdyRoundTripImport ("sdy-round-trip-import"): the shardings jax 0.10 writes as Shardy frontend
attributes become HloShardings, the form sharding-propagation and the partitioner read.

Where it sits: first in the `spmd-partitioner` pipeline. jax lowers through Shardy and exports
each sharding twice, as `sharding={...}` and as `frontend_attributes={xla.sdy.sharding=...}`
over the module's `xla.sdy.meshes` (xla/service/spmd/shardy/sdy_round_trip/); a function result
is marked only by the side-effecting `xla.sdy.FuncResultSharding` custom call, whose sharding
lives in the attribute alone. This pass

- gives every instruction that has `xla.sdy.sharding` but no `sharding=` the converted sharding
  (`hlo_opt.spmd.sdy_attrs`), and
- turns each FuncResultSharding into XLA's `Sharding` custom call with that sharding (what the
  GSPMD path uses for a pinned sharding), no longer side-effecting, so that DCE may drop dead ones.

    %r = f32[8,4] custom-call(%t), custom_call_target="xla.sdy.FuncResultSharding",
         custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {}]>]>"}
      =>  %r = f32[8,4] custom-call(%t), custom_call_target="Sharding", sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}

A module without `xla.sdy.meshes` is left alone. An attribute naming an unknown mesh or axis, or
of the wrong rank, is a one-line error naming the instruction.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.sharding import HloSharding
from hlo_common.hlo.tile_assignment import ShardingError
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.spmd.errors import SpmdError
from hlo_opt.spmd.sdy_attrs import parse_meshes, parse_shardings

_SHARDING_KEY = "xla.sdy.sharding"


@register_pass
@dataclass
class SdyRoundTripImport(HloPass):
    """Converts jax's Shardy frontend attributes into HLO shardings."""

    name = "sdy-round-trip-import"

    def run(self, module: HloModule) -> bool:
        text = _module_meshes(module)
        if text is None:
            return False
        meshes = parse_meshes(text)
        changed = False
        for comp in module.computations:
            for instr in comp.instructions:
                changed |= _import(instr, meshes)
        return changed


def _module_meshes(module: HloModule) -> str | None:
    attrs = module.header_attr("frontend_attributes")
    if attrs is None or "xla.sdy.meshes" not in attrs:
        return None
    start = attrs.index("xla.sdy.meshes")
    return attrs[start:]


def _import(instr: HloInstruction, meshes: dict) -> bool:
    value = dict(instr.frontend_attributes).get(_SHARDING_KEY)
    if value is None:
        return False
    is_result_marker = instr.opcode == "custom-call" and \
        instr.attrs.get("custom_call_target") == "xla.sdy.FuncResultSharding"
    if instr.sharding is not None and not is_result_marker:
        return False
    leaves = [leaf for _, leaf in instr.shape.leaf_shapes()] if instr.shape.is_tuple else [instr.shape]
    try:
        shardings = parse_shardings(value, meshes, [leaf.rank for leaf in leaves])
    except ShardingError as exc:
        raise SpmdError(f"cannot import {_SHARDING_KEY}: {exc}", instr) from None
    sharding = HloSharding("tuple", elements=tuple(shardings)) if instr.shape.is_tuple else shardings[0]
    if is_result_marker:
        instr.attrs["custom_call_target"] = "Sharding"
        instr.attrs.pop("custom_call_has_side_effect", None)
        instr.frontend_attributes = [(k, v) for k, v in instr.frontend_attributes if k != _SHARDING_KEY]
    if instr.sharding is None:
        instr.sharding = sharding
    return True
