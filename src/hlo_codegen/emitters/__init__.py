"""Fusion emitters: one per hero kind, each turning a fusion into a kernel-IR `Kernel`.

Where it sits: hlo-codegen's thunk emission calls `emit_kernel(fusion, ...)` for every fusion
(a lone instruction is first wrapped into a kLoop fusion by the caller); the kernel then goes to
hlo_codegen.llvm (NVPTX or host) and ptx.py.

The contract every emitter keeps (XLA's `KernelFusionInterface` in kernel-IR terms):

- Input: a `fusion` instruction with its fused computation, a `GpuDeviceInfo` (launch.py;
  H100 by default) and optional `argument_ids`: one hashable per kernel argument (the fusion's
  operands in order, then its output leaves in order), e.g. the buffer slice each one uses.
  Arguments with equal ids become ONE kernel parameter (first occurrence decides its position
  and name; it is marked written if any output uses it) - in-place ops rely on this.
- Output: a verified, optimized `Kernel` (hlo_codegen.kernel_ir):
  * `name`: XLA style, says what it does: the fusion's sanitized name, or
    `<kind>_<root opcodes>_fusion` for generic names (`loop_add_exp_fusion`);
  * `grid` / `block`: launch dimensions (x, y, z);
  * `buffers`: parameters `arg0, arg1, ...` (kind "param"): flat 1-D buffers of the element
    type in physical (layout) order, `written` when the kernel stores to them, `packed` for
    sub-byte types with an E(n) layout; shared-memory arrays (kind "shared", static, their
    total is `kernel.shared_memory_bytes`); constant globals (kind "global");
  * `functions`: subgraph functions (partitioner.py) and scalar computations (reducers);
  * `body`: thread loops over indexing maps, scalar arithmetic, loads/stores (vector ones when
    the index is contiguous and aligned in the unroll index), calls, and - only directly in
    the body - `sync_threads` / `shuffle_reduce` (the host lowering splits phases there).
- Launch: `launch_dimensions()` gives what the thunk launches with; kernels must not depend on
  the block count being exact (they bounds-check through their indexing maps).

Emitter selection (`emitter_kind`) is hlo_common.gpu.hlo_fusion_analysis's `FusionAnalysis`
(XLA's HloFusionAnalysis, shared with hlo-opt's cost model): a real reduction hero ->
"reduction"; consistent tiled transposes -> "transpose" (transpose.py: 32x33 shared-memory tiles,
or the packed variant for narrow types); several roots -> "loop", or
"in_place_dynamic_update_slice" when all roots are (bitcasts of) dynamic-update-slices (which
hands the fusion to the loop emitter unless the output aliases the updated parameter); a scatter
root -> "scatter"; a sort root -> "sort"; one root whose hero is a concatenate of at most 4
operands -> "concatenate"; everything else -> "loop". A kCustom fusion of backend kind "__norm"
(hlo-opt's normalization-fusion) -> "normalization": softmax / layernorm / RMSNorm in one kernel
(normalization.py).
Importing this package also registers the elemental rules of the windowed, dot-like and topk
ops (elemental_window/linalg/dots/topk.py), so the loop emitter emits them too. `EMITTERS` maps
kinds to emitter classes; a kind without one raises `EmitterError("no emitter for ...")`. To add
an emitter: subclass `KernelEmitter` (base.py), build the body with `IRBuilder` +
`ElementalEmitter` (elemental/) as loop.py does, register it in `EMITTERS`, and extend
`emitter_kind` if the kind is new.
"""

from __future__ import annotations

from typing import Hashable, Sequence

from hlo_codegen.emitters.base import (
    EmitterError, KernelEmitter, fusion_roots, kernel_name, wrap_computation_in_fusion,
)
from hlo_codegen.emitters.launch import A100, H100, GpuDeviceInfo, loop_launch_dimensions
from hlo_codegen.emitters.loop import LoopFusion
from hlo_codegen.emitters.transpose import TransposeFusion
from hlo_codegen.emitters import (  # noqa: F401  (they register elemental rules)
    elemental_dots, elemental_linalg, elemental_topk, elemental_window,
)
from hlo_codegen.emitters.concatenate import ConcatenateFusion
from hlo_codegen.emitters.in_place_dus import InPlaceDynamicUpdateSliceFusion
from hlo_codegen.emitters.normalization import NormalizationFusion
from hlo_codegen.emitters.reduction import ReductionFusion
from hlo_codegen.emitters.scatter import ScatterFusion
from hlo_codegen.emitters.sort import SortFusion
from hlo_codegen.kernel_ir.ir import Kernel
from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
from hlo_common.gpu.hlo_traversal import FusionAdaptor
from hlo_common.hlo.ir import HloInstruction

EMITTERS: dict[str, type[KernelEmitter]] = {"loop": LoopFusion, "reduction": ReductionFusion,
                                         "scatter": ScatterFusion, "sort": SortFusion,
                                         "concatenate": ConcatenateFusion,
                                         "in_place_dynamic_update_slice": InPlaceDynamicUpdateSliceFusion,
                                         "normalization": NormalizationFusion, "transpose": TransposeFusion}


def emitter_kind(fusion: HloInstruction, device: GpuDeviceInfo = H100) -> tuple[str, HloInstruction]:
    """(kind, hero) of a fusion, from hlo_common's FusionAnalysis (XLA's GetEmitterFusionKind)."""
    analysis = FusionAnalysis.of_fusion(fusion, device)
    if analysis.emitter_kind == "custom":  # Triton / cuDNN / custom fusions: emitted as ours
        analysis = FusionAnalysis(FusionAdaptor.for_instruction(fusion), device)
    kind = analysis.emitter_kind
    if kind == "normalization":  # hlo-opt's normalization-fusion (emitters/normalization.py)
        return kind, analysis.roots[0]
    if kind == "reduction":
        return kind, analysis.reduction_hero
    if kind in ("scatter", "sort", "in_place_dynamic_update_slice") or len(analysis.roots) > 1:
        return kind, analysis.roots[0]
    return kind, analysis.heroes[0]


def in_place_argument_ids(fusion: HloInstruction) -> list[int]:
    """Kernel argument ids (operands, then outputs) as XLA's buffer assignment gives an in-place
    fusion: a scatter's outputs share its operands' buffers, a DUS's output the updated parameter's;
    every other argument its own. For tools that emit a fusion without a buffer assignment (the
    launch-dimension, emitter-structure and ptxas comparisons with XLA)."""
    from hlo_codegen.emitters.in_place_dus import dus_argument_ids
    from hlo_codegen.emitters.scatter import scatter_argument_ids

    ids = scatter_argument_ids(fusion)
    return ids if ids is not None else dus_argument_ids(fusion)


def get_fusion_emitter(fusion: HloInstruction, device: GpuDeviceInfo = H100) -> KernelEmitter:
    """The emitter object for `fusion` (XLA's GetFusionEmitter); raises EmitterError if none."""
    if fusion.opcode != "fusion":
        raise EmitterError(f"%{fusion.name} is a {fusion.opcode}, not a fusion (wrap it first)")
    kind, hero = emitter_kind(fusion, device)
    cls = EMITTERS.get(kind)
    if cls is None:
        raise EmitterError(
            f"no emitter for {kind} fusion %{fusion.name} (hero %{hero.name}, {hero.opcode})")
    return cls(fusion, device)


def emit_kernel(fusion: HloInstruction, device: GpuDeviceInfo = H100,
                argument_ids: Sequence[Hashable] | None = None) -> Kernel:
    """The kernel for `fusion` from the emitter its hero selects (see the contract above)."""
    return get_fusion_emitter(fusion, device).emit(argument_ids)


__all__ = [
    "EMITTERS", "EmitterError", "GpuDeviceInfo", "H100", "A100", "KernelEmitter", "LoopFusion",
    "emit_kernel", "emitter_kind", "fusion_roots", "get_fusion_emitter", "kernel_name",
    "loop_launch_dimensions", "wrap_computation_in_fusion",
]
