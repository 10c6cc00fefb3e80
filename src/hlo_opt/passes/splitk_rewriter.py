"""SplitkRewriter ("splitk-rewriter"): a dot whose K is long next to its M and N is split along K
into a batch of `split_k` smaller dots, summed afterwards (`xla/service/gpu/transforms/
splitk_rewriter.cc`). The split count is XLA's ChooseSplitK: the
cheapest of 1, 2, 4, ..., 128 under a cost model fitted on an H100 (212x212 tiles in waves over the
SMs, compute or memory bound per tile, L2 or HBM bandwidth, plus the launch and traffic of the
reduction when split).

Where it sits: "hlo normalization", right before `triton-gemm-rewriter` (passes/gemm_fusion.py),
and only when Triton GEMMs are on (XLA runs it under --xla_gpu_enable_triton_gemm; off, dots go
to cuBLAS unsplit). The split dot is what becomes the GEMM fusion; the reduce and convert after
it are fused by priority fusion as XLA's `loop_reduce_fusion`.

    d = bf16[512,256] dot(bf16[512,1024] a, bf16[1024,256] b), contracting {1} x {0}
    becomes (split 8; K is zero-padded at its end first to a multiple of split x 16 bytes)
    a' = bf16[512,8,128] reshape(a);  b' = bf16[8,128,256] reshape(b)
    s = f32[8,512,256] dot(a', b'), lhs_batch_dims={1}, lhs_contracting_dims={2},
                                    rhs_batch_dims={0}, rhs_contracting_dims={1}
    d = bf16[512,256] convert(f32[512,256] reduce(s, 0), dimensions={0}, to_apply=add)

The reshapes keep each operand's physical layout (the split dimension sits right above K).
Dots with several contracting dims, sparse operands or s32 operands are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.hlo.attributes import PaddingConfig
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.hlo.hlo_creation_utils import (
    make_constant, make_convert, make_reduce, non_fusion_computations, scalar_computation,
)
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import DevicePass, register_pass
from hlo_opt.matmul_utils import dot_dims

# XLA's fitted cost model of a split GEMM on an H100 (EstimateGemmCostAfterSplitK), in "FLOPs".
M_TILE = N_TILE = 212
K_STEP_BYTES = 442
EXTRA_FLOPS_PER_ELEMENT = 4.73313
FLOPS_PER_BYTE_HBM, FLOPS_PER_BYTE_CACHED, CACHE_THRESHOLD = 2842.3, 1846.31, 2.19872
REDUCTION_LAUNCH_FLOPS, REDUCTION_FLOPS_PER_BYTE = 2.74228e9, 677.076
CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128)
ELEMENTWISE_UNARY = {"convert", "negate", "abs", "copy", "bitcast-convert", "exponential", "tanh", "sqrt",
                     "rsqrt", "log", "sine", "cosine", "not", "sign", "floor", "ceil"}


@dataclass(frozen=True)
class DotDimensions:
    b: int
    m: int
    n: int
    k: int
    lhs_bits: int
    rhs_bits: int
    acc_bits: int
    out_bits: int
    flops_per_element: int = 2


def _side_bits(instr: HloInstruction) -> int:
    """The element width an operand is read in: through unary elementwise ops (a convert of s8
    reads bytes), as what will be fused."""
    while instr.opcode in ELEMENTWISE_UNARY and len(instr.operands) == 1:
        instr = instr.operands[0]
    return instr.shape.element_type.bits


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def split_cost(g: DotDimensions, split: int, num_cores: int, l2_bytes: int) -> float:
    """XLA's EstimateGemmCostAfterSplitK (same integer truncations)."""
    k, batch = _cdiv(g.k, split), g.b * split
    waves = _cdiv(batch * _cdiv(g.m, M_TILE) * _cdiv(g.n, N_TILE), num_cores)
    k_steps = _cdiv(k * max(g.lhs_bits, g.rhs_bits) // 8, K_STEP_BYTES)
    out_bits = g.acc_bits if split > 1 else g.out_bits
    flops = int((g.flops_per_element + EXTRA_FLOPS_PER_ELEMENT) * M_TILE * N_TILE * k_steps * K_STEP_BYTES
                * g.acc_bits / 8)
    tile_bytes = M_TILE * k * g.lhs_bits // 8 + N_TILE * k * g.rhs_bits // 8 + M_TILE * N_TILE * out_bits // 8
    cached = tile_bytes * num_cores < CACHE_THRESHOLD * l2_bytes
    per_byte = FLOPS_PER_BYTE_CACHED if cached else FLOPS_PER_BYTE_HBM
    cost = max(flops, int(tile_bytes * per_byte)) * waves
    if split == 1:
        return cost
    reduction_bytes = batch * g.m * g.n * g.acc_bits // 8 + g.b * g.m * g.n * g.out_bits // 8
    return cost + REDUCTION_LAUNCH_FLOPS + int(reduction_bytes * REDUCTION_FLOPS_PER_BYTE)


def choose_split_k(g: DotDimensions, num_cores: int, l2_bytes: int) -> int:
    """XLA's ChooseSplitK: the cheapest candidate (the first of equals)."""
    costs = [split_cost(g, s, num_cores, l2_bytes) for s in CANDIDATES]
    return CANDIDATES[costs.index(min(costs))]


def dot_dimensions(dot: HloInstruction) -> DotDimensions:
    lhs, rhs = dot.operands
    lb, lc = dot_dims(dot, "lhs_batch_dims"), dot_dims(dot, "lhs_contracting_dims")
    rb, rc = dot_dims(dot, "rhs_batch_dims"), dot_dims(dot, "rhs_contracting_dims")
    ld, rd = lhs.shape.dims, rhs.shape.dims
    acc = PRIMITIVE_TYPES[accumulator_type(dot)]
    return DotDimensions(
        b=int(np.prod([ld[d] for d in lb])),
        m=int(np.prod([s for d, s in enumerate(ld) if d not in lb and d not in lc])),
        n=int(np.prod([s for d, s in enumerate(rd) if d not in rb and d not in rc])),
        k=int(np.prod([ld[d] for d in lc])), lhs_bits=_side_bits(lhs), rhs_bits=_side_bits(rhs),
        acc_bits=acc.byte_size * 8, out_bits=dot.shape.element_type.bits)


def padded_k(g: DotDimensions, split: int) -> int:
    """XLA's GetPaddedK: K rounded up to a multiple of split x (16 bytes of the narrower side)."""
    align = split * 128 // min(128, g.lhs_bits, g.rhs_bits)
    return _cdiv(g.k, align) * align


def _split_operand(operand: HloInstruction, kdim: int, split: int, k: int) -> HloInstruction:
    """operand (zero-padded at the end of K to `k` first when shorter) reshaped so its dim `kdim`
    becomes [split, k/split], the physical order kept."""
    comp = operand.parent
    size = operand.shape.dims[kdim]
    if size != k:
        zero = make_constant(comp, 0, operand.shape.element_type)
        pads = [(0, 0, 0)] * operand.shape.rank
        pads[kdim] = (0, k - size, 0)
        dims = list(operand.shape.dims)
        dims[kdim] = k
        shape = Shape.array(operand.shape.element_type, dims, operand.shape.minor_to_major)
        operand = comp.add_new_instruction("pad", [operand, zero], shape,
                                           {"padding": PaddingConfig(tuple(pads))})
    dims = list(operand.shape.dims)
    dims[kdim:kdim + 1] = [split, k // split]
    m2m: list[int] = []
    for d in operand.shape.minor_to_major:
        if d >= kdim:
            m2m.append(d + 1)
        if d <= kdim:
            m2m.append(d)
    shape = Shape.array(operand.shape.element_type, dims, tuple(m2m))
    return comp.add_new_instruction("reshape", [operand], shape)


def _shift(dims: tuple[int, ...], at: int) -> list[int]:
    return [d + 1 if d >= at else d for d in dims]


def split_dot(dot: HloInstruction, split: int, accumulator: str) -> HloInstruction:
    """The reduce (and convert) of a split dot that replaces `dot`."""
    comp: HloComputation = dot.parent
    lk, rk = dot_dims(dot, "lhs_contracting_dims")[0], dot_dims(dot, "rhs_contracting_dims")[0]
    k = padded_k(dot_dimensions(dot), split)
    lhs, rhs = _split_operand(dot.operands[0], lk, split, k), _split_operand(dot.operands[1], rk, split, k)
    lb = _shift(dot_dims(dot, "lhs_batch_dims"), lk) + [lk]
    rb = _shift(dot_dims(dot, "rhs_batch_dims"), rk) + [rk]
    attrs = dict(dot.attrs)
    attrs.update(lhs_batch_dims=tuple(lb), rhs_batch_dims=tuple(rb),
                 lhs_contracting_dims=(lk + 1,), rhs_contracting_dims=(rk + 1,))
    split_at = len(lb) - 1
    out_dims = list(dot.shape.dims)
    out_dims.insert(split_at, split)
    out_m2m = [d + 1 if d >= split_at else d for d in dot.shape.minor_to_major] + [split_at]
    new = comp.add_new_instruction("dot", [lhs, rhs], Shape.array(accumulator, out_dims, tuple(out_m2m)),
                                   attrs, name="dot")
    new.metadata = list(dot.metadata)
    reducer = scalar_computation(comp.parent, "add", accumulator, before=comp,
                                 name=f"{new.name}.reduce_sub_computation")
    zero = make_constant(comp, 0, accumulator)
    out: HloInstruction = make_reduce(new, zero, [split_at], reducer)
    out.shape = out.shape.with_layout(dot.shape.minor_to_major)
    if dot.shape.element_type.name != accumulator:
        out = make_convert(out, dot.shape.element_type)
        out.shape = out.shape.with_layout(dot.shape.minor_to_major)
    return out


def accumulator_type(dot: HloInstruction) -> str:
    """XLA's GetGemmAccumulatorType: f32 for 16-bit and 8-bit float results, s32 for integer
    ones, else the result type."""
    et = dot.shape.element_type
    if et.is_float and et.bits < 32:
        return "f32"
    if et.name in ("s8", "s16", "u8", "u16"):
        return "s32"
    return et.name


@register_pass
@dataclass
class SplitkRewriter(DevicePass):
    """Dots with a long K split into a batch of shorter dots plus a sum (XLA's SplitkRewriter)."""

    name = "splitk-rewriter"
    device: DeviceDescription = field(default=H100)
    enabled: bool = True  # with --xla_gpu_enable_triton_gemm=false XLA leaves dots unsplit

    def run_with_options(self, module: HloModule, options) -> bool:
        if getattr(options, "triton_gemm", True) is False:
            return False
        return super().run_with_options(module, options)

    def run(self, module: HloModule) -> bool:
        if not self.enabled:
            return False
        changed = False
        for comp in non_fusion_computations(module):
            for dot in [i for i in comp.post_order() if i.opcode == "dot"]:
                changed |= self._rewrite(dot)
        return changed

    def _rewrite(self, dot: HloInstruction) -> bool:
        if len(dot.operands) != 2 or any(o.shape.rank == 0 for o in dot.operands):
            return False
        if len(dot_dims(dot, "lhs_contracting_dims")) != 1 or len(dot_dims(dot, "rhs_contracting_dims")) != 1:
            return False
        if any(op.shape.element_type.name == "s32" for op in dot.operands):
            return False
        split = choose_split_k(dot_dimensions(dot), self.device.core_count, self.device.l2_cache_size)
        if split == 1:
            return False
        dot.parent.replace_instruction(dot, split_dot(dot, split, accumulator_type(dot)))
        return True


__all__ = ["DotDimensions", "SplitkRewriter", "choose_split_k", "dot_dimensions", "split_cost"]
