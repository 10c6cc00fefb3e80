"""The loop emitter (XLA's `LoopFusion`): one thread per output element (or `unroll` of them).

Where it sits: chosen by emitters/__init__.py for fusions whose heroes are elementwise or
index-only (multi-output fusions included). The kernel is one `loop` over XLA's default
thread-id map (launch.py sizes it) that calls the root subgraph function at the output index of
the first output and stores every output at that element's physical position. When unrolled,
the loop over the unroll index is nested inside and marked for vectorization, so contiguous
aligned loads/stores become `vector<4xT>` ones (kernel_ir.transforms).

GELU on bf16[6,512,4096] (12.6M elements, unroll 4, 24576 blocks of 128 threads) comes out as:

    loop #map0 (%th_x, %bl_x) -> () {
      %4 = apply_indexing #map1 %th_x, %bl_x : index
      %5 = load @arg0 %4 {align = 8} : vector<4xbf16>
      %vec_2 = loop #map2 (%th_x, %bl_x)[%unroll_id] -> (%d0, %d1, %d2) iter_args(%vec = %6) ... {
        %9 = vector.extract %5, %unroll_id : bf16
        ... the GELU arithmetic on %9, in f32 ...
        %vec_1 = vector.insert %31, %vec, %unroll_id : vector<4xbf16>
        yield %vec_1
      }
      store @arg1 %vec_2, %4 {align = 8}
      yield
    }

Unroll factor and launch are XLA's (ComputeLoopFusionConfig, CalculateLaunchDimensions), from
hlo_common.gpu.launch_dimensions (`loop_unroll_factor`, `loop_launch`): 128 threads per block, unroll
gcd(n, 4) from 2048 x #SMs elements on (none when a sort, dot, big reduce-window or concatenate
prevents it), at least a byte of sub-byte outputs per thread. `emit_thread_loop` /
`loop_over_shape_unrolled` are that loop for any shape; the concatenate and DUS emitters use them.

Roots of different sizes (XLA's input-slices case: several slices of one concatenate, or the
loop fallback of a multi-output triton fusion) cannot share one loop over the first output: they
are grouped by element count, the launch covers the largest group, and each group gets its own
thread loop over its first root's shape, calling each root as a subgraph root of its own.
"""

from __future__ import annotations

from typing import Callable, Hashable, Sequence

from hlo_codegen.elemental import ELEMENTAL_RULES, ElementalEmitter, ElementalError
from hlo_codegen.elemental.emitter import leaf_shapes, same_layout
from hlo_codegen.emitters.base import (
    EmitterError, KernelEmitter, add_kernel_params, fusion_roots, output_shapes,
)
from hlo_codegen.emitters.common import (
    FusedValues, ThreadIds, deep_recursion, drop_unused_dims, linear_index, loop_over_shape,
)
from hlo_codegen.emitters.launch import (
    H100, GpuDeviceInfo, loop_fusion_unroll_factor, loop_launch_dimensions, smallest_bit_width,
)
from hlo_codegen.indexing import (
    IndexingMap, LaunchDimensions, bitcast_map, default_thread_id_indexing_map, dim, logical_to_linear, sym,
)
from hlo_codegen.indexing.thread_indexing import THREAD_DIM_NAMES
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Kernel, Value
from hlo_codegen.kernel_ir.transforms import optimize_kernel
from hlo_codegen.kernel_ir.types import UnsupportedTypeError
from hlo_codegen.kernel_ir.verifier import verify_kernel
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.shape import Shape

_NOT_ELEMENTAL_HINT = {
    "reduce": "reduction", "scatter": "scatter", "sort": "sort", "dot": "gemm/triton",
    "convolution": "convolution", "reduce-window": "reduce-window", "select-and-scatter": "scatter",
}


def _check_elemental(fusion_name: str, computation: HloComputation) -> None:
    for instr in computation.instructions:
        if instr.opcode != "parameter" and instr.opcode not in ELEMENTAL_RULES:
            hint = _NOT_ELEMENTAL_HINT.get(instr.opcode)
            extra = f" (it needs a {hint} emitter)" if hint else ""
            raise EmitterError(f"no emitter for fusion %{fusion_name}: the loop emitter cannot emit "
                               f"%{instr.name} ({instr.opcode}){extra}")
        for called in instr.called_computations():
            _check_elemental(fusion_name, called)


def _check_static(fusion_name: str, shapes: list[Shape]) -> None:
    for shape in shapes:
        if any(d < 0 for d in shape.dims):
            raise EmitterError(f"fusion %{fusion_name}: dynamic shape {shape} is not supported")


def root_groups(roots: list[HloInstruction]) -> list[list[tuple[HloInstruction, int]]]:
    """(root, its first output number) grouped by the element count of the root's first leaf,
    in order of first appearance; roots of one group are written at the same physical index."""
    groups: dict[int, list[tuple[HloInstruction, int]]] = {}
    k = 0
    for root in roots:
        shapes = leaf_shapes(root.shape)
        groups.setdefault(shapes[0].num_elements, []).append((root, k))
        k += len(shapes)
    return list(groups.values())


def _reindex(b: IRBuilder, from_shape: Shape, to_shape: Shape, idx: list[Value]) -> list[Value]:
    """Indices of `to_shape` at the physical position of `idx` in `from_shape` (equal sizes)."""
    if same_layout(from_shape, to_shape):
        return idx
    return b.apply_indexing(bitcast_map(from_shape, to_shape), idx) if to_shape.rank else []


def _leaf_positions(b: IRBuilder, roots: list[HloInstruction], shape: Shape, idx: list[Value],
                    linear: Value) -> list[Value]:
    """Where each output leaf of `roots` is stored for the element at `idx` of `shape` (physical
    position `linear`). Roots are evaluated at that physical position; the further leaves of one
    multi-output root (topk's values and indices) share its first leaf's logical index, so a leaf
    laid out differently from its first leaf is stored at that index in its own layout."""
    out = []
    for root in roots:
        leaves = leaf_shapes(root.shape)
        logical = None
        for leaf in leaves:
            if same_layout(leaf, leaves[0]):
                out.append(linear)
                continue
            if leaf.dims != leaves[0].dims:
                raise EmitterError(f"%{root.name}: outputs of different dims and layouts "
                                   f"({leaves[0]}, {leaf})")
            if logical is None:
                logical = _reindex(b, shape, leaves[0], idx)
            out.append(linear_index(b, leaf, logical))
    return out


class LoopFusion(KernelEmitter):
    """XLA's loop emitter; see the module docstring."""

    kind = "loop"

    def __init__(self, fusion, device: GpuDeviceInfo = H100):
        super().__init__(fusion, device)
        self.roots = fusion_roots(fusion)
        _check_static(fusion.name, output_shapes(fusion) + [op.shape for op in fusion.operands])
        self.groups = root_groups(self.roots)
        self.indexing_shape = output_shapes(fusion)[0]
        if len(self.groups) > 1:  # roots of different sizes: the launch covers the largest
            self.indexing_shape = max((leaf_shapes(g[0][0].shape)[0] for g in self.groups),
                                      key=lambda s: s.num_elements)
        n = self.indexing_shape.num_elements
        self.unroll_factor = loop_fusion_unroll_factor(n, self.computation, self.roots, device)
        self._launch = loop_launch_dimensions(n, self.unroll_factor, device)

    def launch_dimensions(self) -> LaunchDimensions:
        return self._launch

    def for_host(self) -> LoopFusion:
        """This emitter as the host target takes it: one element per thread where every operand
        and output has elements of at least 32 bits. The host lowering runs a block's threads as
        SIMD lanes, so a thread's unrolled run of adjacent elements becomes lanes a vector length
        apart, which f32 code de-interleaves and interleaves again with two-source permutes (36 of
        the f32 GELU kernel's 342 vector instructions, 12-17% of its time); narrower elements come
        apart with cheap shifts and truncations, and the bf16 GELU ran 2% slower at unroll 1."""
        shapes = [o.shape for o in self.fusion.operands] + output_shapes(self.fusion)
        if self.unroll_factor > 1 and smallest_bit_width(shapes) >= 32:
            self.unroll_factor = 1
            self._launch = loop_launch_dimensions(self.indexing_shape.num_elements, 1, self.device)
        return self

    def thread_id_to_output_indexing(self) -> IndexingMap:
        """Thread (th_x, .., bl_z)[chunk_id, unroll_id] -> index of the first output (XLA's map)."""
        return default_thread_id_indexing_map(self._launch, self.unroll_factor, self.indexing_shape)

    def emit(self, argument_ids: Sequence[Hashable] | None = None, vectorize: bool = True) -> Kernel:
        _check_elemental(self.fusion.name, self.computation)
        kernel = self.new_kernel()
        params = add_kernel_params(kernel, self.fusion, argument_ids)
        if self.indexing_shape.num_elements == 0:
            return kernel
        with deep_recursion():
            try:
                if len(self.groups) > 1:
                    self._emit_groups(kernel, params)
                else:
                    elemental = ElementalEmitter(kernel, self.computation, params.param_buffers)
                    self._emit_body(kernel, elemental, params.output_buffers)
            except (ElementalError, UnsupportedTypeError) as err:
                raise EmitterError(f"fusion %{self.fusion.name}: {err}") from err
            optimize_kernel(kernel, vectorize=vectorize)
            verify_kernel(kernel)
        return kernel

    def _emit_body(self, kernel: Kernel, elemental: ElementalEmitter, outputs: list[str]) -> None:
        b = IRBuilder(kernel)
        m, kept = drop_unused_dims(self.thread_id_to_output_indexing().remove_unused_symbols())
        sizes = self._launch.threads_xyz() + self._launch.blocks_xyz()
        dims = []
        for i in kept:
            axis = THREAD_DIM_NAMES[i][-1]
            dims.append(b.thread_id(axis, sizes[i]) if i < 3 else b.block_id(axis, sizes[i]))
        shape = self.indexing_shape
        lin_map = logical_to_linear(shape) if shape.rank > 1 else None

        def store_element(idx: list[Value]) -> list[Value]:
            values = elemental.call_root(b, idx)
            if shape.rank == 0:
                linear = b.index(0)
            else:
                linear = b.apply_indexing(lin_map, idx)[0] if lin_map is not None else idx[0]
            positions = _leaf_positions(b, self.roots, shape, idx, linear)
            for v, name, at in zip(values, outputs, positions):
                b.store(name, v, at)
            return []

        emit_thread_loop(b, m, dims, self.unroll_factor, store_element)

    def _emit_groups(self, kernel: Kernel, params) -> None:
        """One thread loop per group of equally sized roots (see the module docstring)."""
        b = IRBuilder(kernel)
        ids = ThreadIds(b, self._launch)
        fused = FusedValues(kernel, self.computation, params, self.roots)
        outputs = params.output_buffers
        for group in self.groups:
            shape = leaf_shapes(group[0][0].shape)[0]

            def store_group(idx: list[Value], group=group, shape=shape) -> None:
                # every value before any store: an output may share its buffer with a parameter
                # another root of the group reads at this position
                linear = linear_index(b, shape, idx)
                stores = []
                for root, first in group:
                    leaves = leaf_shapes(root.shape)
                    values = fused.at(b, root, _reindex(b, shape, leaves[0], idx))
                    at = _leaf_positions(b, [root], shape, idx, linear)
                    stores.extend((outputs[first + k], v, at[k]) for k, v in enumerate(values))
                for name, v, at in stores:
                    b.store(name, v, at)

            loop_over_shape(b, ids, self._launch, shape, store_group)


def emit_thread_loop(b: IRBuilder, m: IndexingMap, dims: list[Value], unroll: int,
                     body: Callable[[list[Value]], object]) -> None:
    """The loop of a thread-id map (`m` over the id values `dims`, range variables chunk_id and
    unroll_id as `default_thread_id_indexing_map` makes them): when no constraint involves the
    unroll index, an outer loop over threads (and chunks) and an inner loop over the unroll
    index marked `vectorize` (kernel_ir.transforms turns its contiguous aligned loads and stores
    into vector ones); else one loop. `body(index values)` emits one element."""
    hints = [f"d{i}" for i in range(m.num_results)]
    names = [v.name for v in m.range_vars]

    def element(syms, idx, iters):
        body(list(idx))
        return []

    if unroll <= 1 or "unroll_id" not in names or any(
            names.index("unroll_id") in e.used_symbols() for e in m.constraints):
        b.loop(m, dims, [], element, index_hints=hints)
        return
    u = names.index("unroll_id")
    c = names.index("chunk_id") if "chunk_id" in names else None
    nd = m.num_dims
    outer_syms = [None] * len(names)
    inner_syms = [None] * len(names)
    inner_syms[u] = sym(0)
    if c is not None:
        outer_syms[c] = sym(0)
        inner_syms[c] = dim(nd)
    outer = IndexingMap((), m.dim_vars, [m.range_vars[c]] if c is not None else [], (),
                        [(e.replace(None, outer_syms), r) for e, r in m.constraints.items()])
    inner = IndexingMap([e.replace(None, inner_syms) for e in m.results],
                        list(m.dim_vars) + ([m.range_vars[c]] if c is not None else []),
                        [m.range_vars[u]])

    def outer_body(syms, idx, iters):
        b.loop(inner, dims + list(syms), [], element, index_hints=hints, attrs={"vectorize": unroll})
        return []

    b.loop(outer, dims, [], outer_body)


def loop_over_shape_unrolled(b: IRBuilder, ids: ThreadIds, launch: LaunchDimensions, shape: Shape,
                             unroll: int, body: Callable[[list[Value]], object]) -> None:
    """Every element of `shape` once over the launch's threads, `unroll` consecutive elements
    (in layout order) per thread and step (XLA's loop emitter map); see `emit_thread_loop`."""
    if shape.num_elements == 0:
        return
    m = default_thread_id_indexing_map(launch, unroll, shape).remove_unused_symbols()
    m, dims = ids.for_map(m)
    emit_thread_loop(b, m, dims, unroll, body)
