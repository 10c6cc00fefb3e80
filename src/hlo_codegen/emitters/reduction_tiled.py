"""XLA's four reduction emitters (row, multi-row, column, small column) in kernel IR.

Where it sits: `emitters/reduction.py`'s `ReductionFusion` hands a fusion here when
hlo_common.gpu.hlo_fusion_analysis routes it to the reduction emitter (a real reduction hero, every other
root a compatible reduction or of the input's size) and nothing rules the tiled kernels out (packed
sub-byte outputs, an empty input, an epilogue `emit_epilogue` cannot follow); anything else keeps
the simple emitter of reduction.py. The variant, the threads per block and the blocks are
FusionAnalysis's (`reduction_emitter()`, `launch_dimensions()`, `reduction_groups()`: XLA's
figures, checked against XLA's thunk sequence), so the kernel launches as XLA's does: blocks
(x, y) split as `MaybeSplitGridDimensionX`, one z slice per reduction group.

The input of every reduction hero is seen as XLA's 3-d reduction shape in physical order (row:
[major reduced, kept, minor reduced]; column: [major kept, reduced, minor kept]); each thread
folds its share of elements (vector loads along the minor dimension: a `loop` marked `vectorize`)
into accumulators, writing the side outputs (roots of the input's size) on the way. Then:

- row: `shuffle_reduce` over the warp; with several warps per row, lane 0 of each warp writes a
  shared tile [kept threads][warps per row (+1 against bank conflicts)], `sync_threads`, the first
  warp of the row reads it back and shuffles again;
- multi-row (power-of-two rows of at most a warp times the vector): one shuffle over the row's
  lanes (`max_distance` = threads per row / 2), no shared memory;
- column: 32 x 32 threads, lane x along the kept minor dimension, each thread walking the reduced
  dimension with stride 32; the partials go through a [32][32 * vector + 1] shared tile,
  transposed, so that one warp holds one column's 32 partials and shuffles them;
- small column (kept minor size divides 32): one loop over reduced x kept elements, partials in a
  [shared rows][kept + padding] tile, shuffles over `shared rows` lanes.

The thread with lane 0 of the result writes each root of the hero through its epilogue
(`emit_epilogue`), inside an `if` (XLA's predicated_insert).

Accumulation: the reducer as written, except sums and products of 16- and 8-bit floats, which
accumulate in f32 (rounded to the operand type when they pass through the shared tile, whose type
is the operand's, as XLA sizes it). Threads start from the reducer's identity when the reducer is
a plain add/multiply/max/min/and/or (`classify_reducer`), and the reduce's init value is combined
once, at the end, unless it is that identity as a constant; other reducers (variadic ones such as
argmax) start from the init values, as XLA's do.
"""

from __future__ import annotations

import math

from hlo_codegen.emitters.base import KernelParams
from hlo_codegen.emitters.common import (
    FusedValues, ThreadIds, emit_epilogue, linear_index, root_outputs,
)
from hlo_codegen.emitters.launch import H100, GpuDeviceInfo, split_grid_x
from hlo_codegen.emitters.reduction import Accumulator, ReductionFusion, reduce_hero
from hlo_codegen.indexing import IndexingMap, LaunchDimensions, Variable, bitcast_map, const, dim, sym
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Buffer, Kernel, Value
from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
from hlo_common.gpu.reduction_utils import is_real_reduction_hero
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape

WARP = 32
TILE = 32  # XLA's kTileSize of the column emitters

# thread / block dims of the 6-dim grid maps (th_x, th_y, th_z, bl_x, bl_y, bl_z)
TH, BX, BY, BZ = dim(0), dim(3), dim(4), dim(5)


def _identity(kind: str, t: str, et=None):
    """The identity of a classified reducer in kernel-IR type `t` of HLO type `et` (None if
    there is none)."""
    is_f = t in ("f16", "bf16", "f32", "f64") or t.startswith("f8")
    if kind == "add":
        return -0.0 if is_f else 0
    if kind == "multiply":
        return 1.0 if is_f else 1
    if kind == "or":
        return 0
    if kind == "and":
        return 1 if t == "i1" else -1
    if kind in ("maximum", "minimum"):
        if is_f:
            return -math.inf if kind == "maximum" else math.inf
        if et is None or not et.is_integer or et.bits < 8:
            return None
        if et.is_signed:
            return -(1 << (et.bits - 1)) if kind == "maximum" else (1 << (et.bits - 1)) - 1
        return 0 if kind == "maximum" else -1  # all ones
    return None


def kept_shape(reduce: HloInstruction) -> Shape:
    """The reduce's output dims with the operand's layout (how the kept elements lie in it)."""
    op = reduce.operands[0].shape
    reduced = set(reduce.attrs["dimensions"])
    kept = [d for d in range(op.rank) if d not in reduced]
    m2m = tuple(kept.index(d) for d in op.minor_to_major if d in kept)
    return Shape.array(op.element_type, [op.dims[d] for d in kept], m2m)


class _Hero:
    """One reduction hero: its accumulators' types, reducer and starting values."""

    def __init__(self, acc, reduce: HloInstruction, roots: list):
        self.acc = acc  # reduction.Accumulator
        self.reduce = reduce
        self.roots = roots  # (root, buffers, shapes)
        self.n = acc.n
        self.identity = None
        if acc.kind is not None:
            ident = _identity(acc.kind, acc.wide[0], reduce.operands[0].shape.element_type)
            if ident is not None:
                self.identity = ident
        self.fold_init = self.identity is not None and not self._init_is_identity()

    def _init_is_identity(self) -> bool:
        init = self.reduce.operands[1]
        if init.opcode != "constant" or self.identity is None or init.literal is None:
            return False
        try:
            v = complex(init.literal.reshape(-1)[0]) if hasattr(init.literal, "reshape") else None
        except (TypeError, ValueError):
            return False
        return v is not None and v.imag == 0 and v.real == float(self.identity)


class TiledReductionFusion(ReductionFusion):
    """See the module docstring."""

    kind = "reduction"

    def __init__(self, fusion: HloInstruction, device: GpuDeviceInfo = H100,
                 analysis: FusionAnalysis | None = None):
        super().__init__(fusion, device)
        self.analysis = analysis or FusionAnalysis.of_fusion(fusion, device)
        a = self.analysis
        self.rd = a.reduction
        self.variant = a.reduction_emitter()
        self.groups = a.reduction_groups()
        blocks_total, threads = a.launch_dimensions()
        self.num_blocks = blocks_total // len(self.groups)
        gx, gy = split_grid_x(self.num_blocks, device)
        self.grid = (gx, gy, len(self.groups))
        self.threads = threads
        self._launch = LaunchDimensions((threads, 1, 1), self.grid)
        d0, d1, d2 = self.rd.dims
        self.shape3d = Shape.array(a.reduction_hero.operands[0].shape.element_type, [d0, d1, d2])
        self._configure()

    def launch_dimensions(self) -> LaunchDimensions:
        return self._launch

    # -- per-variant parameters -----------------------------------------------------------------------
    def _configure(self) -> None:
        a, (d0, d1, d2) = self.analysis, self.rd.dims
        v = self.variant
        if v == "multi_row":
            self.vector = a._multi_row_vector()
            self.red_t = d2 // self.vector
            self.kept_t = self.threads // self.red_t
            self.lanes = 1
        elif v == "row":
            self.kept_t, self.red_t = a.row_reduction_threads()
            self.vector = a._vector_size_for_reduction(d2, self.red_t)
            self.tile = a.row_reduction_tile(self.red_t, self.vector)
            self.blocks_minor = -(-(d2 // self.vector) // (self.tile * self.red_t))
            self.lanes = 1
        elif v == "column":
            self.vector = a._vector_size_for_reduction(d2, WARP)
            self.blocks_minor = -(-d2 // (TILE * self.vector))
            self.lanes = self.vector
        else:
            self.vector, self.shared_rows, _ = a.small_column_config()
            self.lanes = self.vector

    def _block(self):
        """Linear block id within the group (x + gx * y)."""
        return BX + BY * self.grid[0] if self.grid[1] > 1 else BX

    def _per_thread_map(self) -> tuple[list[int], object, list]:
        """(sizes of the per-thread loop's symbols, index_of(symbols, s) -> 3-d input index with
        s the vector lane, bounds over the grid dims and the symbols sym(0), sym(1), ...); the
        vector lane never needs a bound (the vector size divides the minor dimension)."""
        d0, d1, d2 = self.rd.dims
        v, th, blk = self.vector, TH, self._block()
        cons = [(blk, Interval(0, self.num_blocks - 1))] if self.grid[1] > 1 else []
        if self.variant == "multi_row":
            t0, t1 = th.floordiv(self.red_t), th % self.red_t
            row = blk * self.kept_t + t0
            cons.append((row, Interval(0, d1 - 1)))
            return [d0], lambda S, s: [S[0], row, t1 * v + s], cons
        if self.variant == "row":
            t0, t1 = th.floordiv(self.red_t), th % self.red_t
            b0, b1 = blk.floordiv(self.blocks_minor), blk % self.blocks_minor
            row = b0 * self.kept_t + t0

            def minor(S):  # in vectors
                return b1 * (self.tile * self.red_t) + S[1] * self.red_t + t1
            cons += [(row, Interval(0, d1 - 1)), (minor([sym(0), sym(1)]), Interval(0, d2 // v - 1))]
            return [d0, self.tile], lambda S, s: [S[0], row, minor(S) * v + s], cons
        if self.variant == "column":
            t0, t1 = th.floordiv(TILE), th % TILE
            b0, b1 = blk.floordiv(self.blocks_minor), blk % self.blocks_minor
            col = b1 * TILE + t1  # in vectors
            cons += [(b0, Interval(0, d0 - 1)), (col, Interval(0, d2 // v - 1)),
                     (t0 + sym(0) * TILE, Interval(0, d1 - 1))]
            return [-(-d1 // TILE)], lambda S, s: [b0, t0 + S[0] * TILE, col * v + s], cons

        def lin(S):  # small column: vectors of the reduced x kept plane, in order
            return th + S[0] * self.threads
        cons += [(blk, Interval(0, d0 - 1)), (lin([sym(0)]), Interval(0, d1 * d2 // v - 1))]
        loop = -(-(d1 * d2) // (v * self.threads))
        return ([loop], lambda S, s: [blk, (lin(S) * v + s).floordiv(d2), (lin(S) * v + s) % d2], cons)

    # -- emission -----------------------------------------------------------------------------------
    vectorize = True  # SimpleEmitter.emit vectorizes the per-thread loops' loads and stores

    def build(self, kernel: Kernel, params: KernelParams) -> None:
        outputs = root_outputs(self.fusion, params.output_buffers)
        heroes = self.analysis.heroes
        roots = self.analysis.roots
        wanted = [r for r, _, _ in outputs]
        for root, hero in zip(roots, heroes):
            if hero.opcode == "reduce":
                wanted += list(hero.operands)
        values = FusedValues(kernel, self.computation, params, wanted)
        b = IRBuilder(kernel)
        ids = ThreadIds(b, self._launch)
        by_root = {id(o[0]): o for o in outputs}
        warp = self.device.threads_per_warp
        for g, group in enumerate(self.groups):
            hs: list[_Hero] = []
            sides = []
            for root in group:
                hero = heroes[roots.index(root)]
                if hero.opcode == "reduce" and is_real_reduction_hero(root, hero, warp):
                    hero = reduce_hero(root) or hero
                    for h in hs:
                        if h.reduce is hero:
                            h.roots.append(by_root[id(root)])
                            break
                    else:
                        acc = Accumulator(kernel, values, hero, f64_sums=False)
                        hs.append(_Hero(acc, hero, [by_root[id(root)]]))
                else:
                    sides.append(by_root[id(root)])
            self._emit_group(kernel, b, ids, values, g, hs, sides)

    def _starts(self, b: IRBuilder, values: FusedValues, h: _Hero) -> list[Value]:
        if h.identity is not None:
            return [b.constant(h.identity, t) for t in h.acc.wide]
        return h.acc.widen(b, [values.at(b, op, [])[0] for op in h.reduce.operands[h.n:]])

    def _emit_group(self, kernel, b, ids, values, g, hs, sides) -> None:
        lanes = self.lanes
        starts = [self._starts(b, values, h) for h in hs]
        inits = [x for st in starts for _ in range(lanes) for x in st]
        outer, dims, inner = self._thread_loop_maps(ids)

        def outer_body(syms, idx, iters):
            def body(s, idx3, accs):
                return self._accumulate(b, values, hs, sides, s, list(idx3), list(accs))

            return b.loop(inner, list(dims) + list(syms), list(iters), body,
                          attrs={"vectorize": self.vector} if self.vector > 1 else None)

        def per_thread():
            return b.loop(outer, dims, inits, outer_body)

        if not inits and not sides:
            accs = []
        elif self.grid[2] > 1:
            in_group = self._cond(b, ids, [(BZ, g, g)])
            accs = b.if_(in_group, [v.type for v in inits], per_thread, lambda: inits)
        else:
            accs = per_thread()
        if not hs:
            return
        per = []
        k = 0
        for h in hs:
            per.append([accs[k + j * h.n:k + (j + 1) * h.n] for j in range(lanes)])
            k += lanes * h.n
        getattr(self, f"_finish_{self.variant}")(kernel, b, ids, values, g, hs, per)

    def _thread_loop_maps(self, ids: ThreadIds) -> tuple[IndexingMap, list[Value], IndexingMap]:
        """A thread's loops over its share of the reduced tile: the outer map over the thread dims
        it uses (with those ids), and the inner map from them, the outer symbols and a vector lane
        to the 3-d index of the reduction input."""
        outer_sizes, index_of, plain = self._per_thread_map()
        nsym = len(outer_sizes)
        base = index_of([sym(k) for k in range(nsym)], const(0))
        grid = [Variable(Interval(0, n - 1)) for n in self._launch.threads_xyz() + self._launch.blocks_xyz()]
        full = IndexingMap(base, grid, [Variable(Interval(0, n - 1)) for n in outer_sizes], (), plain)
        used: set[int] = set()
        for e in list(full.results) + list(full.constraints):
            used |= e.used_dims()
        used_dims = sorted(used)
        outer, dims = ids.for_map(full)
        nd = len(used_dims)
        repl = [dim(used_dims.index(i)) if i in used else None for i in range(6)]
        exprs = [e.replace(repl, [sym(0)] + [dim(nd + k) for k in range(nsym)])
                 for e in index_of([sym(1 + k) for k in range(nsym)], sym(0))]
        inner = IndexingMap(exprs, [Variable(grid[i].bounds) for i in used_dims]
                            + [Variable(Interval(0, n - 1)) for n in outer_sizes],
                            [Variable(Interval(0, self.vector - 1))])
        return outer, dims, inner

    def _accumulate(self, b: IRBuilder, values: FusedValues, hs: list[_Hero], sides: list, lane: list[Value],
                    idx3: list[Value], accs: list[Value]) -> list[Value]:
        """One element of the tile: every hero folds it into its accumulators (column kernels keep
        one per vector lane), the side outputs store it."""
        k = 0
        for h in hs:
            xs = self._read(b, values, h, idx3)
            for j in range(self.lanes):
                cur = accs[k:k + h.n]
                new = h.acc.combine(b, cur, xs)
                if self.lanes > 1:
                    hit = b.cmpi("eq", lane[0], b.index(j))
                    new = [b.select(hit, n_, c_) for n_, c_ in zip(new, cur)]
                accs[k:k + h.n] = new
                k += h.n
        for root, buffers, shapes in sides:
            at = b.apply_indexing(bitcast_map(self.shape3d, shapes[0]), idx3) if shapes[0].rank else []
            vals = values.at(b, root, at)
            linear = linear_index(b, shapes[0], at)
            for name, val in zip(buffers, vals):
                b.store(name, val, linear)
        return accs

    def _read(self, b, values, h: _Hero, idx3) -> list[Value]:
        out = []
        for op in h.reduce.operands[:h.n]:
            at = b.apply_indexing(bitcast_map(self.shape3d, op.shape), idx3) if op.shape.rank else []
            out.append(values.at(b, op, at)[0])
        return h.acc.widen(b, out)

    # -- the reduction stages -----------------------------------------------------------------------
    def _eval(self, b: IRBuilder, ids: ThreadIds, expr) -> Value:
        grid = [Variable(Interval(0, n - 1)) for n in self._launch.threads_xyz() + self._launch.blocks_xyz()]
        m, dims = ids.for_map(IndexingMap([expr], grid))
        return b.apply_indexing(m, dims)[0]

    def _cond(self, b: IRBuilder, ids: ThreadIds, conds: list) -> Value:
        """All of (expr, lo, hi) hold. The expressions are built from thread and block ids with
        +, *, floordiv and mod, so they are never negative: a lower bound 0 needs no test."""
        c = None
        for expr, lo, hi in conds:
            x = self._eval(b, ids, expr)
            parts = []
            if lo:
                parts.append(b.cmpi("sge", x, b.index(lo)))
            if hi is not None:
                parts.append(b.cmpi("sle", x, b.index(hi)))
            for p in parts:
                c = p if c is None else b.binary("andi", c, p)
        return c if c is not None else b.constant(1, "i1")

    def _group_cond(self, g: int) -> list:
        out = [(BZ, g, g)] if self.grid[2] > 1 else []
        if self.grid[1] > 1:
            out.append((self._block(), 0, self.num_blocks - 1))
        return out

    def _shuffle(self, b: IRBuilder, h: _Hero, vals: list[Value], dist: int) -> list[Value]:
        if dist < 1:
            return vals
        return b.shuffle_reduce(h.acc.reducer, vals, dist)

    def _write(self, b, ids, values, g, h: _Hero, result: list[Value], kept_linear, conds) -> None:
        """Fold in the init value, round, run each root's epilogue and store (in an if)."""
        def then():
            res = result
            if h.fold_init:
                inits = h.acc.widen(b, [values.at(b, op, [])[0] for op in h.reduce.operands[h.n:]])
                res = h.acc.combine(b, inits, res)
            final = h.acc.narrow(b, res)
            ks = kept_shape(h.reduce)
            k = self._eval(b, ids, kept_linear)
            flat = Shape.array(ks.element_type, [ks.num_elements])
            out_idx = b.apply_indexing(bitcast_map(flat, ks), [k]) if ks.rank else []
            for root, buffers, shapes in h.roots:
                vals, root_idx = emit_epilogue(values.elemental, b, h.reduce, root, final, out_idx)
                for val, name, shape in zip(vals, buffers, shapes):
                    b.store(name, val, linear_index(b, shape, root_idx))
            return []

        b.if_(self._cond(b, ids, conds + self._group_cond(g)), [], then)

    def _tile(self, kernel: Kernel, g: int, h: _Hero, k: int, n: int) -> str:
        name = f"shmem_g{g}_{h.reduce.name}_{k}".replace(".", "_").replace("-", "_")
        et = h.reduce.operands[k].shape.element_type.name
        if h.acc.wide[k] != h.acc.types[k]:
            et = h.acc.wide[k]  # widened 16/8-bit float sums keep f32 partials
        kernel.buffers.append(Buffer(name, "shared", et, n))
        return name

    def _from_tile(self, b, h: _Hero, name: str, k: int, at: Value) -> Value:
        return b.load(name, at, h.acc.wide[k])

    def _finish_multi_row(self, kernel, b, ids, values, g, hs, per) -> None:
        d1 = self.rd.dims[1]
        t0 = TH.floordiv(self.red_t)
        row = self._block() * self.kept_t + t0
        for h, lanes in zip(hs, per):
            res = self._shuffle(b, h, lanes[0], self.red_t // 2)
            self._write(b, ids, values, g, h, res, row, [(TH % self.red_t, 0, 0), (row, 0, d1 - 1)])

    def _finish_row(self, kernel, b, ids, values, g, hs, per) -> None:
        d1 = self.rd.dims[1]
        t0, t1 = TH.floordiv(self.red_t), TH % self.red_t
        b0 = self._block().floordiv(self.blocks_minor)
        row = b0 * self.kept_t + t0
        wpr = -(-self.red_t // WARP)
        reduced = [self._shuffle(b, h, lanes[0], WARP // 2) for h, lanes in zip(hs, per)]
        out_conds = [(t1, 0, 0), (row, 0, d1 - 1)]
        if wpr == 1:
            for h, res in zip(hs, reduced):
                self._write(b, ids, values, g, h, res, row, out_conds)
            return
        width = wpr + (1 if wpr % WARP == 0 else 0)
        tiles = [[self._tile(kernel, g, h, k, self.kept_t * width) for k in range(h.n)] for h in hs]
        slot_w = self._eval(b, ids, t0 * width + t1.floordiv(WARP))

        def write():
            for h, res, names in zip(hs, reduced, tiles):
                for k, name in enumerate(names):
                    b.store(name, res[k], slot_w)
            return []
        b.if_(self._cond(b, ids, [(t1 % WARP, 0, 0)] + self._group_cond(g)), [], write)
        b.sync_threads()
        lane = t1 % WARP
        has = self._cond(b, ids, [(t1, 0, wpr - 1)])
        slot_r = self._eval(b, ids, t0 * width + lane)
        for h, names in zip(hs, tiles):
            ident = self._starts(b, values, h)
            read = b.if_(has, [v.type for v in ident],
                         lambda h=h, names=names: [self._from_tile(b, h, n, k, slot_r)
                                                   for k, n in enumerate(names)],
                         lambda ident=ident: ident)
            res = self._shuffle(b, h, read, WARP // 2)
            self._write(b, ids, values, g, h, res, row, out_conds)

    def _finish_column(self, kernel, b, ids, values, g, hs, per) -> None:
        d0, d1, d2 = self.rd.dims
        v = self.vector
        t0, t1 = TH.floordiv(TILE), TH % TILE
        blk = self._block()
        b0, b1 = blk.floordiv(self.blocks_minor), blk % self.blocks_minor
        width = TILE * v + 1
        tiles = [[self._tile(kernel, g, h, k, TILE * width) for k in range(h.n)] for h in hs]
        for j in range(v):
            slot = self._eval(b, ids, t1 * width + t0 * v + j)
            for h, lanes, names in zip(hs, per, tiles):
                for k, name in enumerate(names):
                    b.store(name, lanes[j][k], slot)
        b.sync_threads()
        for j in range(v):
            slot = self._eval(b, ids, t0 * width + t1 * v + j)
            col = (b1 * TILE + t0) * v + j
            for h, names in zip(hs, tiles):
                read = [self._from_tile(b, h, n, k, slot) for k, n in enumerate(names)]
                res = self._shuffle(b, h, read, TILE // 2)
                self._write(b, ids, values, g, h, res, b0 * d2 + col,
                            [(t1, 0, 0), (col, 0, d2 - 1), (b0, 0, d0 - 1)])

    def _finish_small_column(self, kernel, b, ids, values, g, hs, per) -> None:
        d0, d1, d2 = self.rd.dims
        v, rows = self.vector, self.shared_rows
        pad = 0 if (self.threads == WARP and v == 1) else -(-d2 // (self.threads * v))
        width = d2 + pad
        tiles = [[self._tile(kernel, g, h, k, rows * width) for k in range(h.n)] for h in hs]
        for j in range(v):
            p = TH * v + j
            slot = self._eval(b, ids, p.floordiv(d2) * width + p % d2)
            for h, lanes, names in zip(hs, per, tiles):
                for k, name in enumerate(names):
                    b.store(name, lanes[j][k], slot)
        b.sync_threads()
        blk = self._block()
        for j in range(v):
            q = TH + j * self.threads
            col, r = q.floordiv(rows), q % rows
            slot = self._eval(b, ids, r * width + col)
            for h, names in zip(hs, tiles):
                read = [self._from_tile(b, h, n, k, slot) for k, n in enumerate(names)]
                res = self._shuffle(b, h, read, rows // 2)
                self._write(b, ids, values, g, h, res, blk * d2 + col,
                            [(TH % rows, 0, 0), (col, 0, d2 - 1), (blk, 0, d0 - 1)])
