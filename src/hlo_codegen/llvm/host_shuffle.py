"""The host lowering's emulation of `shuffle_reduce` (host.py): a warp shuffle as loops over the
block's threads through per-thread arrays, with `shfl.sync.down` semantics (lane i reads lane
i + d when that is below 32 and an existing thread, else its own value), so the reduction tree
and the float results are the GPU's. Where only lane 0 reads the result (`lane0_only`), only the
lanes lane 0 depends on are computed.
"""

from __future__ import annotations

from hlo_codegen.kernel_ir.ir import Op
from hlo_codegen.llvm.lane0 import lane0_only
from hlo_codegen.llvm.lowering import I64, llvm_type
from hlo_codegen.llvm.text import LV, LLFunction


def mem_type(llty: str) -> str:
    """How a value of LLVM type `llty` is kept in a per-thread array: i1 as a byte, which the
    loop vectorizer can load and store (it leaves i1 memory scalar)."""
    return "i8" if llty == "i1" else llty


def store_value(f: LLFunction, value: LV, ptr: LV) -> None:
    f.store(f.cast("zext", value, "i8") if value.ty == "i1" else value, ptr)


def load_value(f: LLFunction, llty: str, ptr: LV) -> LV:
    if llty == "i1":
        return f.cast("trunc", f.load("i8", ptr), "i1")
    return f.load(llty, ptr)


class ShuffleLowering:
    """The shuffle phases of host.py's _KernelLowering, which provides `fn`, `kernel`, `ml`,
    `buffers`, `spills`, `def_op`, `_region`, `_enter_thread`, `_slot` and `_parallel_loop`."""

    def _shuffle_phase(self, p: int, op: Op) -> None:
        f, n = self.fn, self.kernel.num_threads
        reducer = self.kernel.function(op.attrs["callee"])
        loop = self._region()
        cur = [self.spills[id(r)] for r in op.results]
        distance = int(op.attrs.get("max_distance", 16))
        group, loop_id = self._parallel_loop()

        def init(t: LV, iters: list[LV]) -> list[LV]:
            f.access_group = group
            try:
                rl = self._enter_thread(t, p, list(op.operands))
                for r, v in zip(op.results, op.operands):
                    store_value(f, rl.v(v), self._slot(r, t))
            finally:
                f.access_group = None
            return []

        loop.for_range(0, n - 1, [], init, hint="t", loop_md=loop_id)
        if lane0_only(self.kernel, op):
            # Steps over at least 8 lanes as vectorized loops, the rest as one straight-line tree.
            while distance >= 8:
                self._shuffle_step_lane0(op, reducer, cur, distance)
                distance //= 2
            self._shuffle_tree_lane0(op, reducer, cur, distance)
            return
        # The scratch copy has `distance` spare slots past the last thread: every thread then
        # reads slot t + d unconditionally (a plain vector load) and keeps it only where the
        # shuffle would (see _shuffle_step), so the loops vectorize without gathers.
        scratch = [f.alloca(f"[{n + distance} x {mem_type(llvm_type(r.type))}]") for r in op.results]
        while distance >= 1:
            self._shuffle_step(op, reducer, cur, scratch, distance)
            distance //= 2

    def _shuffle_step(self, op: Op, reducer, cur: list[LV], scratch: list[LV], d: int) -> None:
        """One `shfl.sync.down` by d and the reducer: thread t combines its value with thread
        t + d's when that is in its warp and exists, else with its own (the GPU's rule). Both
        loops are parallel: the first copies the values, the second reads only the copy."""
        f, n = self.fn, self.kernel.num_threads
        types = [llvm_type(r.type) for r in op.results]
        loop = self._region()

        def copy(t: LV, iters: list[LV]) -> list[LV]:
            for ty, c, s in zip(types, cur, scratch):
                mt = mem_type(ty)
                f.store(f.load(mt, f.gep(mt, c, t)), f.gep(mt, s, t))
            return []

        def combine(t: LV, iters: list[LV]) -> list[LV]:
            lane = f.binop("and", t, LV(I64, "31"))
            src = f.binop("add", t, LV(I64, str(d)))
            ok = f.binop("and", f.icmp("slt", f.binop("add", lane, LV(I64, str(d))), LV(I64, "32")),
                         f.icmp("slt", src, LV(I64, str(n))))
            # A thread's own value comes from its own slot (written only by this iteration), the
            # partner's from the copy: two arrays, so LLVM sees no value carried between
            # iterations (one array made d = 1 a recurrence, vectorized with a scalar tail).
            mine = [load_value(f, ty, f.gep(mem_type(ty), c, t)) for ty, c in zip(types, cur)]
            # Slot t + d may be a spare slot never written: its value is dropped by the select.
            other = [f.select(ok, load_value(f, ty, f.gep(mem_type(ty), s, src)), m)
                     for ty, s, m in zip(types, scratch, mine)]
            self._reduce_into(reducer, types, mine, other, cur, t)
            return []

        for body in (copy, combine):
            group, loop_id = self._parallel_loop()
            f.access_group = group
            try:
                loop.for_range(0, n - 1, [], body, hint="t", loop_md=loop_id)
            finally:
                f.access_group = None


    def _call_reducer(self, reducer, types: list[str], mine: list[LV], other: list[LV]) -> list[LV]:
        """reducer(mine, other): one value per shuffled value."""
        f = self.fn
        args = [self.buffers[b.name] for b in self.kernel.params] + mine + other
        ret = types[0] if len(types) == 1 else "{ " + ", ".join(types) + " }"
        out = f.call(ret, self.ml.symbols[reducer.name], args)
        return [out] if len(types) == 1 else [f.extractvalue(ty, out, i) for i, ty in enumerate(types)]

    def _reduce_into(self, reducer, types: list[str], mine: list[LV], other: list[LV], cur: list[LV],
                     t: LV) -> None:
        """cur[t] = reducer(mine, other), for each of the shuffle's values."""
        for ty, c, v in zip(types, cur, self._call_reducer(reducer, types, mine, other)):
            store_value(self.fn, v, self.fn.gep(mem_type(ty), c, t))

    def _shuffle_step_lane0(self, op: Op, reducer, cur: list[LV], d: int) -> None:
        """The step by d where only lane 0 of each warp is read afterwards (`lane0_only`): lane 0's
        final value depends on lanes [0, d) after this step, which read lanes [0, 2d) before it,
        so only those are computed (31 lanes a warp over all steps, not 5 x 32). Lanes [0, d)
        are written and [d, 2d) read, so no copy is needed and the lanes are independent."""
        f = self.fn
        types = [llvm_type(r.type) for r in op.results]
        loop = self._region()

        def lane(w: LV, i: LV) -> None:
            t = f.binop("add", f.binop("mul", w, LV(I64, "32")), i)
            src = f.binop("add", t, LV(I64, str(d)))
            mine = [load_value(f, ty, f.gep(mem_type(ty), c, t)) for ty, c in zip(types, cur)]
            other = [load_value(f, ty, f.gep(mem_type(ty), c, src)) for ty, c in zip(types, cur)]
            self._reduce_into(reducer, types, mine, other, cur, t)

        def warp(w: LV, iters: list[LV]) -> list[LV]:
            group, loop_id = self._parallel_loop()
            f.access_group = group
            try:
                loop.for_range(0, d - 1, [], lambda i, _: lane(w, i) or [], hint="l", loop_md=loop_id)
            finally:
                f.access_group = None
            return []

        loop.for_range(0, self.kernel.num_threads // 32 - 1, [], warp, hint="w")

    def _shuffle_tree_lane0(self, op: Op, reducer, cur: list[LV], distance: int) -> None:
        """The last shuffle steps, by distance, distance / 2, ..., 1 (distance < 8), where only lane 0
        of each warp is read afterwards (`lane0_only`): lane 0's final value is then a fixed tree
        over lanes [0, 2 * distance), each step lane i < d combining with lane i + d, here
        straight-line code on values in registers, per warp. Loops over so few lanes cost more
        than their reductions; the wider steps stay vectorized loops (`_shuffle_step_lane0`: a
        scalar tree for them made the bf16 softmax's max, a rounding per step, 15% slower). The
        reducer calls, and so the float results, are the GPU's."""
        f = self.fn
        types = [llvm_type(r.type) for r in op.results]
        loop = self._region()
        # An operand that is a constant (the emitters' "valid" flag) is the same in every lane:
        # used as such, LLVM folds what the reducer does with it.
        consts: list[LV | None] = []
        for v in op.operands:
            d = self.def_op.get(id(v))
            if d is not None and d.name == "constant":
                loop.lower_op(d)
                consts.append(loop.v(v))
            else:
                consts.append(None)

        def lane_value(ty: str, c: LV, const: LV | None, t: LV) -> LV:
            return const if const is not None else load_value(f, ty, f.gep(mem_type(ty), c, t))

        def warp(w: LV, iters: list[LV]) -> list[LV]:
            base = f.binop("mul", w, LV(I64, "32"))
            slots = [f.binop("add", base, LV(I64, str(i))) if i else base for i in range(2 * distance)]
            lanes = [[lane_value(ty, c, k, t) for ty, c, k in zip(types, cur, consts)] for t in slots]
            d = distance
            while d >= 1:
                lanes = [self._call_reducer(reducer, types, lanes[i], lanes[i + d]) for i in range(d)]
                d //= 2
            for ty, c, v in zip(types, cur, lanes[0]):
                store_value(f, v, f.gep(mem_type(ty), c, base))
            return []

        # Neither unrolled nor vectorized: LLVM's loop vectorizer ran four warps in the lanes of
        # a vector, gathering each lane of the tree from four places, slower than the scalar tree.
        loop.for_range(0, self.kernel.num_threads // 32 - 1, [], warp, hint="w",
                       loop_md=self.ml.module.metadata(
                           'distinct !{{self}, !{!"llvm.loop.unroll.disable"}, '
                           '!{!"llvm.loop.vectorize.enable", i1 false}}'))
