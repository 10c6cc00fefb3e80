"""The in-place dynamic-update-slice emitter and the concatenate emitter (XLA's
InPlaceDynamicUpdateSliceFusion and ConcatenateFusion): kernels that write only what changes,
or each operand's part of the output once.

Where it sits: emitters/__init__.py picks them by hero (section c of the XLA facts):

- `InPlaceDynamicUpdateSliceFusion`, for fusions whose roots are all (bitcasts of)
  dynamic-update-slices. When every DUS updates a fusion parameter that shares its buffer with
  the DUS's output (the `argument_ids` contract gives them one kernel parameter), that buffer
  already holds the operand: one thread per update element stores
  `out[clamped start + u] = update[u]` and nothing else is touched, with XLA's loop config over
  the update shape (FusionAnalysis's launch, its unroll factor; the unrolled loop reads the
  update as vectors where contiguous). The parameter must have no
  other reader in the fusion (a read of a position another thread updates would race), and all
  updates must have the same shape (one launch covers them). Otherwise it hands the fusion to
  the loop emitter, which computes every output element (correct with or without aliasing).
- `ConcatenateFusion`, for a single root whose hero is a concatenate of at most 4 operands:
  one loop per operand over the operand's own shape with XLA's loop config computed on the
  largest operand (FusionAnalysis's launch and unroll factor; unrolled loops vectorize where
  contiguous), the root's unary epilogue applied to the operand's value, stored at the shifted
  position. No per-element "which operand" test, unlike the loop emitter's elemental
  concatenate. Sub-byte outputs stay here when each byte is written by one thread.

`dus_argument_ids(fusion)` gives the argument ids XLA's buffer assignment would (each DUS
output sharing its parameter's buffer) to tools that emit a fusion without a buffer assignment.
"""

from __future__ import annotations

from typing import Hashable, Sequence

from hlo_codegen.emitters.base import EmitterError, KernelParams, find_hero, fusion_roots, output_shapes
from hlo_codegen.emitters.common import (
    FusedValues, SimpleEmitter, ThreadIds, emit_epilogue, epilogue_nodes, linear_index, packing, root_outputs,
)
from hlo_codegen.emitters.launch import H100, GpuDeviceInfo
from hlo_codegen.emitters.loop import LoopFusion, loop_over_shape_unrolled
from hlo_codegen.indexing import LaunchDimensions
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Kernel, Value
from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
from hlo_common.gpu.launch_dimensions import loop_launch, split_grid_x
from hlo_common.gpu.ir_emission_utils import is_dus_root  # noqa: F401  (re-exported)
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise

MAX_CONCATENATE_OPERANDS = 4


def has_packed_output(fusion: HloInstruction) -> bool:
    return any(packing(s) > 1 for _, s in fusion.shape.leaf_shapes())


def strip_bitcasts(instr: HloInstruction) -> HloInstruction:
    while instr.opcode == "bitcast":
        instr = instr.operands[0]
    return instr


class InPlaceDynamicUpdateSliceFusion(SimpleEmitter):
    """See the module docstring."""

    kind = "loop"
    vectorize = True

    def __init__(self, fusion: HloInstruction, device: GpuDeviceInfo = H100):
        super().__init__(fusion, device)
        self.dus = [strip_bitcasts(r) for r in fusion_roots(fusion)]
        if not all(d.opcode == "dynamic-update-slice" for d in self.dus):
            raise EmitterError(f"%{fusion.name}: not every root is a dynamic-update-slice")
        self.update_shape = self.dus[0].operands[1].shape
        self.unroll, self._launch = analysis_loop_config(fusion, device, self.update_shape)

    def launch_dimensions(self) -> LaunchDimensions:
        return self._launch

    def can_emit_in_place(self, argument_ids: Sequence[Hashable] | None) -> bool:
        """Every DUS updates, in place, a parameter nothing else in the fusion reads."""
        if argument_ids is None:
            return False
        ids = list(argument_ids)
        n_ops = len(self.fusion.operands)
        for k, dus in enumerate(self.dus):
            if dus.operands[1].shape.dims != self.update_shape.dims:
                return False
            node = dus.operands[0]
            while node.opcode == "bitcast" and len(node.users) == 1:
                node = node.operands[0]
            if node.opcode != "parameter" or len(node.users) != 1:
                return False
            if ids[node.parameter_number] != ids[n_ops + k]:
                return False
        return True

    def emit(self, argument_ids: Sequence[Hashable] | None = None) -> Kernel:
        if not self.can_emit_in_place(argument_ids) or has_packed_output(self.fusion):
            return LoopFusion(self.fusion, self.device).emit(argument_ids)
        return super().emit(argument_ids)

    def build(self, kernel: Kernel, params: KernelParams) -> None:
        wanted = [op for d in self.dus for op in d.operands[1:]]
        values = FusedValues(kernel, self.computation, params, wanted)
        b = IRBuilder(kernel)
        ids = ThreadIds(b, self._launch)

        def element(u: list[Value]) -> None:
            for dus, out in zip(self.dus, params.output_buffers):
                shape = dus.shape
                target = []
                for d in range(shape.rank):
                    raw = values.at(b, dus.operands[2 + d], [])[0]
                    signed = dus.operands[2 + d].shape.element_type.kind != "unsigned"
                    start = b.cast("index_cast" if signed else "index_castui", raw, "index")
                    start = b.binary("minsi", b.binary("maxsi", start, b.index(0)),
                                     b.index(max(shape.dims[d] - self.update_shape.dims[d], 0)))
                    target.append(b.binary("addi", start, u[d]))
                v = values.at(b, dus.operands[1], u)[0]
                b.store(out, v, linear_index(b, shape, target))

        loop_over_shape_unrolled(b, ids, self._launch, self.update_shape, self.unroll, element)


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


def dus_argument_ids(fusion: HloInstruction) -> list[int]:
    """Kernel argument ids (the fusion's operands, then its outputs) as XLA's buffer assignment
    gives an in-place DUS fusion: each DUS output shares the buffer of the parameter it
    updates; every other argument its own. For tools that emit a fusion without a buffer
    assignment (the launch-dimension and emitter-structure comparisons with XLA)."""
    n = len(fusion.operands)
    ids = list(range(n + len(output_shapes(fusion))))
    if FusionAnalysis.of_fusion(fusion).emitter_kind != "in_place_dynamic_update_slice":
        return ids
    for k, root in enumerate(fusion_roots(fusion)):
        node = strip_bitcasts(root).operands[0]
        while node.opcode == "bitcast":
            node = node.operands[0]
        if node.opcode == "parameter":
            ids[n + k] = ids[node.parameter_number]
    return ids


def concatenate_hero(root: HloInstruction) -> HloInstruction | None:
    """The concatenate a root is an elementwise epilogue of (`epilogue_nodes`): the hero
    analysis's, else the only concatenate reached through elementwise ops and bitcasts; None
    when there is none (or several)."""
    hero = find_hero(root)
    if hero.opcode == "concatenate" and epilogue_nodes(root, hero) is not None:
        return hero
    found, seen, work = [], {id(root)}, [root]
    while work:
        node = work.pop()
        if node.opcode == "concatenate":
            found.append(node)
            continue
        if node is root or is_elementwise(node.opcode) or node.opcode == "bitcast":
            for op in node.operands:
                if id(op) not in seen:
                    seen.add(id(op))
                    work.append(op)
    if len(found) == 1 and epilogue_nodes(root, found[0]) is not None:
        return found[0]
    return None


class ConcatenateFusion(SimpleEmitter):
    """See the module docstring."""

    kind = "loop"
    vectorize = True

    def __init__(self, fusion: HloInstruction, device: GpuDeviceInfo = H100):
        super().__init__(fusion, device)
        (self.root,) = fusion_roots(fusion)
        self.hero = concatenate_hero(self.root)
        # A root that is not an elementwise epilogue of a concatenate hero needs the elemental
        # concatenate; with sub-byte outputs, threads sharing a byte would race unless every
        # byte's elements come from one thread's unrolled elements (`_bytes_stay_in_threads`).
        self.fallback = None
        self.unroll = 1
        if self.hero is not None:  # XLA's loop config on the largest operand, one loop per operand
            largest = max((op.shape for op in self.hero.operands), key=lambda sh: sh.num_elements)
            self.unroll, self._launch = analysis_loop_config(fusion, device, largest)
        if self.hero is None or (has_packed_output(fusion) and not self._bytes_stay_in_threads()):
            self.fallback = LoopFusion(fusion, device)
            self._launch = self.fallback.launch_dimensions()

    def _bytes_stay_in_threads(self) -> bool:
        """Packed output: each thread's unrolled run of an operand (aligned to the unroll in the
        operand's layout order) lands on whole output bytes - the operands, their offsets and the
        output's rows along the concatenated dim hold whole bytes, and layouts agree."""
        hero, root = self.hero, self.root
        out = hero.shape
        per_byte = packing(out)
        if root.shape.dims != out.dims or root.shape.minor_to_major != out.minor_to_major or \
                self.unroll % per_byte:
            return False
        axis = int(hero.attrs["dimensions"][0])
        phys = list(out.minor_to_major)
        inner = 1
        for d in phys[:phys.index(axis)]:
            inner *= out.dims[d]
        offset = 0
        for op in hero.operands:
            if op.shape.minor_to_major != out.minor_to_major or (op.shape.dims[axis] * inner) % per_byte or \
                    (offset * inner) % per_byte:
                return False
            offset += op.shape.dims[axis]
        return True

    def launch_dimensions(self) -> LaunchDimensions:
        return self._launch

    def emit(self, argument_ids: Sequence[Hashable] | None = None) -> Kernel:
        if self.fallback is not None:
            return self.fallback.emit(argument_ids)
        return super().emit(argument_ids)

    def build(self, kernel: Kernel, params: KernelParams) -> None:
        hero, axis = self.hero, int(self.hero.attrs["dimensions"][0])
        values = FusedValues(kernel, self.computation, params, hero.operands)
        ((root, buffers, shapes),) = root_outputs(self.fusion, params.output_buffers)
        b = IRBuilder(kernel)
        ids = ThreadIds(b, self._launch)
        offset = 0
        for op in hero.operands:
            def element(idx: list[Value], op=op, offset=offset) -> None:
                v = values.at(b, op, idx)
                hero_idx = list(idx)
                if offset:
                    hero_idx[axis] = b.binary("addi", idx[axis], b.index(offset))
                out, out_idx = emit_epilogue(values.elemental, b, hero, root, v, hero_idx)
                b.store(buffers[0], out[0], linear_index(b, shapes[0], out_idx))

            loop_over_shape_unrolled(b, ids, self._launch, op.shape, self.unroll, element)
            offset += op.shape.dims[axis]


def is_concatenate_fusion(fusion: HloInstruction) -> bool:
    """XLA's kConcatenate rule: one non-tuple root whose hero is a concatenate of <= 4 operands."""
    roots = fusion_roots(fusion)
    if len(roots) != 1 or roots[0].shape.is_tuple:
        return False
    hero = find_hero(roots[0])
    return hero.opcode == "concatenate" and len(hero.operands) <= MAX_CONCATENATE_OPERANDS
