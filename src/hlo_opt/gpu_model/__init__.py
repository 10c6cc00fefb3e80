"""XLA:GPU's cost model: op profiles, GPU cost analysis, coalescing analysis and
the analytical performance model, for hlo-opt's priority and multi-output fusion.

Where it sits: `GpuPerformanceModel(device)` is made once per pass run; it uses
`hlo_common.gpu` for launch dimensions and heroes. See the submodules for the rules:
`op_profiles` (per-op cycle costs, sm_90 / sm_80), `cost_analysis` (GpuHloCostAnalysis),
`coalescing` (simplified CoalescingAnalysis), `performance_model` (GpuPerformanceModel).
"""

from hlo_opt.gpu_model.coalescing import coalesced_inputs, transposes_minor_dimension
from hlo_opt.gpu_model.cost_analysis import MAX_IR_SIZE, GpuHloCostAnalysis, InstrCost, shape_bytes
from hlo_opt.gpu_model.op_profiles import DEFAULT_FLOPS_PER_ELEMENT, flops_per_element, profile_for
from hlo_opt.gpu_model.performance_model import (
    KERNEL_LAUNCH_OVERHEAD, L1_CACHE_SPEEDUP, L2_CACHE_SPEEDUP, MEMORY_COMPUTE_PARALLELISM,
    NCCL_KERNEL_LAUNCH_OVERHEAD, EstimateRunTimeData, GpuPerformanceModel, RunTimes,
)

__all__ = [
    "DEFAULT_FLOPS_PER_ELEMENT", "KERNEL_LAUNCH_OVERHEAD", "L1_CACHE_SPEEDUP", "L2_CACHE_SPEEDUP",
    "MAX_IR_SIZE", "MEMORY_COMPUTE_PARALLELISM", "NCCL_KERNEL_LAUNCH_OVERHEAD", "EstimateRunTimeData",
    "GpuHloCostAnalysis", "GpuPerformanceModel", "InstrCost", "RunTimes", "coalesced_inputs",
    "flops_per_element", "profile_for", "shape_bytes", "transposes_minor_dimension",
]
