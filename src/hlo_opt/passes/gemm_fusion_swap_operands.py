"""GemmFusionSwapOperands ("gemm-fusion-swap-operands"): in a Triton GEMM fusion, the dot's
operands change places when the swapped dot suits Hopper's wgmma better
(`xla/backends/gpu/transforms/gemm_fusion_swap_operands.cc`).

Where it sits: "hlo normalization", right after `triton-gemm-rewriter` and `hoist-fused-bitcasts`,
as gpu_compiler.cc runs it. A fusion's dot is swapped when (XLA's ShouldSwapOperands)
- the lhs's non-contracting dims hold fewer than 64 elements and the rhs's at least 64 (wgmma's
  M is 64: a skinny side belongs on the rhs, whose N may be smaller), or
- the lhs only reads memory (a chain through bitcasts, broadcasts, reshapes, transposes to a
  parameter or constant) while the rhs computes something (a convert of s8 weights, say) and has
  at least 64 non-contracting elements: wgmma reads its lhs from registers, where the computing
  side's values already are.

The swapped dot lists the rhs's non-contracting dims before the lhs's; its layout is chosen so
its bytes lie as the old result's did, and a bitcast at the root gives back the old shape:

    d = f32[8,4,4096]{2,1,0} dot(bf16[4,8,512] p0, bf16[8,512,4096] p1),
        lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
      =>
    s = f32[8,4096,4]{1,2,0} dot(p1, p0), lhs_batch_dims={0}, lhs_contracting_dims={1},
        rhs_batch_dims={1}, rhs_contracting_dims={2}
    ROOT b = f32[8,4,4096]{2,1,0} bitcast(s)

The fusion's operands, parameters and output are unchanged; the instructions are listed again in
the depth-first post-order from the root (part of the fusion's autotune key, as in XLA).
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.matmul_utils import dot_dims
from hlo_opt.passes.algsimp.shape_ops import swapped_dot_attrs
from hlo_opt.passes.gemm_fusion import depth_first_order

GEMM_KINDS = ("__triton_gemm", "__triton_nested_gemm_fusion")
WGMMA_MIN_M = 64  # wgmma's M: the lhs's non-contracting size Hopper wants at least
_NO_CODE = frozenset({"bitcast", "broadcast", "constant", "get-tuple-element", "parameter", "reshape",
                      "transpose"})


def has_code(instr: HloInstruction) -> bool:
    """XLA's HasCodeGeneratingInstructions: anything but indexing ops along the first-operand chain."""
    while instr.operands:
        if instr.opcode not in _NO_CODE:
            return True
        instr = instr.operands[0]
    return False


def _free_size(dot: HloInstruction, side: int) -> int:
    key = ("lhs", "rhs")[side]
    skip = set(dot_dims(dot, f"{key}_batch_dims")) | set(dot_dims(dot, f"{key}_contracting_dims"))
    size = 1
    for d, s in enumerate(dot.operands[side].shape.dims):
        if d not in skip:
            size *= s
    return size


def should_swap(dot: HloInstruction) -> bool:
    """XLA's ShouldSwapOperands."""
    lhs_size, rhs_size = _free_size(dot, 0), _free_size(dot, 1)
    if lhs_size < WGMMA_MIN_M <= rhs_size:
        return True
    return not has_code(dot.operands[0]) and has_code(dot.operands[1]) and rhs_size >= WGMMA_MIN_M


def _swapped_shape(dot: HloInstruction) -> Shape:
    """The result shape with the two groups of non-contracting dims exchanged, its layout permuted
    along (XLA's ShapeUtil::ReorderLogicalDimensions): the same bytes in the same order."""
    nb = len(dot_dims(dot, "lhs_batch_dims"))
    nl = dot.operands[0].shape.rank - nb - len(dot_dims(dot, "lhs_contracting_dims"))
    nr = dot.shape.rank - nb - nl
    perm = list(range(nb)) + list(range(nb + nl, nb + nl + nr)) + list(range(nb, nb + nl))
    where = {old: new for new, old in enumerate(perm)}
    dims = tuple(dot.shape.dims[d] for d in perm)
    layout = tuple(where[d] for d in dot.shape.minor_to_major)
    return Shape.array(dot.shape.element_type, dims).with_layout(layout)


def swap_operands(comp: HloComputation, dot: HloInstruction) -> HloInstruction:
    """Replace `dot` by bitcast(dot(rhs, lhs)); returns the new dot."""
    lhs, rhs = dot.operands
    new_dot = comp.add_new_instruction("dot", [rhs, lhs], _swapped_shape(dot), swapped_dot_attrs(dot),
                                       name="dot")
    new_dot.metadata = list(dot.metadata)
    new_dot.backend_config_data = dot.backend_config_data
    bitcast = comp.add_new_instruction("bitcast", [new_dot], dot.shape, name="bitcast")
    bitcast.metadata = list(dot.metadata)
    was_root = comp.root is dot
    dot.replace_all_uses_with(bitcast)
    if was_root:
        comp.root = bitcast
    comp.remove_instruction(dot)
    comp.instructions = depth_first_order(comp)
    return new_dot


def _gemm_kind(fusion: HloInstruction) -> bool:
    config = fusion.backend_config_data
    return isinstance(config, dict) and config.get("fusion_backend_config", {}).get("kind") in GEMM_KINDS


@register_pass
@dataclass
class GemmFusionSwapOperands(HloPass):
    """Dots of Triton GEMM fusions swap operands where wgmma prefers it (XLA's GemmFusionSwapOperands)."""

    name = "gemm-fusion-swap-operands"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in non_fusion_computations(module):
            for fusion in comp.instructions:
                if fusion.opcode != "fusion" or not _gemm_kind(fusion):
                    continue
                body = fusion.fused_computation()
                dot = next((i for i in body.instructions if i.opcode == "dot"), None)
                if dot is not None and should_swap(dot):
                    swap_operands(body, dot)
                    _swap_output_tile(fusion)
                    changed = True
        return changed


def _swap_output_tile(fusion: HloInstruction) -> None:
    """The config's block_m x block_n now tiles the swapped dot (M and N exchanged), so the root,
    which still has the old dot's [.., M, N] dims, is tiled [.., block_n, block_m] (XLA assigns the
    config after the swap: its default 16 x 8 reads 8 x 16 on such roots)."""
    block = fusion.backend_config_data.get("fusion_backend_config", {}).get("block_level_fusion_config")
    tiles = (block or {}).get("output_tiles") or []
    if tiles and len(tiles[0].get("sizes") or ()) >= 2:
        sizes = list(tiles[0]["sizes"])
        sizes[-2:] = sizes[-1], sizes[-2]
        tiles[0] = dict(tiles[0], sizes=sizes)


__all__ = ["GemmFusionSwapOperands", "has_code", "should_swap", "swap_operands"]
