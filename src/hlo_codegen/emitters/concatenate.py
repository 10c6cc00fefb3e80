"""The concatenate emitter (XLA's ConcatenateFusion): each operand's part of the output written
once.

Where it sits: emitters/__init__.py picks it for a single root whose hero is a concatenate of at
most 4 operands (section c of the XLA facts): one loop per operand over the operand's own shape
with XLA's loop config computed on the largest operand (FusionAnalysis's launch and unroll
factor; unrolled loops vectorize where contiguous), the root's unary epilogue applied to the
operand's value, stored at the shifted position. No per-element "which operand" test, unlike the
loop emitter's elemental concatenate. Sub-byte outputs stay here when each byte is written by
one thread; otherwise, and for a root that is no elementwise epilogue of a concatenate, it hands
the fusion to the loop emitter.
"""

from __future__ import annotations

from typing import Hashable, Sequence

from hlo_codegen.emitters.base import KernelParams, find_hero, fusion_roots
from hlo_codegen.emitters.common import (
    FusedValues, SimpleEmitter, ThreadIds, emit_epilogue, epilogue_nodes, has_packed_output, linear_index,
    packing, root_outputs,
)
from hlo_codegen.emitters.launch import H100, GpuDeviceInfo, analysis_loop_config
from hlo_codegen.emitters.loop import LoopFusion, loop_over_shape_unrolled
from hlo_codegen.indexing import LaunchDimensions
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Kernel, Value
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise


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
