"""The sorted-indices variant of the scatter emitter (XLA's distributed-indices scatter in
`xla/backends/gpu/codegen/emitters/scatter.cc`), which `scatter.py` picks when the indices are
sorted: warp w takes the update slices [w*K, w*K + K) in order, each lane `vector` elements per
32 * vector of a slice; updates of equal indices are combined in registers with the combiner and
written with one atomic per element when the index changes (and at the end).
"""

from __future__ import annotations

import math

from hlo_codegen.elemental.emitter import value_type
from hlo_codegen.emitters.common import FusedValues, ThreadIds, linear_index
from hlo_codegen.indexing import IndexingMap, Variable, dim, sym
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.shape_indexing import delinearize
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Value

WARPS_PER_BLOCK = 4  # XLA's sorted-indices variant: 4 warps per block


class SortedIndicesScatter:
    """The kernel body of one sorted-indices scatter, for the `ScatterFusion` `emitter`: the
    accumulator elements of a lane, the flush of the accumulators at an index change, and the
    loop over the warp's slices."""

    def __init__(self, emitter, b: IRBuilder, ids: ThreadIds, values: FusedValues, out: str):
        self.e, self.b, self.values, self.out = emitter, b, values, out
        self.per_warp, v = emitter.sorted_plan
        sc, upd, shape = emitter.scatter, emitter.upd_shape, emitter.out_shape
        self.sc, self.shape = sc, shape
        self.num_slices, self.window = upd.dims[0], list(upd.dims[1:])
        self.per_slice, warp = math.prod(self.window), emitter.device.threads_per_warp
        self.indices = sc.operands[emitter.n]
        self.ivl = self.indices.shape.dims[1]
        self.signed = self.indices.shape.element_type.kind != "unsigned"
        self.t = value_type(shape)
        self.combiner = values.scalar_function(sc.attrs["to_apply"])
        self.th, self.bl = ids[0], ids[3]
        launch = emitter.launch_dimensions()
        nt, nb = launch.threads_xyz()[0], launch.blocks_xyz()[0]
        self.grid = [Variable(Interval(0, nt - 1)), Variable(Interval(0, nb - 1))]
        lane = b.apply_indexing(IndexingMap([dim(0) % warp], self.grid[:1]), [self.th])[0]
        iters = -(-self.per_slice // (warp * v))
        self.elements = []  # (in-slice linear index value, always valid?) per accumulator element
        for it in range(iters):
            for k in range(v):
                m = IndexingMap([dim(0) * v + it * v * warp + k], [Variable(Interval(0, warp - 1))])
                valid = (warp - 1) * v + it * v * warp + k < self.per_slice
                self.elements.append((b.apply_indexing(m, [lane])[0], valid))
        self.lin_map = IndexingMap(delinearize(self.window, dim(0)),
                                   [Variable(Interval(0, self.per_slice - 1))])

    def emit(self) -> None:
        b, ivl, warp = self.b, self.ivl, self.e.device.threads_per_warp
        first = (dim(1) * WARPS_PER_BLOCK + dim(0).floordiv(warp)) * self.per_warp
        slices = IndexingMap([first + sym(0)], self.grid, [Variable(Interval(0, self.per_warp - 1))], (),
                             [(first + sym(0), Interval(0, self.num_slices - 1))])
        zero = b.constant(0.0 if self.shape.element_type.is_float else 0, self.t)
        inits = [b.index(-1)] * ivl + [b.constant(False, "i1")] + [zero] * len(self.elements)
        res = b.loop(slices, [self.th, self.bl], inits, self.step, symbol_hints=["index_id"],
                     index_hints=["slice"])
        b.if_(res[ivl], [], lambda: self.flush(res[:ivl], res[ivl + 1:]))

    def guarded(self, e: tuple[Value, bool], then, otherwise) -> Value:
        """then() for an accumulator element inside the slice, otherwise() past its end."""
        if e[1]:
            return then()
        ok = self.b.cmpi("ult", e[0], self.b.index(self.per_slice))
        return self.b.if_(ok, [self.t], lambda: [then()], lambda: [otherwise()])[0]

    def flush(self, offsets: list[Value], acc: list[Value]) -> list[Value]:
        """One atomic per accumulator element, at the window of the index `offsets`."""
        b, shape = self.b, self.shape
        for e, a in zip(self.elements, acc):
            def write(e=e, a=a) -> Value:
                inner = b.apply_indexing(self.lin_map, [e[0]])
                target = [b.binary("addi", offsets[i], inner[i]) if i < self.ivl else inner[i]
                          for i in range(shape.rank)]
                b.atomic_rmw(self.out, linear_index(b, shape, target), a, self.combiner, self.e.atomic_kind)
                return a
            self.guarded(e, write, lambda a=a: a)
        return []

    def step(self, syms, idx, it_vals):
        """One slice: flush when its index differs from the previous one, then fold it in."""
        b, ivl, shape = self.b, self.ivl, self.shape
        j, slice_id = syms[0], idx[0]
        prev, inb, acc = it_vals[:ivl], it_vals[ivl], it_vals[ivl + 1:]
        new = [b.cast("index_cast" if self.signed else "index_castui",
                      self.values.at(b, self.indices, [slice_id, b.index(i)])[0], "index")
               for i in range(ivl)]
        changed = None
        for p, q in zip(prev, new):
            ne = b.cmpi("ne", p, q)
            changed = ne if changed is None else b.binary("ori", changed, ne)
        not_first = b.cmpi("ne", j, b.index(0))
        must_flush = b.binary("andi", not_first, b.binary("andi", changed, inb))
        b.if_(must_flush, [], lambda: self.flush(prev, acc))
        in_bounds = None
        for i in range(ivl):
            c = b.cmpi("ule", new[i], b.index(shape.dims[i] - self.window[i]))
            in_bounds = c if in_bounds is None else b.binary("andi", in_bounds, c)
        new_inb = b.select(changed, in_bounds, inb)
        acc = b.if_(new_inb, [self.t] * len(acc), lambda: self.accumulate(slice_id, changed, acc),
                    lambda: list(acc))
        return new + [new_inb] + acc

    def accumulate(self, slice_id: Value, changed: Value, acc: list[Value]) -> list[Value]:
        """The slice's updates: replacing the accumulators at a new index, combined into them
        otherwise."""
        b, update = self.b, self.sc.operands[self.e.n + 1]
        out_acc = []
        for e, a in zip(self.elements, acc):
            def take(e=e, a=a) -> Value:
                at = [slice_id] + b.apply_indexing(self.lin_map, [e[0]])
                u = self.values.at(b, update, at)[0]
                combined = b.call(self.combiner, [a, u])[0]
                return b.select(changed, u, combined)
            out_acc.append(self.guarded(e, take, lambda a=a: a))
        return out_acc
