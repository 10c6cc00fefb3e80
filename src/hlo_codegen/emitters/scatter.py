"""The scatter emitter (XLA's kScatter fusions): one thread per update element, atomics where
indices may repeat.

Where it sits: chosen by emitters/__init__.py for fusions whose root is a (possibly variadic)
scatter. Like XLA's `ScatterWithDistributedUpdates`, the output is expected to hold the operand
already (buffer assignment makes output k alias scatter operand k, a fusion parameter; the
kernel then gets one pointer), and the update elements are spread over the threads with the
loop emitter's launch: `vector = gcd(window elements minor to every scatter dim, loop unroll)`
consecutive elements per thread, so all of a thread's elements share one update slice. A thread
reads its slice's start from the indices once, checks that the whole window lies inside the
operand (XLA's semantics: an out-of-bounds window is skipped; one unsigned `ule` per dimension
covers negative starts too), then for each of its elements combines the update into the output:

* `unique_indices=true` (and no packed output): load, combiner, store - no two threads meet;
* otherwise `atomic_rmw` with the combiner: a native `atomicrmw` where the combiner is one
  (add, integer min/max, and/or/xor, overwrite; llvm/memory.py), else a compare-and-swap loop.
  Integer add/min/max and the bit ops give the same result in any order (deterministic); float
  adds of duplicates land in whatever order the threads reach them, so sums differ from the
  interpreter's in rounding only;
* variadic scatters with duplicates (no atomic spans two outputs) and complex elements keep the
  sequential path: one thread applies every update in the interpreter's order (scatter
  positions row-major, then window positions row-major).

When an output does not share its buffer with its operand (argument ids differ, or no ids
given), the operand (any fused expression) is first written into the output: the whole kernel is
then one block, a block barrier orders that init before the updates, which the block's threads
share out (packed sub-byte outputs: a whole byte of elements per init thread).

Sorted, non-unique indices with more slices than 4 warps per SM take XLA's
`ScatterWithDistributedIndices` instead (simplified scatters only: indices [slices, index
vector], updates [slices, window]): blocks of 4 warps, each warp walks K consecutive slices in
order, each lane holding `vector` elements per 32 * vector of the slice in registers; runs of
equal indices are combined there with the combiner and written with one atomic per element when
the index changes and at the end. K and the vector follow XLA's rules (`_distributed_indices_plan`).
"""

from __future__ import annotations

import math
from typing import Hashable, Sequence

from hlo_codegen.elemental.emitter import value_type
from hlo_codegen.emitters.base import EmitterError, KernelParams, fusion_roots
from hlo_codegen.emitters.common import (
    FusedValues, SimpleEmitter, ThreadIds, aliased_parameter, delinearize_values,
    linear_index, packing, sequential_loop, strided_loop,
)
from hlo_codegen.emitters.launch import H100, GpuDeviceInfo, loop_launch_dimensions
from hlo_codegen.emitters.scatter_sorted import WARPS_PER_BLOCK, SortedIndicesScatter
from hlo_codegen.indexing import IndexingMap, LaunchDimensions, Variable, compose_indexing_maps, dim, sym
from hlo_codegen.indexing.affine import const
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.shape_indexing import delinearize, physical_dims, physical_to_logical
from hlo_codegen.indexing.thread_indexing import default_thread_id_indexing_map
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Kernel, Value
from hlo_common.gpu.launch_dimensions import loop_unroll_factor
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape

INIT_THREADS = 256
MAX_ACCUMULATORS = 32  # its per-thread accumulator elements (beyond: the distributed-updates variant)
# A combiner whose root is one of these ops on (current, update) is one native atomic.
_NATIVE = {"add": {"float": "addf", "signed": "addi", "unsigned": "addi"},
           "maximum": {"signed": "maxsi", "unsigned": "maxui"},
           "minimum": {"signed": "minsi", "unsigned": "minui"},
           "and": {"signed": "andi", "unsigned": "andi", "pred": "andi"},
           "or": {"signed": "ori", "unsigned": "ori", "pred": "ori"},
           "xor": {"signed": "xori", "unsigned": "xori", "pred": "xori"}}


def _ints(instr: HloInstruction, key: str) -> list[int]:
    return [int(v) for v in (instr.attrs.get(key) or ())]


def linear_to_logical(shape: Shape) -> IndexingMap:
    """(buffer offset) -> logical index of `shape`."""
    phys = physical_dims(shape)
    total = max(shape.num_elements, 1)
    m = IndexingMap(delinearize(phys, dim(0)), [Variable(Interval(0, total - 1))])
    return compose_indexing_maps(m, physical_to_logical(shape)).simplify()


def scatter_argument_ids(fusion: HloInstruction) -> list[int] | None:
    """Kernel argument ids of a scatter fusion as XLA's buffer assignment gives them (output k
    shares operand k's buffer where that operand is a fusion parameter; hlo-codegen's buffer
    assignment does the same when the operand dies there); None for other fusions."""
    roots = fusion_roots(fusion)
    if len(roots) != 1 or roots[0].opcode != "scatter":
        return None
    scatter, n_ops = roots[0], len(fusion.operands)
    ids = list(range(n_ops))
    for k in range((len(scatter.operands) - 1) // 2):
        op = scatter.operands[k]
        ids.append(op.parameter_number if op.opcode == "parameter" and len(op.users) == 1 else n_ops + k)
    return ids


def combiner_kind(scatter: HloInstruction) -> str | None:
    """The native atomic kind of a single-output scatter's combiner (kernel_ir ATOMIC_KINDS), if any."""
    comp = scatter.attrs["to_apply"]
    root = comp.root
    et = scatter.operands[0].shape.element_type
    if root.opcode == "parameter":
        return "assign" if root.parameter_number == 1 else None
    if len(root.operands) != 2 or any(o.opcode != "parameter" for o in root.operands):
        return None
    if sorted(o.parameter_number for o in root.operands) != [0, 1]:
        return None
    return _NATIVE.get(root.opcode, {}).get(et.kind)


class ScatterFusion(SimpleEmitter):
    """See the module docstring."""

    kind = "scatter"
    vectorize = True  # the lane loop's update loads become vector loads

    def __init__(self, fusion: HloInstruction, device: GpuDeviceInfo = H100):
        super().__init__(fusion, device)
        self.scatter = fusion_roots(fusion)[0]
        if self.scatter.opcode != "scatter":
            raise EmitterError(f"%{fusion.name}: the scatter emitter needs a scatter root")
        self.n = (len(self.scatter.operands) - 1) // 2
        self.out_shape = self.scatter.operands[0].shape
        self.upd_shape = self.scatter.operands[self.n + 1].shape
        packed = packing(self.out_shape) > 1
        self.per_thread = 8 // self.out_shape.element_type.bits if packed else 1
        unique = self.scatter.attrs.get("unique_indices") is True
        et = self.out_shape.element_type
        atomic_ok = self.n == 1 and not et.is_complex and et.bits <= 64
        # "store": plain read-combine-write; "atomic": atomic_rmw; "serial": one thread, in order
        self.mode = "store" if unique and not packed else "atomic" if atomic_ok else "serial"
        self.atomic_kind = combiner_kind(self.scatter) if self.mode == "atomic" else None
        self.vector = self._vector_size()
        # XLA's ScatterWithDistributedIndices: (indices per warp, vector) or None
        self.sorted_plan = self._distributed_indices_plan() if not unique else None
        self.needs_init = True
        self._launch = self._choose_launch()

    def _vector_size(self) -> int:
        """gcd(elements of the window dims physically minor to every scatter dim, loop unroll)."""
        shape = self.upd_shape
        if self.mode == "serial" or shape.num_elements == 0:
            return 1
        window = set(_ints(self.scatter, "update_window_dims"))
        minor = 1
        for d in (shape.layout.minor_to_major if shape.layout is not None else range(shape.rank - 1, -1, -1)):
            if d not in window:
                break
            minor *= shape.dims[d]
        unroll = loop_unroll_factor(shape.num_elements, self.computation.instructions, [shape], self.device)
        return math.gcd(minor, unroll)

    def _simplified(self) -> bool:
        """XLA's simplified scatter form: indices [slices, index vector], updates [slices, window],
        the index vector addressing the leading operand dims, row-major updates."""
        sc, upd, out = self.scatter, self.upd_shape, self.out_shape
        indices = sc.operands[self.n].shape
        ivl = indices.dims[1] if indices.rank == 2 else 0
        row_major = upd.layout is None or list(upd.layout.minor_to_major) == list(range(upd.rank - 1, -1, -1))
        return (indices.rank == 2 and int(sc.attrs.get("index_vector_dim", 2)) == 1 and row_major
                and upd.rank == out.rank + 1 and _ints(sc, "update_window_dims") == list(range(1, upd.rank))
                and not _ints(sc, "inserted_window_dims") and not _ints(sc, "input_batching_dims")
                and _ints(sc, "scatter_dims_to_operand_dims") == list(range(ivl)) and 0 < ivl <= out.rank)

    def _distributed_indices_plan(self) -> tuple[int, int] | None:
        """XLA's choice of the sorted-indices variant: sorted, non-unique indices and more slices
        than 4 warps per SM. Returns (indices per warp, vector size)."""
        sc = self.scatter
        if sc.attrs.get("indices_are_sorted") is not True or self.mode != "atomic" or not self._simplified():
            return None
        upd, out = self.upd_shape, self.out_shape
        num_slices, window = upd.dims[0], list(upd.dims[1:])
        per_slice = math.prod(window)
        max_warps = WARPS_PER_BLOCK * self.device.core_count
        bits = out.element_type.bits
        if num_slices <= max_warps or per_slice == 0 or 128 % bits:
            return None
        vector = math.gcd(per_slice, 128 // bits)
        while vector > 1 and self.device.threads_per_warp * vector > per_slice:
            vector //= 2
        indices = sc.operands[self.n].shape
        ivl = indices.dims[1]
        valid = math.prod(out.dims[i] - window[i] + 1 for i in range(ivl))
        per_warp = -(-num_slices // max(max_warps, valid))
        max_indices = 128 // indices.element_type.bits
        if ivl == 1 and per_warp > max_indices:
            per_warp = -(-per_warp // max_indices) * max_indices
        if -(-per_slice // (self.device.threads_per_warp * vector)) * vector > MAX_ACCUMULATORS:
            return None  # the accumulator would not fit in registers
        return per_warp, vector

    def _choose_launch(self) -> LaunchDimensions:
        if self.needs_init:
            groups = -(-self.out_shape.num_elements // self.per_thread)
            work = max(groups, self.upd_shape.num_elements if self.mode != "serial" else 1)
            threads = max(1, min(INIT_THREADS, -(-work // 32) * 32 if work > 1 else 1))
            return LaunchDimensions((threads, 1, 1), (1, 1, 1))
        if self.sorted_plan is not None:
            per_warp = self.sorted_plan[0]
            blocks = -(-self.upd_shape.dims[0] // (per_warp * WARPS_PER_BLOCK))
            return LaunchDimensions((WARPS_PER_BLOCK * self.device.threads_per_warp, 1, 1), (blocks, 1, 1))
        if self.mode != "serial":  # the loop launch with whole warps per block, as XLA's
            loop = loop_launch_dimensions(self.upd_shape.num_elements, self.vector, self.device)
            warp = self.device.threads_per_warp
            threads = -(-loop.threads_xyz()[0] // warp) * warp
            return LaunchDimensions((threads, 1, 1), loop.blocks_xyz())
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
        if self.needs_init:
            self.sorted_plan = None
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
        if self.upd_shape.num_elements == 0:
            return
        if self.mode == "serial":
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
        elif self.sorted_plan is not None:
            self._emit_sorted(b, ids, values, outputs[0])
        else:
            self._emit_distributed(b, ids, values, outputs)

    def _emit_distributed(self, b: IRBuilder, ids: ThreadIds, values: FusedValues,
                          outputs: list[str]) -> None:
        """XLA's layout: `vector` consecutive update elements per thread, one slice start each."""
        m = default_thread_id_indexing_map(self._launch, self.vector, self.upd_shape)
        if m.range_vars[0].bounds.upper != 0:
            raise EmitterError(f"%{self.fusion.name}: the scatter launch does not cover the updates")
        # lane 0 of the thread (chunk_id = unroll_id = 0), then the lanes (unroll_id as the symbol)
        first = IndexingMap([e.replace(None, [const(0), const(0)]) for e in m.results], m.dim_vars, (), (),
                            [(e.replace(None, [const(0), const(0)]), r) for e, r in m.constraints.items()])
        lanes = IndexingMap([e.replace(None, [const(0), sym(0)]) for e in m.results], m.dim_vars,
                            [m.range_vars[1]], (),
                            [(e.replace(None, [const(0), sym(0)]), r) for e, r in m.constraints.items()])
        first, first_dims = ids.for_map(first.simplify())
        lanes, lane_dims = ids.for_map(lanes.simplify())
        scatter_dims = self._update_scatter_dims()

        def thread(syms, base, iters):
            position = {d: base[d] for d in scatter_dims}
            ok, starts = self._window_starts(b, values, position)

            def run():
                def lane(syms, idx, iters):
                    self._combine(b, values, outputs, list(idx), starts)
                    return []
                attrs = {"vectorize": self.vector} if self.vector > 1 else None
                b.loop(lanes, lane_dims, [], lane, index_hints=[f"u{i}" for i in range(lanes.num_results)],
                       attrs=attrs)
                return []

            if ok is None:
                run()
            else:
                b.if_(ok, [], run)
            return []

        b.loop(first, first_dims, [], thread, index_hints=[f"s{i}" for i in range(first.num_results)])

    def _emit_sorted(self, b: IRBuilder, ids: ThreadIds, values: FusedValues, out: str) -> None:
        """XLA's distributed-indices variant (scatter_sorted.py)."""
        SortedIndicesScatter(self, b, ids, values, out).emit()

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

    def _window_starts(self, b: IRBuilder, values: FusedValues,
                       position: dict[int, Value]) -> tuple[Value | None, list[Value | None]]:
        """(in-bounds i1 or None, window start per operand dim or None) of the update slice at
        `position` (update scatter dim -> index value)."""
        scatter, shape = self.scatter, self.out_shape
        indices = scatter.operands[self.n]
        ivd = int(scatter.attrs.get("index_vector_dim", indices.shape.rank))
        to_operand = _ints(scatter, "scatter_dims_to_operand_dims")
        inserted = _ints(scatter, "inserted_window_dims")
        batching = _ints(scatter, "input_batching_dims")
        idx_batching = _ints(scatter, "scatter_indices_batching_dims")
        upd_window = _ints(scatter, "update_window_dims")
        batch_in = [d for d in range(indices.shape.rank) if d != ivd]
        pos = dict(zip(batch_in, (position[d] for d in self._update_scatter_dims())))
        window_dims = [d for d in range(shape.rank) if d not in inserted and d not in batching]
        signed = indices.shape.element_type.kind != "unsigned"
        ok, starts = None, []
        for d in range(shape.rank):
            size = self.upd_shape.dims[upd_window[window_dims.index(d)]] if d in window_dims else 1
            if d in to_operand:
                at = [pos[k] if k != ivd else b.index(to_operand.index(d)) for k in range(indices.shape.rank)]
                raw = values.at(b, indices, at)[0]
                start = b.cast("index_cast" if signed else "index_castui", raw, "index")
                # unsigned compare: a negative start is a huge unsigned number, out of bounds too
                inside = b.cmpi("ule", start, b.index(shape.dims[d] - size))
                ok = inside if ok is None else b.binary("andi", ok, inside)
            elif d in batching:
                start = pos[idx_batching[batching.index(d)]]
            else:
                start = None
            starts.append(start)
        return ok, starts

    def _combine(self, b: IRBuilder, values: FusedValues, outputs: list[str], upd_idx: list[Value],
                 starts: list[Value | None]) -> None:
        """Combine update element `upd_idx` into the output (its window is known in bounds)."""
        scatter, shape = self.scatter, self.out_shape
        inserted = _ints(scatter, "inserted_window_dims")
        batching = _ints(scatter, "input_batching_dims")
        upd_window = _ints(scatter, "update_window_dims")
        window_dims = [d for d in range(shape.rank) if d not in inserted and d not in batching]
        target = []
        for d in range(shape.rank):
            offset = upd_idx[upd_window[window_dims.index(d)]] if d in window_dims else None
            start = starts[d]
            if start is not None:
                offset = start if offset is None else b.binary("addi", start, offset)
            target.append(offset if offset is not None else b.index(0))
        combiner = values.scalar_function(scatter.attrs["to_apply"])
        linear = linear_index(b, shape, target)
        upd = [values.at(b, scatter.operands[self.n + 1 + k], upd_idx)[0] for k in range(self.n)]
        if self.mode == "atomic":
            b.atomic_rmw(outputs[0], linear, upd[0], combiner, self.atomic_kind)
            return
        cur = [b.load(outputs[k], linear, value_type(scatter.operands[k].shape)) for k in range(self.n)]
        for k, v in enumerate(b.call(combiner, cur + upd)):
            b.store(outputs[k], v, linear)

    def _apply_update(self, b: IRBuilder, values: FusedValues, outputs: list[str],
                      upd_idx: list[Value]) -> None:
        """Apply update element `upd_idx` (if its window is in bounds)."""
        scatter_dims = self._update_scatter_dims()
        ok, starts = self._window_starts(b, values, {d: upd_idx[d] for d in scatter_dims})
        if ok is None:
            self._combine(b, values, outputs, upd_idx, starts)
        else:
            b.if_(ok, [], lambda: (self._combine(b, values, outputs, upd_idx, starts), [])[1])
