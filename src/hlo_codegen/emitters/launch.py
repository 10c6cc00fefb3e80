"""Launch dimensions and the loop-fusion unroll factor, with XLA's rules and numbers.

Where it sits: the loop emitter (loop.py) and the other emitters size their grids here. From
`xla/service/gpu/launch_dimensions.cc` (`CalculateLaunchDimensions`), `gpu_fusible.cc`
(`ComputeLoopFusionConfig`) and the emitter base (`MaybeSplitGridDimensionX`):

- unroll = 1, unless the indexing shape has at least `threads_per_core_limit * core_count`
  elements (2048 * 132 = 270,336 on H100) and no op that prevents vectorization (dot, sort,
  concatenate with more than 10 operands, variadic reduce, reduce-window with a window of more
  than 8 elements); then the largest of 4, 2 dividing the element count. Always at least
  ceil(8 / smallest output bit width) (pred counts as 8), so sub-byte outputs are whole bytes.
- threads per block = min(32 * 4, ceil(elements / unroll)); blocks = ceil(.. / threads).
- a block count above the grid's x limit is split into x * y, y the smallest power of two that
  fits (the loop map then bounds-checks the extra blocks).

    >>> loop_launch_dimensions(24 * 2048 * 2048 * 3 * 4096, 4, H100)
    LaunchDimensions(threads=(128, 1, 1), blocks=(1207959552, 2, 1))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hlo_codegen.indexing import LaunchDimensions
from hlo_common.ir import HloComputation, HloInstruction

WARP_SCHEDULERS = 4
MAX_UNROLL = 4
MAX_CONCAT_OPERANDS_FOR_UNROLLING = 10
MAX_REDUCE_WINDOW_FOR_UNROLLING = 8


@dataclass(frozen=True)
class GpuDeviceInfo:
    """The device facts the emitters need (a subset of XLA's `se::DeviceDescription`)."""

    name: str = "NVIDIA H100 80GB HBM3"
    core_count: int = 132
    threads_per_core_limit: int = 2048
    threads_per_block_limit: int = 1024
    threads_per_warp: int = 32
    block_dim_limit: tuple[int, int, int] = (2147483647, 65535, 65535)
    shared_memory_per_block: int = 49152
    compute_capability: tuple[int, int] = (9, 0)

    @staticmethod
    def from_description(desc) -> GpuDeviceInfo:
        """From any object with XLA's field names (e.g. hlo_opt's DeviceDescription)."""
        base = GpuDeviceInfo()
        fields = {k: getattr(desc, k) for k in ("name", "core_count", "threads_per_core_limit",
                                                 "threads_per_block_limit", "threads_per_warp",
                                                 "shared_memory_per_block") if hasattr(desc, k)}
        if hasattr(desc, "compute_capability_major"):
            fields["compute_capability"] = (desc.compute_capability_major, desc.compute_capability_minor)
        return replace(base, **fields)

    @property
    def arch(self) -> str:
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"


H100 = GpuDeviceInfo()
A100 = replace(H100, name="NVIDIA A100-SXM4-80GB", core_count=108, compute_capability=(8, 0))


def max_unroll_factor(num_elements: int) -> int:
    """The largest power of two <= MAX_UNROLL dividing `num_elements` (XLA's ComputeMaxUnrollFactor)."""
    k = MAX_UNROLL
    while k > 1:
        if num_elements % k == 0:
            return k
        k //= 2
    return 1


def may_prevent_vectorization(computation: HloComputation) -> bool:
    """Ops that make unrolled loop fusions spill or serialize (XLA's MayPreventVectorization)."""
    for instr in computation.instructions:
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
            if size > MAX_REDUCE_WINDOW_FOR_UNROLLING:
                return True
        for called in instr.called_computations():
            if op == "fusion" and may_prevent_vectorization(called):
                return True
    return False


def smallest_bit_width(instrs: list[HloInstruction]) -> int:
    bits = 1 << 30
    for instr in instrs:
        for _, shape in instr.shape.leaf_shapes():
            if shape.is_array:
                et = shape.element_type
                bits = min(bits, 8 if et.is_pred else et.bits)
    return bits


def loop_fusion_unroll_factor(num_elements: int, computation: HloComputation, roots: list[HloInstruction],
                              device: GpuDeviceInfo = H100) -> int:
    """XLA's ComputeLoopFusionConfig unroll factor for a loop fusion."""
    unroll = 1
    if (num_elements >= device.threads_per_core_limit * device.core_count
            and not may_prevent_vectorization(computation)):
        unroll = max_unroll_factor(num_elements)
    return max(unroll, -(-8 // smallest_bit_width(roots)))


def split_grid_x(num_blocks: int, device: GpuDeviceInfo = H100) -> tuple[int, int]:
    """(x, y) with x * y >= num_blocks and x within the device's grid limit (y a power of two)."""
    limit = device.block_dim_limit[0]
    y = 1
    while -(-num_blocks // y) > limit:
        y *= 2
    return -(-num_blocks // y), y


def loop_launch_dimensions(num_elements: int, unroll: int, device: GpuDeviceInfo = H100) -> LaunchDimensions:
    """Threads and blocks of a loop over `num_elements` elements, `unroll` per thread."""
    if num_elements <= 1:
        return LaunchDimensions((1, 1, 1), (1, 1, 1))
    n = -(-num_elements // unroll)
    threads = min(device.threads_per_warp * WARP_SCHEDULERS, n)
    blocks = -(-n // threads)
    x, y = split_grid_x(blocks, device)
    return LaunchDimensions((threads, 1, 1), (x, y, 1))
