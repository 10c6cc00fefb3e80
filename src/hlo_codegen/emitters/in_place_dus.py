"""The in-place dynamic-update-slice emitter (XLA's InPlaceDynamicUpdateSliceFusion): a kernel
that writes only what changes.

Where it sits: emitters/__init__.py picks it for fusions whose roots are all (bitcasts of)
dynamic-update-slices (section c of the XLA facts). When every DUS updates a fusion parameter
that shares its buffer with the DUS's output (the `argument_ids` contract gives them one kernel
parameter), that buffer already holds the operand: one thread per update element stores
`out[clamped start + u] = update[u]` and nothing else is touched, with XLA's loop config over
the update shape (FusionAnalysis's launch, its unroll factor; the unrolled loop reads the
update as vectors where contiguous). The parameter must have no other reader in the fusion (a
read of a position another thread updates would race), and all updates must have the same
shape (one launch covers them). Otherwise it hands the fusion to the loop emitter, which
computes every output element (correct with or without aliasing).

`dus_argument_ids(fusion)` gives the argument ids XLA's buffer assignment would (each DUS
output sharing its parameter's buffer) to tools that emit a fusion without a buffer assignment.
"""

from __future__ import annotations

from typing import Hashable, Sequence

from hlo_codegen.emitters.base import EmitterError, KernelParams, fusion_roots, output_shapes
from hlo_codegen.emitters.common import FusedValues, SimpleEmitter, ThreadIds, has_packed_output, linear_index
from hlo_codegen.emitters.launch import H100, GpuDeviceInfo, analysis_loop_config
from hlo_codegen.emitters.loop import LoopFusion, loop_over_shape_unrolled
from hlo_codegen.indexing import LaunchDimensions
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Kernel, Value
from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
from hlo_common.gpu.ir_emission_utils import strip_bitcasts
from hlo_common.hlo.ir import HloInstruction


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


