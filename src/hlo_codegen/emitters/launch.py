"""Launch dimensions and the loop-fusion unroll factor, with XLA's rules and numbers.

Where it sits: the loop emitter (loop.py) and the other emitters size their grids here; the rules
live in hlo_common.gpu.launch_dimensions (the GPU cost model needs them too), this module adapts them
to kernel-IR `LaunchDimensions`. From
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

from hlo_codegen.indexing import LaunchDimensions
from hlo_common.gpu.device import A100, H100, DeviceDescription
from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
from hlo_common.gpu.launch_dimensions import (  # noqa: F401  (re-exported for the emitters)
    MAX_CONCAT_OPERANDS_FOR_UNROLLING, MAX_REDUCE_WINDOW_FOR_UNROLLING, MAX_UNROLL, WARP_SCHEDULERS,
    loop_launch, loop_unroll_factor, max_unroll_factor, smallest_bit_width, split_grid_x,
)
from hlo_common.hlo.ir import HloComputation, HloInstruction

# The emitters' device type is hlo_common's DeviceDescription (XLA's se::DeviceDescription).
GpuDeviceInfo = DeviceDescription


def may_prevent_vectorization(computation: HloComputation) -> bool:
    """Ops that make unrolled loop fusions spill or serialize (XLA's MayPreventVectorization)."""
    from hlo_common.gpu.launch_dimensions import may_prevent_vectorization as check

    return check(computation.instructions)


def loop_fusion_unroll_factor(num_elements: int, computation: HloComputation, roots: list[HloInstruction],
                              device: DeviceDescription = H100) -> int:
    """XLA's ComputeLoopFusionConfig unroll factor for a loop fusion."""
    return loop_unroll_factor(num_elements, computation.instructions, [r.shape for r in roots], device)


def loop_launch_dimensions(num_elements: int, unroll: int, device: DeviceDescription = H100) -> LaunchDimensions:
    """Threads and blocks of a loop over `num_elements` elements, `unroll` per thread."""
    blocks, threads = loop_launch(num_elements, unroll, device)
    x, y = split_grid_x(blocks, device)
    return LaunchDimensions((threads, 1, 1), (x, y, 1))


def analysis_loop_config(fusion: HloInstruction, device: GpuDeviceInfo,
                         shape) -> tuple[int, LaunchDimensions]:
    """(unroll factor, launch) of XLA's loop config over `shape` for this fusion: the launch is
    FusionAnalysis's (the figures the cost model uses and XLA's thunks show), the unroll its
    ComputeLoopFusionConfig factor on `shape`."""
    analysis = FusionAnalysis.of_fusion(fusion, device)
    blocks, threads = analysis.launch_dimensions()
    unroll = analysis.loop_unroll_factor(shape)
    if blocks * threads * unroll < shape.num_elements:  # the analysis sized another loop
        blocks, threads = loop_launch(shape.num_elements, unroll, device)
    bx, by = split_grid_x(blocks, device)
    return unroll, LaunchDimensions((threads, 1, 1), (bx, by, 1))


__all__ = ["A100", "H100", "GpuDeviceInfo", "analysis_loop_config", "loop_fusion_unroll_factor",
           "loop_launch_dimensions", "max_unroll_factor", "may_prevent_vectorization", "smallest_bit_width", "split_grid_x"]
