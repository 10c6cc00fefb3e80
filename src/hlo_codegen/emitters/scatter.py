"""The scatter emitter, simple form (XLA's kScatter fusions): deterministic, in the interpreter's
order, no atomics.

Where it sits: chosen by emitters/__init__.py for fusions whose root is a (possibly variadic)
scatter. XLA's ScatterFusion runs one thread per update slice with atomic read-modify-writes
into an output that already holds the operand (buffer assignment makes it alias the operand).
Here:

1. init - unless output k shares its buffer with the fusion parameter that is scatter operand
   k (argument ids equal, so the kernel got one pointer), the operand (any fused expression) is
   written into the output. The whole kernel is then one block (a block barrier orders the
   init before the updates); init threads walk the output in physical order, a whole byte of
   elements each for packed sub-byte outputs.
2. updates - every update element, its window start read from the indices (any
   index_vector_dim, batching dims), applied only when the whole window lies inside the
   operand: `out = combiner(out..., update...)`.
   * duplicates possible (the default): one thread applies all updates in order - scatter
     positions row-major, then window positions row-major - which is exactly the order in which
     the interpreter combines duplicates;
   * `unique_indices=true` (and no packed output): one update element per thread.

A later "fast emitters" issue replaces the sequential path with XLA's atomic / sorted-indices
variants (and their nondeterminism for floats).
"""

from __future__ import annotations

from typing import Hashable, Sequence

from hlo_codegen.elemental.emitter import value_type
from hlo_codegen.emitters.base import EmitterError, KernelParams, fusion_roots
from hlo_codegen.emitters.common import (
    FusedValues, SimpleEmitter, ThreadIds, aliased_parameter, delinearize_values, elementwise_launch,
    linear_index, loop_over_shape, packing, sequential_loop, strided_loop,
)
from hlo_codegen.emitters.launch import H100, GpuDeviceInfo
from hlo_codegen.indexing import IndexingMap, LaunchDimensions, Variable, compose_indexing_maps, dim, sym
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.shape_indexing import delinearize, physical_dims, physical_to_logical
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Kernel, Value
from hlo_common.ir import HloInstruction
from hlo_common.shape import Shape

INIT_THREADS = 256


def _ints(instr: HloInstruction, key: str) -> list[int]:
    return [int(v) for v in (instr.attrs.get(key) or ())]


def linear_to_logical(shape: Shape) -> IndexingMap:
    """(buffer offset) -> logical index of `shape`."""
    phys = physical_dims(shape)
    total = max(shape.num_elements, 1)
    m = IndexingMap(delinearize(phys, dim(0)), [Variable(Interval(0, total - 1))])
    return compose_indexing_maps(m, physical_to_logical(shape)).simplify()


class ScatterFusion(SimpleEmitter):
    """See the module docstring."""

    kind = "scatter"

    def __init__(self, fusion: HloInstruction, device: GpuDeviceInfo = H100):
        super().__init__(fusion, device)
        self.scatter = fusion_roots(fusion)[0]
        if self.scatter.opcode != "scatter":
            raise EmitterError(f"%{fusion.name}: the scatter emitter needs a scatter root")
        self.n = (len(self.scatter.operands) - 1) // 2
        self.out_shape = self.scatter.operands[0].shape
        self.upd_shape = self.scatter.operands[self.n + 1].shape
        packed = packing(self.out_shape) > 1
        self.parallel = self.scatter.attrs.get("unique_indices") is True and not packed
        self.per_thread = 8 // self.out_shape.element_type.bits if packed else 1
        self.needs_init = True
        self._launch = self._choose_launch()

    def _choose_launch(self) -> LaunchDimensions:
        if self.needs_init:
            groups = -(-self.out_shape.num_elements // self.per_thread)
            work = max(groups, self.upd_shape.num_elements if self.parallel else 1)
            threads = max(1, min(INIT_THREADS, -(-work // 32) * 32 if work > 1 else 1))
            return LaunchDimensions((threads, 1, 1), (1, 1, 1))
        if self.parallel:
            return elementwise_launch(self.upd_shape.num_elements, self.device)
        return LaunchDimensions((1, 1, 1), (1, 1, 1))

    def launch_dimensions(self) -> LaunchDimensions:
        return self._launch

    def emit(self, argument_ids: Sequence[Hashable] | None = None) -> Kernel:
        ids = list(argument_ids) if argument_ids is not None else None
        n_ops = len(self.fusion.operands)
        aliased = []
        for k in range(self.n):
            op = self.scatter.operands[k]
            aliased.append(ids is not None and op.opcode == "parameter"
                           and ids[op.parameter_number] == ids[n_ops + k])
        self.needs_init = not all(aliased)
        self._launch = self._choose_launch()
        return super().emit(argument_ids)

    # -- the kernel ---------------------------------------------------------------------------------
    def build(self, kernel: Kernel, params: KernelParams) -> None:
        scatter, outputs = self.scatter, params.output_buffers
        values = FusedValues(kernel, self.computation, params, scatter.operands)
        b = IRBuilder(kernel)
        ids = ThreadIds(b, self._launch)
        for k in range(self.n):
            op = scatter.operands[k]
            if aliased_parameter(params, op, outputs[k]) and len(op.users) > 1:
                raise EmitterError(f"%{self.fusion.name}: scatter operand %{op.name} shares the output "
                                   "buffer but is also read elsewhere in the fusion")
        if self.needs_init:
            self._emit_init(b, ids, values, params)
            b.sync_threads()
        if not self.parallel:
            first = b.cmpi("eq", ids[0], b.index(0)) if self.needs_init else None
            dims = list(self.upd_shape.dims)
            order = self._update_scatter_dims() + _ints(scatter, "update_window_dims")

            def run_all():
                def step(syms, _):
                    idx = [None] * len(dims)
                    for pos, d in enumerate(order):
                        idx[d] = syms[pos]
                    self._apply_update(b, values, outputs, idx)
                    return []
                sequential_loop(b, [dims[d] for d in order], [], step)
                return []

            if first is None:
                run_all()
            else:
                b.if_(first, [], run_all)
        elif self.needs_init:
            total = self.upd_shape.num_elements
            strided_loop(b, ids[0], self._launch.threads_xyz()[0], total, lambda i: self._apply_update(
                b, values, outputs, delinearize_values(b, i, list(self.upd_shape.dims))))
        else:
            loop_over_shape(b, ids, self._launch, self.upd_shape,
                            lambda idx: self._apply_update(b, values, outputs, idx))

    def _emit_init(self, b: IRBuilder, ids: ThreadIds, values: FusedValues, params: KernelParams) -> None:
        shape, per = self.out_shape, self.per_thread
        to_logical = linear_to_logical(shape)
        targets = [k for k in range(self.n)
                   if not aliased_parameter(params, self.scatter.operands[k], params.output_buffers[k])]
        total = shape.num_elements

        def element(linear: Value) -> None:
            idx = b.apply_indexing(to_logical, [linear]) if shape.rank else []
            for k in targets:
                v = values.at(b, self.scatter.operands[k], idx)[0]
                b.store(params.output_buffers[k], v, linear)

        def group(g: Value) -> None:
            if per == 1:
                element(g)
                return
            first = dim(0) * per + sym(0)
            inner = IndexingMap([first], [Variable(Interval(0, -(-total // per) - 1))],
                                [Variable(Interval(0, per - 1))], (), [(first, Interval(0, total - 1))])
            b.loop(inner, [g], [], lambda syms, idx, it: (element(idx[0]), [])[1])

        strided_loop(b, ids[0], self._launch.threads_xyz()[0], -(-total // per), group)

    def _update_scatter_dims(self) -> list[int]:
        window = _ints(self.scatter, "update_window_dims")
        return [d for d in range(self.upd_shape.rank) if d not in window]

    def _apply_update(self, b: IRBuilder, values: FusedValues, outputs: list[str],
                      upd_idx: list[Value]) -> None:
        """Apply update element `upd_idx` (if its window is in bounds)."""
        scatter, shape = self.scatter, self.out_shape
        indices = scatter.operands[self.n]
        ivd = int(scatter.attrs.get("index_vector_dim", indices.shape.rank))
        to_operand = _ints(scatter, "scatter_dims_to_operand_dims")
        inserted = _ints(scatter, "inserted_window_dims")
        batching = _ints(scatter, "input_batching_dims")
        idx_batching = _ints(scatter, "scatter_indices_batching_dims")
        upd_window = _ints(scatter, "update_window_dims")
        batch_in = [d for d in range(indices.shape.rank) if d != ivd]
        position = dict(zip(batch_in, (upd_idx[d] for d in self._update_scatter_dims())))
        window_dims = [d for d in range(shape.rank) if d not in inserted and d not in batching]
        signed = indices.shape.element_type.kind != "unsigned"
        ok, target = None, []
        for d in range(shape.rank):
            size, offset = 1, None
            if d in window_dims:
                w = upd_window[window_dims.index(d)]
                size, offset = self.upd_shape.dims[w], upd_idx[w]
            if d in to_operand:
                at = [position[k] if k != ivd else b.index(to_operand.index(d))
                      for k in range(indices.shape.rank)]
                raw = values.at(b, indices, at)[0]
                start = b.cast("index_cast" if signed else "index_castui", raw, "index")
            elif d in batching:
                start = position[idx_batching[batching.index(d)]]
            else:
                start = None
            if start is not None:
                inside = b.binary("andi", b.cmpi("sge", start, b.index(0)),
                                  b.cmpi("sle", start, b.index(shape.dims[d] - size)))
                ok = inside if ok is None else b.binary("andi", ok, inside)
                offset = start if offset is None else b.binary("addi", start, offset)
            target.append(offset if offset is not None else b.index(0))
        combiner = values.scalar_function(scatter.attrs["to_apply"])

        def apply() -> list[Value]:
            linear = linear_index(b, shape, target)
            t = value_type(shape)
            cur = [b.load(outputs[k], linear, value_type(scatter.operands[k].shape) if k else t)
                   for k in range(self.n)]
            upd = [values.at(b, scatter.operands[self.n + 1 + k], upd_idx)[0] for k in range(self.n)]
            for k, v in enumerate(b.call(combiner, cur + upd)):
                b.store(outputs[k], v, linear)
            return []

        if ok is None:
            apply()
        else:
            b.if_(ok, [], apply)
