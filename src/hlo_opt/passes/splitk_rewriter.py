"""SplitkRewriter ("splitk-rewriter"): a dot whose K is long next to its M and N is split along K
into a batch of `split_k` smaller dots, summed afterwards (`xla/backends/gpu/transforms/
splitk_rewriter.cc`). The split count is XLA's ChooseSplitK: the cheapest of 1, 2, 4, ..., 2048
under XLA's cost model with weights fitted per architecture (128x128 tiles in waves over the SMs,
the larger of compute and memory traffic, plus the launch and traffic of the reduction when split).

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

# XLA's cost model of a split GEMM (EstimateGemmCostAfterSplitK in
# xla/backends/gpu/transforms/splitk_rewriter.cc, the version jaxlib 0.10 runs: its choices equal
# XLA:GPU's on every GEMM of testdata/triton): 128 x 128 output tiles in waves over the SMs, the
# cost the larger of compute and memory traffic, plus a launch and the partials' traffic when split.
TILE = 128
# (compute, memory, reduction memory, reduction launch) weights per architecture
WEIGHTS_BLACKWELL = (100.0, 0.0848863, 189.711, 1.21563e8)
WEIGHTS_HOPPER = (100.0, 0.194136, 193.1384, 4.36e7)
WEIGHTS_OLDER = (100.0, 0.0666955, 467.815, 5.65307e7)
CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
# FLOPs per output element and K step of the dot algorithms that take several passes (XLA's
# GetAlgoritmFlopsPerElement); every other dot: a multiply and an add
_ALGORITHM_FLOPS = {"dot_bf16_bf16_f32_x3": 12, "dot_tf32_tf32_f32_x3": 12, "dot_bf16_bf16_f32_x6": 20,
                    "dot_bf16_bf16_f32_x9": 28}
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


def cost_weights(compute_capability: tuple[int, int]) -> tuple[float, float, float, float]:
    """XLA's GetCostWeights: fitted per architecture (Blackwell, Hopper, older)."""
    if compute_capability[0] >= 10:
        return WEIGHTS_BLACKWELL
    return WEIGHTS_HOPPER if compute_capability[0] >= 9 else WEIGHTS_OLDER


def split_cost(g: DotDimensions, split: int, num_cores: int,
               weights: tuple[float, float, float, float] = WEIGHTS_HOPPER) -> float:
    """XLA's EstimateGemmCostAfterSplitK of `g` split `split` ways on `num_cores` SMs."""
    compute_w, memory_w, reduction_w, launch = weights
    k, batch = _cdiv(g.k, split), g.b * split
    m_tile, n_tile = min(g.m, TILE), min(g.n, TILE)
    tiles = batch * _cdiv(g.m, TILE) * _cdiv(g.n, TILE)
    per_sm = (TILE * TILE) / (m_tile * n_tile)  # small tiles share an SM
    waves = max(1.0, tiles / (num_cores * per_sm))
    compute = g.flops_per_element * m_tile * n_tile * k * waves * compute_w
    read = g.m * g.k * g.b * g.lhs_bits / 8 + g.n * g.k * g.b * g.rhs_bits / 8
    written = g.m * g.n * batch * (g.acc_bits if split > 1 else g.out_bits) / 8
    cost = max(compute, (read + written) * memory_w)
    if split == 1:
        return cost
    partials = batch * g.m * g.n * g.acc_bits / 8 + g.b * g.m * g.n * g.out_bits / 8
    return cost + launch + partials * reduction_w


def choose_split_k(g: DotDimensions, num_cores: int,
                   compute_capability: tuple[int, int] = (9, 0)) -> int:
    """XLA's ChooseSplitK: the cheapest candidate (the first of equals)."""
    weights = cost_weights(compute_capability)
    costs = [split_cost(g, s, num_cores, weights) for s in CANDIDATES]
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
        acc_bits=acc.byte_size * 8, out_bits=dot.shape.element_type.bits,
        flops_per_element=_ALGORITHM_FLOPS.get(str(dot.attrs.get("algorithm", "")).lower(), 2))


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
    # the split dot's layout is the descending one shape inference gives (XLA's MakeDotHlo); the
    # reduce after it takes the original dot's layout
    new = comp.add_new_instruction("dot", [lhs, rhs], Shape.array(accumulator, out_dims), attrs, name="dot")
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
        split = choose_split_k(dot_dimensions(dot), self.device.core_count, self.device.compute_capability)
        if split == 1:
            return False
        dot.parent.replace_instruction(dot, split_dot(dot, split, accumulator_type(dot)))
        return True


__all__ = ["DotDimensions", "SplitkRewriter", "choose_split_k", "dot_dimensions", "split_cost"]
