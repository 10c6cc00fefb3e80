"""Launch dimensions of loop-like kernels and the loop unroll factor, with XLA's rules and numbers
(`xla/service/gpu/launch_dimensions.cc`: `CalculateLaunchDimensions`; `ComputeLoopFusionConfig`,
`MayPreventVectorization`), and the launch of hlo-opt's normalization fusions.

Where it sits: the fusion analysis (`hlo_fusion_analysis.FusionAnalysis.launch_dimensions`), so
the GPU cost model, and hlo-codegen's emitters size their grids here. The unroll factor and the
grid split depend on the device (SM count, threads per SM, grid limit), so callers pass the
`DeviceDescription` they compile for.
"""

from __future__ import annotations

import functools
import math

from hlo_common.gpu.device import DeviceDescription, H100
from hlo_common.gpu.ir_emission_utils import element_bit_width
from hlo_common.hlo.ir import HloInstruction

WARP_SCHEDULERS = 4                       # loop emitter: 4 warps = 128 threads per block
MAX_UNROLL = 4                            # ComputeMaxUnrollFactor
MAX_CONCAT_OPERANDS_FOR_UNROLLING = 10
MAX_REDUCE_WINDOW_FOR_UNROLLING = 8
NORMALIZATION_ELEMENTS_PER_THREAD = 8     # row elements each thread keeps in registers
NORMALIZATION_THREADS_PER_BLOCK = 128     # short rows: one warp per row, 4 rows per block


def normalization_row_dims(fusion_root: HloInstruction) -> tuple[int, ...] | None:
    """D, the dims of the full arrays of a normalization fusion: the operand of its first
    reduce over the minor dimension (None if there is none)."""
    stack, seen = [fusion_root], {id(fusion_root)}
    while stack:
        node = stack.pop()
        if node.opcode == "reduce" and node.operands[0].shape.is_array:
            return tuple(node.operands[0].shape.dims)
        for op in node.operands:
            if id(op) not in seen:
                seen.add(id(op))
                stack.append(op)
    return None


def normalization_launch(dims: tuple[int, ...], device: DeviceDescription = H100) -> tuple[int, int, int]:
    """(threads per row, rows per block, blocks) of a normalization fusion over rows of
    n = dims[-1] elements: a power of two of threads per row, at least a warp and at most 1024,
    so that each keeps <= 8 elements of the row (n <= 8192); rows of at most one warp's work
    share a block of 128 threads, one warp each."""
    n = max(dims[-1], 1) if dims else 1
    rows = math.prod(dims[:-1]) if dims else 1
    warp = device.threads_per_warp
    want = -(-n // NORMALIZATION_ELEMENTS_PER_THREAD)
    threads = warp
    while threads < want and threads < 1024:
        threads *= 2
    per_block = max(1, NORMALIZATION_THREADS_PER_BLOCK // threads)
    return threads, per_block, max(1, -(-rows // per_block))


# -- loop launch (launch_dimensions.cc, ComputeLoopFusionConfig) -----------------------------------
def max_unroll_factor(num_elements: int) -> int:
    """The largest power of two <= 4 dividing `num_elements` (ComputeMaxUnrollFactor)."""
    k = MAX_UNROLL
    while k > 1:
        if num_elements % k == 0:
            return k
        k //= 2
    return 1


def _prevents_vectorization(instr: HloInstruction) -> bool:
    op = instr.opcode
    if op in ("dot", "sort"):
        return True
    if op == "concatenate" and len(instr.operands) > MAX_CONCAT_OPERANDS_FOR_UNROLLING:
        return True
    if op == "reduce" and instr.shape.is_tuple:
        return True
    if op == "reduce-window":
        window = instr.attrs.get("window")
        size = math.prod(d.size for d in window.dims) if window is not None else 1
        return size > MAX_REDUCE_WINDOW_FOR_UNROLLING
    return False


# the opcodes `_prevents_vectorization` can answer yes for, and nested fusions
VECTORIZATION_OPCODES = ("dot", "sort", "concatenate", "reduce", "reduce-window", "fusion")


def may_prevent_vectorization(nodes) -> bool:
    """Ops that make unrolled loops spill or serialize (XLA's MayPreventVectorization). Only the
    nodes of VECTORIZATION_OPCODES matter: callers with an opcode index pass just those."""
    for instr in nodes:
        if _prevents_vectorization(instr):
            return True
        if instr.opcode == "fusion":
            comp = instr.fused_computation()
            if may_prevent_vectorization(comp.with_opcode(*VECTORIZATION_OPCODES)):
                return True
    return False


def smallest_bit_width(shapes) -> int:
    bits = 1 << 30
    for shape in shapes:
        if shape.is_array:  # the usual case, answered without the cache's hashing
            b = element_bit_width(shape)
        else:
            b = _smallest_leaf_bits(shape)
        if b < bits:
            bits = b
    return bits


@functools.lru_cache(maxsize=4096)
def _smallest_leaf_bits(shape) -> int:
    bits = 1 << 30
    for _, leaf in shape.leaf_shapes():
        if leaf.is_array:
            bits = min(bits, element_bit_width(leaf))
    return bits


def loop_unroll_factor(num_elements: int, nodes, output_shapes, device: DeviceDescription = H100) -> int:
    """XLA's ComputeLoopFusionConfig unroll factor."""
    unroll = 1
    if num_elements >= device.threads_per_core_limit * device.core_count \
            and not may_prevent_vectorization(nodes):
        unroll = max_unroll_factor(num_elements)
    return max(unroll, -(-8 // smallest_bit_width(output_shapes)))


def split_grid_x(num_blocks: int, device: DeviceDescription = H100) -> tuple[int, int]:
    """(x, y) with x * y >= num_blocks and x within the grid limit (y a power of two)."""
    limit = device.block_dim_limit[0]
    y = 1
    while -(-num_blocks // y) > limit:
        y *= 2
    return -(-num_blocks // y), y


def loop_launch(num_elements: int, unroll: int, device: DeviceDescription = H100) -> tuple[int, int]:
    """(blocks, threads per block) of a loop over `num_elements`, `unroll` per thread."""
    if num_elements <= 1:
        return 1, 1
    n = -(-num_elements // unroll)
    threads = min(device.threads_per_warp * WARP_SCHEDULERS, n)
    return -(-n // threads), threads


__all__ = [
    "MAX_CONCAT_OPERANDS_FOR_UNROLLING", "MAX_REDUCE_WINDOW_FOR_UNROLLING", "MAX_UNROLL", "VECTORIZATION_OPCODES",
    "WARP_SCHEDULERS",
    "loop_launch", "loop_unroll_factor", "max_unroll_factor", "may_prevent_vectorization",
    "normalization_launch", "normalization_row_dims", "smallest_bit_width", "split_grid_x",
]
