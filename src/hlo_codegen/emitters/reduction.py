"""The reduction emitter (XLA's kReduction fusions): `ReductionFusion` picks XLA's tuned kernels
or the simple ones of this module.

Where it sits: chosen by emitters/__init__.py for fusions with a "real reduction hero".
`ReductionFusion(fusion)` gives `reduction_tiled.TiledReductionFusion` (XLA's row, multi-row,
column and small-column kernels, with XLA's launch dimensions) whenever
`tiled_reduction_analysis` accepts the fusion: FusionAnalysis routes it to the reduction
emitter, the reduction is race-free (XLA splits the others before fusion), no output is a
packed sub-byte array, the input is not empty, every reduction root is an epilogue we can follow
and reducers without a known identity have constant inits. Everything else - including fusions
handed to the emitter directly that XLA's kind selection would not give it - gets
`SimpleReductionFusion`, simple but correct and deterministic:

- row reductions (the reduced dims are the minor ones, e.g. f32[1024,4096] -> f32[1024], or a
  full reduction) with at least a warp's worth of elements: one warp per output element, block
  (32, 4). Lane l accumulates elements l, l+32, ... (coalesced), then `shuffle_reduce` combines
  the 32 partials; lane 0 finishes. Each partial carries a "has a value" flag, so lanes without
  elements need no identity and the init value is combined exactly once, last-but-first:
  `reducer(init, tree)` as HloEvaluator's `reducer(init, ...)` fold.
- everything else (column reductions, short rows): one thread per output element folding
  `acc = reducer(acc, x)` from the init value over the reduced elements in row-major order
  (HloEvaluator's order).

In the simple kernels sums and products of floats accumulate wider, as the interpreter (and
XLA:CPU) do: bf16/f16/f8 in f32, f32 sums in f64, rounded once at the end (the tiled kernels sum
f32 in f32, as XLA does); integers wrap exactly, max/min/and/or run the reducer as written. Any
reducer computation (variadic included) works.

A root whose hero is the reduce gets the reduce's value injected into its unary epilogue (convert,
bitcast, reshape, ...); other roots (side outputs of the input's shape, ...) are plain elemental
loops over their own shapes.
"""

from __future__ import annotations

import math

from hlo_codegen.elemental.convert import down
from hlo_codegen.elemental.emitter import leaf_shapes, value_type
from hlo_codegen.emitters.base import KernelParams, find_hero, output_shapes, reduction_dimensions
from hlo_codegen.emitters.common import (
    FusedValues, SimpleEmitter, ThreadIds, delinearize_values, emit_epilogue, epilogue_nodes, linear_index,
    loop_over_shape, packing, root_outputs, store_side_outputs,
)
from hlo_codegen.emitters.launch import H100, GpuDeviceInfo
from hlo_codegen.indexing import IndexingMap, LaunchDimensions, Variable, dim, sym
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.shape_indexing import delinearize
from hlo_codegen.kernel_ir.builder import FunctionBuilder, IRBuilder
from hlo_codegen.kernel_ir.ir import Function, Kernel, Value
from hlo_codegen.kernel_ir.types import is_complex, is_float
from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
from hlo_common.gpu.reduction_utils import is_real_reduction_hero, reduction_is_race_free
from hlo_common.interpreter.reducers import classify_reducer
from hlo_common.hlo.ir import HloInstruction

WARP = 32
WARPS_PER_BLOCK = 4


class Accumulator:
    """How one reduce accumulates: its reducer as a kernel function, possibly in a wider type."""

    def __init__(self, kernel: Kernel, values: FusedValues, reduce: HloInstruction, f64_sums: bool = True):
        self.reduce = reduce
        self.n = len(reduce.operands) // 2
        self.types = [value_type(op.shape) for op in reduce.operands[:self.n]]
        self.kind = classify_reducer(reduce.attrs["to_apply"]) if self.n == 1 else None
        self.wide = self.types
        pt = reduce.operands[0].shape.element_type
        if self.kind in ("add", "multiply") and pt.is_float and (f64_sums or pt.bits < 32):
            self.wide = ["f64" if (pt.bits >= 32 and self.kind == "add") or pt.bits == 64 else "f32"]
        if self.wide != self.types:
            self.reducer = _binary_function(kernel, f"reduce_{self.kind}_{self.wide[0]}",
                                            "addf" if self.kind == "add" else "mulf", self.wide[0])
        else:
            self.reducer = values.scalar_function(reduce.attrs["to_apply"])

    def widen(self, b: IRBuilder, vs: list[Value]) -> list[Value]:
        return [v if t == w else b.cast("extf", v, w) for v, t, w in zip(vs, self.types, self.wide)]

    def narrow(self, b: IRBuilder, vs: list[Value]) -> list[Value]:
        pt = self.reduce.operands[0].shape.element_type
        return [v if v.type == t else down(_Ctx(b), v, pt) for v, t in zip(vs, self.types)]

    def combine(self, b: IRBuilder, acc: list[Value], xs: list[Value]) -> list[Value]:
        return b.call(self.reducer, list(acc) + list(xs))


class _Ctx:
    """The bit of FunctionContext that `down` needs."""

    def __init__(self, b: IRBuilder):
        self.b = b


def _binary_function(kernel: Kernel, name: str, op: str, t: str) -> Function:
    for f in kernel.functions:
        if f.name == name:
            return f
    fb = FunctionBuilder(kernel, name, [t, t], [t], ["lhs", "rhs"])
    fb.return_([fb.binary(op, *fb.function.args)])
    return fb.function


def _flagged_function(kernel: Kernel, acc: Accumulator) -> Function:
    """(a..., has_a, b..., has_b) -> combined partials for shuffle_reduce: a lane without a value
    contributes nothing (so no identity is needed)."""
    name = f"{acc.reducer.name}_partials"
    for f in kernel.functions:
        if f.name == name:
            return f
    types = list(acc.wide) + ["i1"]
    fb = FunctionBuilder(kernel, name, types + types, types)
    args = fb.function.args
    a, has_a, b_, has_b = args[:acc.n], args[acc.n], args[acc.n + 1:-1], args[-1]
    both = fb.call(acc.reducer, list(a) + list(b_))
    out = [fb.select(has_b, fb.select(has_a, c, y), x) for c, x, y in zip(both, a, b_)]
    fb.return_(out + [fb.binary("ori", has_a, has_b)])
    return fb.function


def reduce_hero(root: HloInstruction) -> HloInstruction | None:
    """The reduce whose value a root is computed from at one element (through a unary epilogue:
    elementwise ops, bitcasts, reshapes, transposes, copies, get-tuple-element), or None: such
    a root is written when its reduce finishes; any other root is a side output, computed
    elementally over its own shape (reading a reduce there recomputes it, slow but correct)."""
    candidates = [find_hero(root)]
    node = root
    while len(node.operands) == 1 and node.opcode != "reduce":
        node = node.operands[0]
    candidates.append(node)
    for hero in candidates:
        if hero.opcode == "reduce" and epilogue_nodes(root, hero) is not None:
            return hero
    return None


class ReductionFusion(SimpleEmitter):
    """The reduction emitter: constructing one gives XLA's tiled kernels
    (reduction_tiled.TiledReductionFusion) when `tiled_reduction_analysis` accepts the fusion,
    else the simple kernels (`SimpleReductionFusion`); both are ReductionFusions."""

    kind = "reduction"

    def __new__(cls, fusion: HloInstruction, device: GpuDeviceInfo = H100, *args, **kwargs):
        if cls is not ReductionFusion:
            return super().__new__(cls)
        from hlo_codegen.emitters.reduction_tiled import TiledReductionFusion

        if tiled_reduction_analysis(fusion, device) is not None:
            return super().__new__(TiledReductionFusion)
        return super().__new__(SimpleReductionFusion)


class SimpleReductionFusion(ReductionFusion):
    """The simple kernels of the module docstring (the fallback of `ReductionFusion`)."""

    kind = "reduction"

    def __init__(self, fusion: HloInstruction, device: GpuDeviceInfo = H100):
        super().__init__(fusion, device)
        outputs = root_outputs(fusion, [""] * len(output_shapes(fusion)))
        self.heroes: list[HloInstruction] = []
        self.hero_roots: dict[int, list[HloInstruction]] = {}
        self.side_groups: dict[tuple[int, ...], list[HloInstruction]] = {}
        for root, _, shapes in outputs:
            hero = reduce_hero(root)
            if hero is not None:
                if id(hero) not in self.hero_roots:
                    self.heroes.append(hero)
                    self.hero_roots[id(hero)] = []
                self.hero_roots[id(hero)].append(root)
            else:
                self.side_groups.setdefault(tuple(shapes[0].dims), []).append(root)
        threads = WARP * WARPS_PER_BLOCK
        work = [self._out_elements(h) * (WARP if self._by_warp(h) else 1) for h in self.heroes]
        work += [math.prod(dims) for dims in self.side_groups]
        blocks = max(1, -(-max(work + [1]) // threads))
        self._launch = LaunchDimensions((WARP, WARPS_PER_BLOCK, 1), (blocks, 1, 1))

    def launch_dimensions(self) -> LaunchDimensions:
        return self._launch

    @staticmethod
    def _out_elements(reduce: HloInstruction) -> int:
        shape = reduce.shape.tuple_shapes[0] if reduce.shape.is_tuple else reduce.shape
        return shape.num_elements

    @staticmethod
    def _reduced_sizes(reduce: HloInstruction) -> list[int]:
        dims = reduce.operands[0].shape.dims
        return [dims[d] for d in sorted(reduce.attrs["dimensions"])]

    def _by_warp(self, reduce: HloInstruction) -> bool:
        """Row reductions of at least a warp's elements (and no packed output: lanes 0 of
        neighbouring warps would write the same byte)."""
        if any(packing(s) > 1 for s in output_shapes(self.fusion)):
            return False
        is_row, _ = reduction_dimensions(reduce)
        return is_row and math.prod(self._reduced_sizes(reduce)) >= WARP

    # -- the kernel ---------------------------------------------------------------------------------
    def build(self, kernel: Kernel, params: KernelParams) -> None:
        outputs = root_outputs(self.fusion, params.output_buffers)
        wanted = [r for r, _, _ in outputs] + [op for h in self.heroes for op in h.operands]
        values = FusedValues(kernel, self.computation, params, wanted)
        b = IRBuilder(kernel)
        ids = ThreadIds(b, self._launch)
        for hero in self.heroes:
            targets = [o for o in outputs if any(o[0] is r for r in self.hero_roots[id(hero)])]
            acc = Accumulator(kernel, values, hero)
            if self._by_warp(hero):
                self._emit_by_warp(kernel, b, ids, values, acc, targets)
            else:
                loop_over_shape(b, ids, self._launch, _out_shape(hero),
                                lambda idx, acc=acc, targets=targets: self._emit_by_thread(
                                    b, values, acc, targets, idx))
        side = [o for o in outputs if any(o[0] is r for rs in self.side_groups.values() for r in rs)]
        store_side_outputs(b, ids, self._launch, values, side)

    def _input_map(self, reduce: HloInstruction) -> IndexingMap:
        """(output linear o, reduced linear r) -> input index."""
        in_dims = reduce.operands[0].shape.dims
        reduced = sorted(reduce.attrs["dimensions"])
        kept = [d for d in range(len(in_dims)) if d not in reduced]
        o_exprs = delinearize([in_dims[d] for d in kept], dim(0))
        r_exprs = delinearize([in_dims[d] for d in reduced], dim(1))
        results = [r_exprs[reduced.index(d)] if d in reduced else o_exprs[kept.index(d)]
                   for d in range(len(in_dims))]
        o, r = self._out_elements(reduce), math.prod(self._reduced_sizes(reduce))
        return IndexingMap(results, [Variable(Interval(0, max(o, 1) - 1)),
                                     Variable(Interval(0, max(r, 1) - 1))])

    def _read(self, b: IRBuilder, values: FusedValues, acc: Accumulator, idx: list[Value]) -> list[Value]:
        return acc.widen(b, [values.at(b, op, idx)[0] for op in acc.reduce.operands[:acc.n]])

    def _finish(self, b: IRBuilder, values: FusedValues, acc: Accumulator, targets, result: list[Value],
                out_idx: list[Value]) -> None:
        """Round the result, run each root's epilogue and store it."""
        hero = acc.reduce
        final = acc.narrow(b, result)
        for root, buffers, shapes in targets:
            vals, root_idx = emit_epilogue(values.elemental, b, hero, root, final, out_idx)
            for v, name, shape in zip(vals, buffers, shapes):
                b.store(name, v, linear_index(b, shape, root_idx))

    def _inits(self, b: IRBuilder, values: FusedValues, acc: Accumulator) -> list[Value]:
        return acc.widen(b, [values.at(b, op, [])[0] for op in acc.reduce.operands[acc.n:]])

    def _emit_by_thread(self, b: IRBuilder, values: FusedValues, acc: Accumulator, targets,
                        out_idx: list[Value]) -> None:
        hero = acc.reduce
        in_dims = hero.operands[0].shape.dims
        reduced = sorted(hero.attrs["dimensions"])
        sizes = [in_dims[d] for d in reduced]
        m = IndexingMap([sym(k) for k in range(len(sizes))], (),
                        [Variable(Interval(0, n - 1)) for n in sizes])

        def body(syms, red, it):
            o = iter(out_idx)
            idx = [red[reduced.index(d)] if d in reduced else next(o) for d in range(len(in_dims))]
            return acc.combine(b, it, self._read(b, values, acc, idx))

        result = b.loop(m, [], self._inits(b, values, acc), body)
        self._finish(b, values, acc, targets, result, out_idx)

    def _emit_by_warp(self, kernel: Kernel, b: IRBuilder, ids: ThreadIds, values: FusedValues,
                      acc: Accumulator, targets) -> None:
        hero = acc.reduce
        n_out, n_red = self._out_elements(hero), math.prod(self._reduced_sizes(hero))
        lanes = -(-n_red // WARP)
        th_x, th_y, bl_x = ids[0], ids[1], ids[3]
        grid = [Variable(Interval(0, WARP - 1)), Variable(Interval(0, WARPS_PER_BLOCK - 1)),
                Variable(Interval(0, self._launch.blocks_xyz()[0] - 1))]
        o_expr, r_expr = dim(2) * WARPS_PER_BLOCK + dim(1), sym(0) * WARP + dim(0)
        m = IndexingMap([o_expr, r_expr], grid, [Variable(Interval(0, lanes - 1))], (),
                        [(o_expr, Interval(0, n_out - 1)), (r_expr, Interval(0, n_red - 1))])
        in_map = self._input_map(hero)
        undef = [b.constant(complex(0, 0) if is_complex(t) else 0.0 if is_float(t) else 0, t)
                 for t in acc.wide]

        def body(syms, o_r, it):
            xs = self._read(b, values, acc, b.apply_indexing(in_map, list(o_r)))
            has = it[-1]
            both = acc.combine(b, it[:-1], xs)
            return [b.select(has, c, x) for c, x in zip(both, xs)] + [b.constant(1, "i1")]

        o = b.apply_indexing(IndexingMap([o_expr], grid), [th_x, th_y, bl_x])[0]
        has_output = b.cmpi("slt", o, b.index(n_out))
        empty = undef + [b.constant(0, "i1")]
        # Warps past the last output skip the loop instead of testing its bounds every step.
        partial = b.if_(has_output, [v.type for v in empty],
                        lambda: b.loop(m, [th_x, th_y, bl_x], empty, body), lambda: empty)
        total = b.shuffle_reduce(_flagged_function(kernel, acc), partial)
        writes = b.binary("andi", b.cmpi("eq", th_x, b.index(0)), has_output)

        def finish():
            inits = self._inits(b, values, acc)
            with_init = acc.combine(b, inits, total[:-1])
            result = [b.select(total[-1], v, i) for v, i in zip(with_init, inits)]
            out_idx = _delinearize(b, o, _out_shape(hero).dims)
            self._finish(b, values, acc, targets, result, out_idx)
            return []

        b.if_(writes, [], finish)


def _out_shape(reduce: HloInstruction):
    return reduce.shape.tuple_shapes[0] if reduce.shape.is_tuple else reduce.shape


def _delinearize(b: IRBuilder, linear: Value, dims) -> list[Value]:
    return delinearize_values(b, linear, list(dims))


def tiled_reduction_analysis(fusion: HloInstruction, device: GpuDeviceInfo = H100):
    """The FusionAnalysis when XLA's tiled emitters (reduction_tiled.py) can write `fusion`, else
    None (see the module docstring for the conditions)."""
    if any(i.opcode == "reduce" and i.operands[0].shape.num_elements == 0
           for i in fusion.fused_computation().instructions):
        return None
    analysis = FusionAnalysis.of_fusion(fusion, device)
    if analysis.emitter_kind != "reduction" or analysis.reduction is None:
        return None
    if not reduction_is_race_free(analysis.reduction, device.threads_per_warp):
        return None  # XLA splits these first (tree-reduction-rewriter); one block per row here
    if any(packing(s) > 1 for s in output_shapes(fusion)):
        return None
    if analysis.reduction_hero.operands[0].shape.num_elements == 0:
        return None
    for root, hero in zip(analysis.roots, analysis.heroes):
        if hero.opcode == "reduce" and is_real_reduction_hero(root, hero, device.threads_per_warp):
            if reduce_hero(root) is None:
                return None
            n = len(hero.operands) // 2
            # Threads start from the init values of a reducer without a known identity (as XLA's
            # do), so those must be constants (XLA's tests assume they are the identity).
            if (n > 1 or not has_identity(hero)) and \
                    any(i.opcode != "constant" for i in hero.operands[n:]):
                return None
        elif any(s.num_elements != analysis.reduction_hero.operands[0].shape.num_elements
                 or packing(s) > 1 for s in output_shapes_of(root)):
            return None
    return analysis


def has_identity(reduce: HloInstruction) -> bool:
    """The reducer is a plain op whose identity the tiled kernels start from."""
    from hlo_codegen.emitters.reduction_tiled import _identity

    kind = classify_reducer(reduce.attrs["to_apply"])
    et = reduce.operands[0].shape.element_type
    return kind is not None and _identity(kind, value_type(reduce.operands[0].shape), et) is not None


def output_shapes_of(root: HloInstruction):
    return leaf_shapes(root.shape)
