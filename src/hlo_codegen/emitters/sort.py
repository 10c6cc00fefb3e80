"""The sort emitter (XLA's kSort): a stable bitonic network per row, one block per row.

Where it sits: chosen by emitters/__init__.py for fusions whose root is a sort (any number of
operands, any comparator computation, which becomes a kernel function). XLA sorts in place in
the output with one kernel per network stage (or shared-memory tiles); a kernel here is one
launch, so a row belongs to one block and block barriers separate the stages:

1. copy: each output row gets its operand row (any fused expression; skipped for an output
   that shares its buffer with the parameter it sorts), and a shared-memory array gets the
   original positions 0..n-1 (s16 / s32).
2. the network, all comparators ascending (the flip form): for block size k = 2, 4, .., m (m the
   next power of two of the row length n) first pairs (i, i ^ (k - 1)), then (i, i ^ j) for j =
   k/4, .., 1; a pair whose upper element is past n is skipped, as if padding were +inf. Pairs
   of a step are disjoint, spread over the block's threads; a barrier follows every step.
   A pair (i, j), i < j, swaps when element j sorts before element i: comparator(x_j, x_i),
   or neither before the other and j's original position is smaller - which makes the network
   stable, so the result is the interpreter's (a stable sort has one answer).

Rows longer than the shared-memory budget (more than 24576 elements) fall back to a stable
insertion sort by one thread per row (correct, quadratic).
"""

from __future__ import annotations

from typing import Hashable, Sequence

from hlo_codegen.elemental.emitter import leaf_shapes, value_type
from hlo_codegen.emitters.base import EmitterError, KernelParams, fusion_roots
from hlo_codegen.emitters.common import (
    FusedValues, SimpleEmitter, ThreadIds, aliased_parameter, elementwise_launch, linear_index,
    loop_over_shape, packing, strided_loop,
)
from hlo_codegen.emitters.launch import H100, GpuDeviceInfo
from hlo_codegen.indexing import IndexingMap, LaunchDimensions, Variable, dim, sym
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.shape_indexing import delinearize
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Buffer, Kernel, Value
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape

MAX_THREADS = 256  # 1024 threads of a 4-operand f64 comparator run out of registers (H100)
MAX_SHARED_ELEMENTS = 24576  # s16 positions in 48 KiB


def bitonic_steps(m: int) -> list[tuple[int, bool]]:
    """(h, flip) per step of the flip-form bitonic network over m = 2^p elements: pairs are
    i (bit h clear) with i ^ (2^(h+1) - 1) when `flip`, else with i ^ 2^h."""
    steps = []
    k = 2
    while k <= m:
        h = k.bit_length() - 2
        steps.append((h, True))
        for hh in range(h - 1, -1, -1):
            steps.append((hh, False))
        k *= 2
    return steps


class SortFusion(SimpleEmitter):
    """See the module docstring."""

    kind = "sort"

    def __init__(self, fusion: HloInstruction, device: GpuDeviceInfo = H100):
        super().__init__(fusion, device)
        self.sort = fusion_roots(fusion)[0]
        if self.sort.opcode != "sort":
            raise EmitterError(f"%{fusion.name}: the sort emitter needs a sort root")
        self.shapes: list[Shape] = leaf_shapes(self.sort.shape)
        shape = self.shapes[0]
        self.axis = int(self.sort.attrs["dimensions"][0])
        self.n = shape.dims[self.axis] if shape.rank else 1
        self.rows = shape.num_elements // self.n if self.n else 0
        self.m = 1 << max(self.n - 1, 0).bit_length()
        self.network = 1 < self.n <= MAX_SHARED_ELEMENTS
        if self.network:
            threads = max(1, min(MAX_THREADS, self.m // 2))
            self._launch = LaunchDimensions((threads, 1, 1), (max(self.rows, 1), 1, 1))
        else:
            self._launch = elementwise_launch(self.rows, device)

    def launch_dimensions(self) -> LaunchDimensions:
        return self._launch

    def emit(self, argument_ids: Sequence[Hashable] | None = None) -> Kernel:
        if any(packing(s) > 1 for s in self.shapes):
            raise EmitterError(f"%{self.fusion.name}: sorting packed sub-byte arrays is not supported")
        if self.rows >= 1 << 31:
            raise EmitterError(f"%{self.fusion.name}: {self.rows} rows to sort do not fit one grid dimension")
        return super().emit(argument_ids)

    # -- shared pieces ------------------------------------------------------------------------------
    def row_map(self) -> IndexingMap:
        """(row, i) -> logical index: the row delinearized over the other dims, i along the axis."""
        dims = self.shapes[0].dims
        others = [d for d in range(len(dims)) if d != self.axis]
        row_exprs = delinearize([dims[d] for d in others], dim(0))
        results = [dim(1) if d == self.axis else row_exprs[others.index(d)] for d in range(len(dims))]
        return IndexingMap(results, [Variable(Interval(0, max(self.rows, 1) - 1)),
                                     Variable(Interval(0, max(self.n, 1) - 1))])

    def _check_aliasing(self, params: KernelParams) -> list[bool]:
        copied = []
        for k, out in enumerate(params.output_buffers):
            for p, buf in params.param_buffers.items():
                if buf == out and not aliased_parameter(params, self.sort.operands[k], out):
                    raise EmitterError(f"%{self.fusion.name}: output {k} shares a buffer with parameter {p}, "
                                       "which it does not sort")
            copied.append(not aliased_parameter(params, self.sort.operands[k], out))
        return copied

    def build(self, kernel: Kernel, params: KernelParams) -> None:
        copied = self._check_aliasing(params)
        values = FusedValues(kernel, self.computation, params, self.sort.operands)
        b = IRBuilder(kernel)
        ids = ThreadIds(b, self._launch)
        comparator = values.scalar_function(self.sort.attrs["to_apply"])
        rows = self.row_map()
        outputs = params.output_buffers

        def element(row: Value, i: Value) -> list[Value]:
            """Offsets of element i of the row in every output buffer."""
            idx = b.apply_indexing(rows, [row, i]) if len(self.shapes[0].dims) > 1 else [i]
            return [linear_index(b, s, idx) for s in self.shapes], idx

        def copy(row: Value, i: Value) -> None:
            offsets, idx = element(row, i)
            for k, (name, off) in enumerate(zip(outputs, offsets)):
                if copied[k]:
                    b.store(name, values.at(b, self.sort.operands[k], idx)[0], off)

        if self.network:
            self._emit_network(kernel, b, ids, element, copy, comparator, outputs)
        else:
            self._emit_insertion(b, ids, element, copy, comparator, outputs)

    def _load_all(self, b: IRBuilder, outputs: list[str], offsets: list[Value]) -> list[Value]:
        return [b.load(name, off, value_type(s)) for name, off, s in zip(outputs, offsets, self.shapes)]

    def _before(self, b: IRBuilder, comparator, xs: list[Value], ys: list[Value]) -> Value:
        """i1: x sorts before y (comparator(x_0, y_0, x_1, y_1, ..))."""
        args = [v for pair in zip(xs, ys) for v in pair]
        return b.call(comparator, args)[0]

    # -- the bitonic network ------------------------------------------------------------------------
    def _emit_network(self, kernel: Kernel, b: IRBuilder, ids: ThreadIds, element, copy, comparator,
                      outputs: list[str]) -> None:
        pos_type = "s16" if self.n <= 32767 else "s32"
        kernel.buffers.append(Buffer("sort_positions", "shared", pos_type, self.n))
        pt = "i16" if pos_type == "s16" else "i32"
        threads = self._launch.threads_xyz()[0]
        row, th = ids[3], ids[0]

        def init(i: Value) -> None:
            copy(row, i)
            b.store("sort_positions", b.cast("trunci", i, pt), i)

        strided_loop(b, th, threads, self.n, init)
        for h, flip in bitonic_steps(self.m):
            b.sync_threads()
            self._emit_step(b, th, threads, row, h, flip, element, comparator, outputs, pt)
        b.sync_threads()

    def _emit_step(self, b: IRBuilder, th: Value, threads: int, row: Value, h: int, flip: bool, element,
                   comparator, outputs: list[str], pt: str) -> None:
        half = self.m // 2
        chunks = -(-half // threads)
        p = sym(0) * threads + dim(0)
        base = p.floordiv(1 << h) * (1 << (h + 1))
        low = base + p % (1 << h)
        high = base + ((1 << (h + 1)) - 1) - p % (1 << h) if flip else low + (1 << h)
        m = IndexingMap([low, high], [Variable(Interval(0, threads - 1))],
                        [Variable(Interval(0, chunks - 1))], (),
                        [(p, Interval(0, half - 1)), (high, Interval(0, self.n - 1))])

        def body(syms, ij, iters):
            i, j = ij
            off_i, _ = element(row, i)
            off_j, _ = element(row, j)
            xi, xj = self._load_all(b, outputs, off_i), self._load_all(b, outputs, off_j)
            pi, pj = b.load("sort_positions", i, pt), b.load("sort_positions", j, pt)
            not_before = b.binary("xori", self._before(b, comparator, xi, xj), b.constant(1, "i1"))
            tie_first = b.binary("andi", not_before, b.cmpi("slt", pj, pi))
            swap = b.binary("ori", self._before(b, comparator, xj, xi), tie_first)
            for name, oi, oj, vi, vj in zip(outputs, off_i, off_j, xi, xj):
                b.store(name, b.select(swap, vj, vi), oi)
                b.store(name, b.select(swap, vi, vj), oj)
            b.store("sort_positions", b.select(swap, pj, pi), i)
            b.store("sort_positions", b.select(swap, pi, pj), j)
            return []

        b.loop(m, [th], [], body, index_hints=["i", "j"])

    # -- the fallback: insertion sort, one thread per row ------------------------------------------------
    def _emit_insertion(self, b: IRBuilder, ids: ThreadIds, element, copy, comparator,
                        outputs: list[str]) -> None:
        n = self.n
        row_shape = Shape.array("s32", (max(self.rows, 1),))

        def per_row(idx: list[Value]) -> None:
            row = idx[0]
            strided_loop(b, b.index(0), 1, n, lambda i: copy(row, i))
            if n < 2:
                return
            # for i in [1, n): for j = i-1 down to 0: swap (j, j+1) if element j+1 sorts first.
            m = IndexingMap([dim(0) - 1 - sym(0)], [Variable(Interval(1, n - 1))],
                            [Variable(Interval(0, n - 2))],
                            (), [(dim(0) - 1 - sym(0), Interval(0, n - 2))])

            def inner(syms, js, iters):
                j = js[0]
                j1 = b.binary("addi", j, b.index(1))
                off_a, _ = element(row, j)
                off_b, _ = element(row, j1)
                xa, xb = self._load_all(b, outputs, off_a), self._load_all(b, outputs, off_b)
                swap = self._before(b, comparator, xb, xa)
                for name, oa, ob, va, vb in zip(outputs, off_a, off_b, xa, xb):
                    b.store(name, b.select(swap, vb, va), oa)
                    b.store(name, b.select(swap, va, vb), ob)
                return []

            outer = IndexingMap([sym(0) + 1], (), [Variable(Interval(0, n - 2))])
            b.loop(outer, [], [], lambda s, i, it: (b.loop(m, [i[0]], [], inner), [])[1])

        loop_over_shape(b, ids, self._launch, row_shape, per_row)
