"""DotStrengthReduction ("dot-strength-reduction"): dots the GEMM paths should not take become an
elementwise multiply and a reduce (`xla/backends/gpu/transforms/dot_strength_reduction.cc`).

Where it sits: first in the fixed-point "simplification" pipeline of "optimization", before
algsimp, as gpu_compiler.cc runs it. Which dots (XLA's InstructionMatchesPattern):
- at least one operand is a vector (only batch and contracting dimensions), or the dot is an
  s32 x s32 -> s32 dot whose rhs contracts dimension 1 (the loop emitter is slow there);
- then: vector . vector always; otherwise when the matrix product is small,
  (M + N) * K < 10,000,000 (IsMatrixMultiplicationTooSmallForRewriting), or when Triton could not
  take it (legacy CanTritonHandleGEMM, `hlo_opt.triton_support.cannot_handle_gemm`).

The rewrite (XLA's ExpandInstruction): both operands converted to the result type, transposed to
[batch, non-contracting, contracting], broadcast to the common [batch, lhs free, rhs free,
contracting] shape, multiplied, converted to the GEMM accumulator type (f32 for narrow floats),
summed over the contracting dims and converted back:

    d = bf16[1024] dot(bf16[1024,1024] a, bf16[1024] b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      =>
    m = bf16[1024,1024] multiply(a, bf16[1024,1024] broadcast(b), dimensions={1})
    d = bf16[1024] convert(f32[1024] reduce(f32[1024,1024] convert(m), f32[] 0), dimensions={1})

Dots with a precision algorithm whose multiply XLA splits into several bf16 products
(MakeMultiplyForDotPrecisionAlgorithm: the bf16 x3/x6/x9 and tf32 algorithms) are left to the GEMM
paths here; a plain multiply stands for ALG_UNSET and dot_f32_f32_f32 only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.hlo.hlo_creation_utils import (
    make_binary, make_broadcast, make_constant, make_convert, make_reduce, make_transpose, scalar_computation,
)
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo_pass.pass_base import DevicePass, register_pass
from hlo_opt.matmul_utils import dot_dims, too_small_for_rewriting
from hlo_opt.passes.op_expander_pass import OpExpanderPass
from hlo_opt.passes.splitk_rewriter import accumulator_type
from hlo_opt.triton_support import cannot_handle_gemm

SMALL_DOT_THRESHOLD = 10_000_000  # DotStrengthReduction's threshold for IsMatrixMultiplicationTooSmall...
PLAIN_MULTIPLY_ALGORITHMS = (None, "dot_f32_f32_f32")


def _is_vector(dot: HloInstruction, side: str, operand: HloInstruction) -> bool:
    return len(dot_dims(dot, f"{side}_batch_dims")) + len(dot_dims(dot, f"{side}_contracting_dims")) \
        == operand.shape.rank


def _favourable_s32(dot: HloInstruction) -> bool:
    """s32 x s32 -> s32 with the rhs contracting exactly dimension 1."""
    types = {o.shape.element_type.name for o in dot.operands} | {dot.shape.element_type.name}
    return types == {"s32"} and dot_dims(dot, "rhs_contracting_dims") == (1,)


def should_strength_reduce(dot: HloInstruction, cc: tuple[int, int]) -> bool:
    """XLA's DotStrengthReduction::InstructionMatchesPattern (with this port's algorithm limit)."""
    if dot.opcode != "dot" or len(dot.operands) != 2 or dot.attrs.get("sparsity"):
        return False
    if dot.attrs.get("algorithm") not in PLAIN_MULTIPLY_ALGORITHMS:
        return False
    lhs_vector = _is_vector(dot, "lhs", dot.operands[0])
    rhs_vector = _is_vector(dot, "rhs", dot.operands[1])
    if not (lhs_vector or rhs_vector or _favourable_s32(dot)):
        return False
    if lhs_vector and rhs_vector:
        return True
    if too_small_for_rewriting(dot, SMALL_DOT_THRESHOLD):
        return True
    return cannot_handle_gemm(dot, cc) is not None


def _dims(dot: HloInstruction, side: str, rank: int) -> tuple[list[int], list[int], list[int]]:
    """(batch, non-contracting, contracting) dims of one operand: batch and contracting in the
    dimension numbers' order, the free dims ascending (XLA's DotOperandDims)."""
    batch = list(dot_dims(dot, f"{side}_batch_dims"))
    contracting = list(dot_dims(dot, f"{side}_contracting_dims"))
    free = [d for d in range(rank) if d not in batch and d not in contracting]
    return batch, free, contracting


def _copy_metadata(new: HloInstruction, dot: HloInstruction) -> HloInstruction:
    if new is not dot and not new.metadata:
        new.metadata = list(dot.metadata)
    return new


def expand(dot: HloInstruction) -> HloInstruction:
    """The multiply + reduce that replaces `dot` (XLA's ExpandInstruction)."""
    et = dot.shape.element_type
    lhs, rhs = dot.operands
    ldims, rdims = _dims(dot, "lhs", lhs.shape.rank), _dims(dot, "rhs", rhs.shape.rank)
    lfree, rfree = [lhs.shape.dims[d] for d in ldims[1]], [rhs.shape.dims[d] for d in rdims[1]]
    sides = []
    for operand, (batch, free, contracting), other_free, lhs_side in (
            (lhs, ldims, rfree, True), (rhs, rdims, lfree, False)):
        x = _copy_metadata(make_convert(operand, et), dot)
        x = _copy_metadata(make_transpose(x, batch + free + contracting), dot)
        if other_free:
            # [batch, lhs free, rhs free, contracting]: the other side's free dims go after our
            # free dims on the lhs, right after the batch dims on the rhs.
            at = len(batch) + (len(free) if lhs_side else 0)
            dims = list(x.shape.dims[:at]) + other_free + list(x.shape.dims[at:])
            kept = list(range(at)) + list(range(at + len(other_free), len(dims)))
            x = _copy_metadata(make_broadcast(x, dims, kept), dot)
        sides.append(x)
    flow = _copy_metadata(make_binary("multiply", sides[0], sides[1]), dot)
    n_contracting = len(ldims[2])
    if n_contracting:
        acc = accumulator_type(dot)
        rank = flow.shape.rank
        reducer = scalar_computation(dot.parent.parent, "add", acc, before=dot.parent,
                                     name="scalar_add_computation")
        for param, name in zip(reducer.parameters, ("scalar_lhs", "scalar_rhs")):
            param.name = name
        flow = _copy_metadata(make_convert(flow, acc), dot)
        zero = make_constant(dot.parent, 0, acc)
        flow = _copy_metadata(make_reduce(flow, zero, range(rank - n_contracting, rank), reducer), dot)
    return _copy_metadata(make_convert(flow, et), dot)


@register_pass
@dataclass
class DotStrengthReduction(OpExpanderPass, DevicePass):
    """Vector-sided, small or Triton-unfit dots become multiply + reduce (XLA's DotStrengthReduction)."""

    name = "dot-strength-reduction"
    device: DeviceDescription = field(default=H100)

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        return should_strength_reduce(instr, self.device.compute_capability)

    def expand_instruction(self, instr: HloInstruction) -> HloInstruction:
        return expand(instr)


__all__ = ["DotStrengthReduction", "expand", "should_strength_reduce"]
