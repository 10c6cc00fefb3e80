"""The normalization emitter: softmax, log-softmax, layernorm and RMSNorm in one kernel (what
XLA:GPU does with Triton; our own design, no Triton).

Where it sits: emitters/__init__.py picks it for kCustom fusions with backend kind "__norm",
which hlo-opt's `normalization-fusion` pass (hlo_opt/passes/normalization_fusion.py) forms. Their
fused computation holds full arrays of dims D (default layout), reduces over the last (minor)
dimension to one value per row, row ops on those, broadcasts back, elementwise ops, one root of
dims D.

The kernel (launch: `hlo_common.gpu.launch_dimensions.normalization_launch`):

- block (T, R): T threads per row (a power of two, 32..1024, so each thread keeps at most
  E = ceil(n / T) <= 8 elements of a row), R rows per block (R = 128 / T for short rows: one warp
  per row); grid = ceil(rows / R) blocks. Thread x holds the row's columns x, x + T, ...,
  x + (E-1) T (coalesced loads); out-of-range columns and rows are clamped for loading and
  masked out of reductions and stores, so no thread leaves early (barriers stay uniform).
- every value is computed elementally per column slot, in straight-line code, with one memo per
  slot: an input element is loaded once and kept (in registers on the GPU; the host backend keeps
  values that cross a barrier in per-thread arrays), intermediate values too.
- each reduce, in the fused computation's order: the thread folds its slots (in slot order,
  masked), `shuffle_reduce` folds the warp's 32 partials (tree order, with a "has a value" flag
  for lanes past the row's end), lane 0 of each warp writes its warp's value to a shared array
  (one per reduce, R x T/32 elements), `sync_threads`, and every thread folds the row's T/32 warp
  values in warp order, then `reducer(init, total)`. The result is injected as the reduce's
  value for the rest of the kernel (the later reductions and the root read it).
- the root is computed per slot and stored once.

Accumulation is in the reduce's own type, bf16/f16 sums and products in f32 (rounded once);
after float normalization the sums of bf16 modules are f32 already.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hlo_codegen.elemental.convert import down
from hlo_codegen.elemental.emitter import value_type
from hlo_codegen.emitters.base import EmitterError, KernelParams, output_shapes
from hlo_codegen.emitters.common import EpilogueContext, FusedValues, SimpleEmitter, ThreadIds, \
    delinearize_values
from hlo_codegen.emitters.launch import H100, GpuDeviceInfo
from hlo_codegen.indexing import LaunchDimensions
from hlo_codegen.kernel_ir.builder import FunctionBuilder, IRBuilder
from hlo_codegen.kernel_ir.ir import Buffer, Function, Kernel, Value
from hlo_common.gpu.launch_dimensions import normalization_launch
from hlo_common.interpreter.reducers import classify_reducer
from hlo_common.hlo.ir import HloInstruction

WARP = 32
_WIDE_OPS = {"add": "addf", "multiply": "mulf"}


class _Ctx:
    """The bit of FunctionContext that `down` needs."""

    def __init__(self, b: IRBuilder):
        self.b = b


def _function(kernel: Kernel, name: str, build) -> Function:
    for f in kernel.functions:
        if f.name == name:
            return f
    return build()


class _Reducer:
    """One reduce's combiner, in its accumulation type (bf16/f16 sums and products in f32)."""

    def __init__(self, kernel: Kernel, values: FusedValues, reduce: HloInstruction):
        self.reduce = reduce
        self.type = value_type(reduce.shape)
        self.kind = classify_reducer(reduce.attrs["to_apply"])
        et = reduce.shape.element_type
        self.acc = self.type
        if self.kind in _WIDE_OPS and et.is_float and et.bits < 32:
            self.acc = "f32"
            op = _WIDE_OPS[self.kind]

            def build() -> Function:
                fb = FunctionBuilder(kernel, f"norm_{self.kind}_f32", ["f32", "f32"], ["f32"], ["lhs", "rhs"])
                fb.return_([fb.binary(op, *fb.function.args)])
                return fb.function

            self.fn = _function(kernel, f"norm_{self.kind}_f32", build)
        else:
            self.fn = values.scalar_function(reduce.attrs["to_apply"])
        self.flagged = self._flagged(kernel)

    def _flagged(self, kernel: Kernel) -> Function:
        """(a, has_a, b, has_b) -> (combined, has_a | has_b) for shuffle_reduce."""
        name = f"{self.fn.name}_flagged"

        def build() -> Function:
            t = self.acc
            fb = FunctionBuilder(kernel, name, [t, "i1", t, "i1"], [t, "i1"])
            a, has_a, b_, has_b = fb.function.args
            both = fb.call(self.fn, [a, b_])[0]
            out = fb.select(has_b, fb.select(has_a, both, b_), a)
            fb.return_([out, fb.binary("ori", has_a, has_b)])
            return fb.function

        return _function(kernel, name, build)

    def widen(self, b: IRBuilder, v: Value) -> Value:
        return v if v.type == self.acc else b.cast("extf", v, self.acc)

    def narrow(self, b: IRBuilder, v: Value) -> Value:
        return v if v.type == self.type else down(_Ctx(b), v, self.reduce.shape.element_type)

    def combine(self, b: IRBuilder, x: Value, y: Value) -> Value:
        return b.call(self.fn, [x, y])[0]


class NormalizationFusion(SimpleEmitter):
    """See the module docstring."""

    kind = "normalization"

    def __init__(self, fusion: HloInstruction, device: GpuDeviceInfo = H100):
        super().__init__(fusion, device)
        comp = self.computation
        self.reduces = [i for i in comp.post_order() if i.opcode == "reduce"]
        if not self.reduces:
            raise EmitterError(f"normalization fusion %{fusion.name} has no reduce")
        self.dims = tuple(self.reduces[0].operands[0].shape.dims)
        root = comp.root
        shapes = output_shapes(fusion)
        if root.opcode == "tuple" or len(shapes) != 1 or tuple(shapes[0].dims) != self.dims:
            raise EmitterError(f"normalization fusion %{fusion.name}: one output of dims {list(self.dims)} "
                               f"expected, got {fusion.shape}")
        for r in self.reduces:
            x = r.operands[0].shape
            if (len(r.operands) != 2 or tuple(x.dims) != self.dims
                    or list(r.attrs["dimensions"]) != [len(self.dims) - 1]
                    or classify_reducer(r.attrs["to_apply"]) is None):
                raise EmitterError(f"normalization fusion %{fusion.name}: %{r.name} is not a row "
                                   f"reduction over dims {list(self.dims)}")
        self.threads, self.rows_per_block, blocks = normalization_launch(self.dims, device)
        self.slots = -(-self.dims[-1] // self.threads)
        self._launch = LaunchDimensions((self.threads, self.rows_per_block, 1), (blocks, 1, 1))

    def launch_dimensions(self) -> LaunchDimensions:
        return self._launch

    def build(self, kernel: Kernel, params: KernelParams) -> None:
        values = FusedValues(kernel, self.computation, params, [])
        b = IRBuilder(kernel)
        row = self._thread_row(b, ThreadIds(b, self._launch))
        injected: dict[int, list[Value]] = {}
        contexts = [EpilogueContext(values.elemental, b, injected) for _ in range(self.slots)]
        several_warps = self.threads // WARP > 1
        row.lane = b.binary("remui", row.tx, b.index(WARP)) if several_warps else row.tx
        row.warp = b.binary("divui", row.tx, b.index(WARP)) if several_warps else b.index(0)
        for k_red, reduce in enumerate(self.reduces):
            injected[id(reduce)] = [self._reduce_row(kernel, values, b, row, contexts, k_red, reduce)]
        self._store_row(b, row, contexts, params.output_buffers[0])

    def _thread_row(self, b: IRBuilder, ids: ThreadIds) -> _ThreadRow:
        """The row a thread row works on (clamped to the last one, with its mask when the rows do
        not fill the blocks) and the columns of the thread's slots (clamped, masked past n)."""
        n, rows = self.dims[-1], math.prod(self.dims[:-1])
        T, R = self.threads, self.rows_per_block
        tx = ids[0]
        ty = ids[1] if R > 1 else b.index(0)
        row = b.binary("addi", b.binary("muli", ids[3], b.index(R)), ty)
        row_ok = None
        if rows % R:
            row_ok = b.cmpi("slt", row, b.index(rows))
            row = b.binary("minsi", row, b.index(rows - 1))
        row_idx = delinearize_values(b, row, list(self.dims[:-1]))
        cols, col_ok = [], []
        for k in range(self.slots):
            col = b.binary("addi", tx, b.index(k * T)) if k else tx
            if (k + 1) * T > n:
                col_ok.append(b.cmpi("slt", col, b.index(n)))
                col = b.binary("minsi", col, b.index(n - 1))
            else:
                col_ok.append(None)
            cols.append(col)
        return _ThreadRow(tx, ty, row, row_ok, row_idx, cols, col_ok)

    def _reduce_row(self, kernel: Kernel, values: FusedValues, b: IRBuilder, row: _ThreadRow,
                    contexts: list[EpilogueContext], k_red: int, reduce: HloInstruction) -> Value:
        """One row reduction: each thread folds its slots, each warp shuffles, warp totals meet
        in shared memory; every thread gets the row's value (with the init folded in)."""
        red = _Reducer(kernel, values, reduce)
        acc, has = None, None
        for k in range(self.slots):
            x = red.widen(b, contexts[k].emit(reduce.operands[0], row.row_idx + [row.cols[k]])[0])
            ok = row.col_ok[k]
            if acc is None:
                acc, has = x, (ok if ok is not None else b.constant(1, "i1"))
                continue
            both = red.combine(b, acc, x)
            if ok is None:
                acc = both
                has = b.constant(1, "i1")
            else:
                # a masked slot keeps the accumulator (slots beyond the end are the last ones)
                acc = b.select(ok, both, acc)
        warp_total = b.shuffle_reduce(red.flagged, [acc, has])[0]
        warps = self.threads // WARP
        shared = f"norm_partials{k_red}"
        kernel.buffers.append(Buffer(shared, "shared", red.acc, self.rows_per_block * warps))
        base = b.binary("muli", row.ty, b.index(warps)) if self.rows_per_block > 1 else b.index(0)
        lane0 = b.cmpi("eq", row.lane, b.index(0))

        def write():
            b.store(shared, warp_total, b.binary("addi", base, row.warp))
            return []

        b.if_(lane0, [], write)
        b.sync_threads()
        total = None
        for w in range(warps):
            v = b.load(shared, b.binary("addi", base, b.index(w)), red.acc)
            total = v if total is None else red.combine(b, total, v)
        init = red.widen(b, contexts[0].emit(reduce.operands[1], [])[0])
        return red.narrow(b, red.combine(b, init, total))

    def _store_row(self, b: IRBuilder, row: _ThreadRow, contexts: list[EpilogueContext], out) -> None:
        """The root at every slot of the row, stored where the row and the column are in range."""
        n = self.dims[-1]
        root = self.computation.root
        for k in range(self.slots):
            v = contexts[k].emit(root, row.row_idx + [row.cols[k]])[0]
            linear = b.binary("addi", b.binary("muli", row.row, b.index(n)), row.cols[k])
            ok = row.col_ok[k]
            if row.row_ok is not None:
                ok = row.row_ok if ok is None else b.binary("andi", ok, row.row_ok)
            if ok is None:
                b.store(out, v, linear)
            else:
                b.if_(ok, [], lambda v=v, linear=linear: (b.store(out, v, linear), [])[1])


@dataclass
class _ThreadRow:
    """What one thread row of a block works with: its thread ids, its row (clamped) with its mask
    (None: always in range) and index, the columns of its slots with their masks, and its lane and
    warp in the row."""

    tx: Value
    ty: Value
    row: Value
    row_ok: Value | None
    row_idx: list[Value]
    cols: list[Value]
    col_ok: list[Value | None]
    lane: Value | None = None
    warp: Value | None = None

__all__ = ["NormalizationFusion"]
