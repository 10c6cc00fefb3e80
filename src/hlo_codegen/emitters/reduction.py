"""The reduction emitter, simple form: one thread per output element of every root.

Where it sits: chosen by emitters/__init__.py for fusions with a "real reduction hero" (XLA's
kReduction). XLA emits row/column/multi-row reductions with warp shuffles and shared memory;
this correct, deterministic version is what the codegen issue asks for before those exist:

- every fusion root is a subgraph root of its own (so a reduce root, an epilogue of one, and
  side outputs of the reduce's input shape each have one function of their own index);
- roots with the same dimensions share one thread loop over their shape; a loop with fewer
  elements than the launch skips the extra threads (bounds-checked indexing map);
- a reduce is emitted elementally: its thread loops over the reduced elements in row-major
  order, calling the reducer (variadic reducers and any reducer computation included), exactly
  as the loop emitter does for a reduce that is not a hero.

    reduce(f32[1024,4096] p, 0), dimensions={1}   ->  1024 threads, each summing 4096 elements

Integers come out exact; floats within rounding of the interpreter's (pairwise or f64) sums.
A later "fast emitters" issue replaces this by XLA's row/column reduction emitters.
"""

from __future__ import annotations

from hlo_codegen.emitters.base import KernelParams, output_shapes
from hlo_codegen.emitters.common import FusedValues, SimpleEmitter, ThreadIds, elementwise_launch, \
    linear_index, loop_over_shape, root_outputs
from hlo_codegen.emitters.launch import H100, GpuDeviceInfo
from hlo_codegen.indexing import LaunchDimensions
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Kernel
from hlo_common.ir import HloInstruction


class ReductionFusion(SimpleEmitter):
    """Reduction fusions (and any multi-output fusion whose roots differ in shape)."""

    kind = "reduction"

    def __init__(self, fusion: HloInstruction, device: GpuDeviceInfo = H100):
        super().__init__(fusion, device)
        self.roots = []
        groups: dict[tuple[int, ...], list] = {}
        for root, _, shapes in root_outputs(fusion, [""] * len(output_shapes(fusion))):
            index_shape = shapes[0]
            groups.setdefault(tuple(index_shape.dims), []).append(root)
        self.groups = groups
        largest = max((s.num_elements for s in output_shapes(fusion)), default=1)
        self._launch = elementwise_launch(largest, self.device)

    def launch_dimensions(self) -> LaunchDimensions:
        return self._launch

    def build(self, kernel: Kernel, params: KernelParams) -> None:
        outputs = root_outputs(self.fusion, params.output_buffers)
        values = FusedValues(kernel, self.computation, params, [r for r, _, _ in outputs])
        b = IRBuilder(kernel)
        ids = ThreadIds(b, self._launch)
        for members in self.groups.values():
            group = [o for o in outputs if any(o[0] is r for r in members)]
            index_shape = group[0][2][0]

            def store(idx, group=group):
                for root, buffers, shapes in group:
                    for v, name, shape in zip(values.at(b, root, idx), buffers, shapes):
                        b.store(name, v, linear_index(b, shape, idx))

            loop_over_shape(b, ids, self._launch, index_shape, store)
