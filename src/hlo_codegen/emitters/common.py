"""Building blocks the non-loop emitters share: thread loops over a shape, fused values at an
index, output leaves per root, and the emit-optimize-verify wrapper.

Where it sits: used by emitters/{reduction,scatter,sort,in_place_dus,concatenate}.py (the
"simple but correct" kernels of the codegen issue). Everything here composes what the loop
emitter uses - `default_thread_id_indexing_map`, the `ElementalEmitter`, `IRBuilder` - with a
partition whose subgraph roots are the instructions an emitter reads directly (its hero's
operands, every fusion root), so each of them is one callable function.

    b = IRBuilder(kernel)
    ids = ThreadIds(b, launch)
    loop_over_shape(b, ids, launch, shape, lambda idx: store(...))   # one element per thread
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Hashable, Iterable, Iterator, Sequence

from hlo_codegen.elemental import ElementalEmitter, ElementalError
from hlo_codegen.elemental.emitter import FunctionContext, leaf_shapes, same_layout, value_type
from hlo_codegen.emitters.base import (
    EmitterError, KernelEmitter, KernelParams, add_kernel_params, fusion_roots,
)
from hlo_codegen.emitters.launch import loop_launch_dimensions
from hlo_codegen.indexing import (
    IndexingMap, LaunchDimensions, Variable, bitcast_map, default_thread_id_indexing_map, dim,
    logical_to_linear, reshape_map, sym,
)
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.shape_indexing import delinearize, physical_dims
from hlo_codegen.indexing.thread_indexing import THREAD_DIM_NAMES
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Kernel, Value
from hlo_codegen.kernel_ir.transforms import optimize_kernel
from hlo_codegen.kernel_ir.types import UnsupportedTypeError
from hlo_codegen.kernel_ir.verifier import verify_kernel
from hlo_codegen.partitioner import partition_computation
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape


# Elemental emission recurses a few frames per fused op along the longest operand chain, and
# priority fusion makes elementwise chains of thousands of ops (Python stops at 1000 frames, about
# 200 ops). Python-to-Python calls do not grow the C stack, so a higher limit is safe.
EMISSION_RECURSION_LIMIT = 100_000


@contextmanager
def deep_recursion(limit: int = EMISSION_RECURSION_LIMIT) -> Iterator[None]:
    """Raise Python's recursion limit to `limit` while emitting (restored afterwards)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


class ThreadIds:
    """The six thread/block id values of a launch, created on first use (unused ones stay out)."""

    def __init__(self, b: IRBuilder, launch: LaunchDimensions):
        self.b = b
        self.sizes = launch.threads_xyz() + launch.blocks_xyz()
        self.values: dict[int, Value] = {}

    def __getitem__(self, i: int) -> Value:
        v = self.values.get(i)
        if v is None:
            axis = THREAD_DIM_NAMES[i][-1]
            v = self.b.thread_id(axis, self.sizes[i]) if i < 3 else self.b.block_id(axis, self.sizes[i])
            self.values[i] = v
        return v

    def for_map(self, m: IndexingMap) -> tuple[IndexingMap, list[Value]]:
        """`m` (over the six thread dims) without its unused dims, and the id values it takes."""
        out, keep = drop_unused_dims(m)
        return out, [self[i] for i in keep]


def drop_unused_dims(m: IndexingMap) -> tuple[IndexingMap, list[int]]:
    """`m` without the dimensions no result or constraint uses, and the kept dimension numbers."""
    used: set[int] = set()
    for e in list(m.results) + list(m.constraints):
        used |= e.used_dims()
    keep = sorted(used)
    repl = [dim(keep.index(i)) if i in used else None for i in range(m.num_dims)]
    out = IndexingMap([e.replace(repl) for e in m.results], [m.dim_vars[i] for i in keep], m.range_vars,
                      m.rt_vars, [(e.replace(repl), r) for e, r in m.constraints.items()])
    return out, keep


def packing(shape: Shape) -> int:
    """Elements per byte of a packed sub-byte array (E(n) layout), else 1."""
    et = shape.element_type
    layout = shape.layout
    if et.bits < 8 and not et.is_pred and layout is not None and 0 < layout.element_size_in_bits < 8:
        return 8 // et.bits
    return 1


def has_packed_output(fusion: HloInstruction) -> bool:
    return any(packing(s) > 1 for _, s in fusion.shape.leaf_shapes())


def loop_over_shape(b: IRBuilder, ids: ThreadIds, launch: LaunchDimensions, shape: Shape,
                    body: Callable[[list[Value]], None]) -> None:
    """Every element of `shape` once, spread over the launch's threads (XLA's default thread map);
    `body(logical index values)` emits the work for one element. A packed sub-byte shape gives
    each thread whole bytes (consecutive elements in layout order), so no two threads write the
    same byte."""
    if shape.num_elements == 0:
        return
    m = default_thread_id_indexing_map(launch, packing(shape), shape).remove_unused_symbols()
    m, dims = ids.for_map(m)

    def run(syms, idx, iters):
        body(list(idx))
        return []

    b.loop(m, dims, [], run, index_hints=[f"d{i}" for i in range(m.num_results)])


def strided_loop(b: IRBuilder, thread: Value, num_threads: int, count: int,
                 body: Callable[[Value], None]) -> None:
    """for i in [thread, count) step num_threads: body(i) - a block-strided loop."""
    if count <= 0:
        return
    chunks = -(-count // num_threads)
    m = IndexingMap([sym(0) * num_threads + dim(0)], [Variable(Interval(0, num_threads - 1))],
                    [Variable(Interval(0, chunks - 1))], (),
                    [(sym(0) * num_threads + dim(0), Interval(0, count - 1))])

    def run(syms, idx, iters):
        body(idx[0])
        return []

    b.loop(m, [thread], [], run, index_hints=["i"])


def sequential_loop(b: IRBuilder, sizes: Sequence[int], inits: Sequence[Value],
                    body: Callable[[list[Value], list[Value]], Sequence[Value]]) -> list[Value]:
    """A row-major loop nest over `sizes` in one thread: body(indices, iter values) -> new values."""
    m = IndexingMap([sym(k) for k in range(len(sizes))], (), [Variable(Interval(0, n - 1)) for n in sizes])
    return b.loop(m, [], list(inits), lambda syms, idx, iters: list(body(list(idx), list(iters))))


def delinearize_values(b: IRBuilder, linear: Value, dims: Sequence[int]) -> list[Value]:
    """Row-major multi-index of `linear` in `dims`."""
    if not dims:
        return []
    if len(dims) == 1:
        return [linear]
    total = 1
    for n in dims:
        total *= n
    m = IndexingMap(delinearize(list(dims), dim(0)), [Variable(Interval(0, max(total, 1) - 1))])
    return b.apply_indexing(m, [linear])


def linear_index(b: IRBuilder, shape: Shape, idx: Sequence[Value]) -> Value:
    """Buffer offset of logical index `idx` in an array of `shape` (its layout)."""
    if shape.rank == 0:
        return b.index(0)
    if shape.rank == 1:
        return idx[0]
    return b.apply_indexing(logical_to_linear(shape), list(idx))[0]


class FusedValues:
    """Values of a fusion's instructions at index values: parameters are loads from their kernel
    buffers, anything else a call of its subgraph function (it must be a subgraph root)."""

    def __init__(self, kernel: Kernel, computation: HloComputation, params: KernelParams,
                 roots: Iterable[HloInstruction]):
        wanted = {id(r) for r in roots}
        self.params = params
        partition = partition_computation(computation, lambda instr: id(instr) in wanted)
        self.elemental = ElementalEmitter(kernel, computation, params.param_buffers, partition)

    def at(self, b: IRBuilder, instr: HloInstruction, idx: Sequence[Value]) -> list[Value]:
        if instr.opcode == "parameter":
            buffer = self.params.param_buffers[instr.parameter_number]
            return [b.load(buffer, linear_index(b, instr.shape, idx), value_type(instr.shape))]
        return self.elemental.call_instruction(b, instr, list(idx))

    def scalar_function(self, computation: HloComputation):
        return self.elemental.scalar_function(computation)


def root_outputs(fusion: HloInstruction,
                 outputs: list[str]) -> list[tuple[HloInstruction, list[str], list[Shape]]]:
    """(root, its output buffers, their shapes) for every fusion root, in output order."""
    out, k = [], 0
    for root in fusion_roots(fusion):
        shapes = leaf_shapes(root.shape)
        out.append((root, outputs[k:k + len(shapes)], shapes))
        k += len(shapes)
    return out


def aliased_parameter(params: KernelParams, instr: HloInstruction, output: str) -> bool:
    """True when `instr` is a fusion parameter whose kernel buffer is `output` (in place)."""
    return instr.opcode == "parameter" and params.param_buffers.get(instr.parameter_number) == output


def store_side_outputs(b: IRBuilder, ids: ThreadIds, launch: LaunchDimensions, values: FusedValues,
                       outputs: list[tuple[HloInstruction, list[str], list[Shape]]]) -> None:
    """Elemental loops writing `outputs` (root, buffers, shapes): one loop per element count over
    the first such root's shape (and packing), every root at the same physical position. All values of an
    element are computed before any is stored, since an output may share its buffer with a
    parameter another root reads there (XLA's in-place side outputs)."""
    groups: dict[int, list] = {}
    for out in outputs:
        groups.setdefault((out[2][0].num_elements, packing(out[2][0])), []).append(out)
    for group in groups.values():
        shape = group[0][2][0]

        def store(idx: list[Value], group=group, shape=shape) -> None:
            stores = []
            for root, buffers, shapes in group:
                at = idx
                if not same_layout(shape, shapes[0]):
                    at = b.apply_indexing(bitcast_map(shape, shapes[0]), idx) if shapes[0].rank else []
                stores.extend(zip(buffers, values.at(b, root, at)))
            linear = linear_index(b, shape, idx)
            for name, v in stores:
                b.store(name, v, linear)

        loop_over_shape(b, ids, launch, shape, store)


class SimpleEmitter(KernelEmitter):
    """A KernelEmitter whose `emit` creates the parameters, calls `build(kernel, params)`, then
    optimizes and verifies; element-type and elemental failures become EmitterErrors. Loops
    marked `vectorize` get vector loads and stores when the class sets `vectorize = True`."""

    vectorize = False

    def emit(self, argument_ids: Sequence[Hashable] | None = None) -> Kernel:
        kernel = self.new_kernel()
        params = add_kernel_params(kernel, self.fusion, argument_ids)
        with deep_recursion():
            try:
                self.build(kernel, params)
            except (ElementalError, UnsupportedTypeError) as err:
                raise EmitterError(f"fusion %{self.fusion.name}: {err}") from err
            optimize_kernel(kernel, vectorize=self.vectorize)
            verify_kernel(kernel)
        return kernel

    def build(self, kernel: Kernel, params: KernelParams) -> None:
        raise NotImplementedError


def elementwise_launch(num_elements: int, device) -> LaunchDimensions:
    """One thread per element, XLA's loop launch rule without unrolling."""
    return loop_launch_dimensions(max(num_elements, 1), 1, device)


# -- epilogues: a root computed from its hero's value ----------------------------------------------
class EpilogueContext(FunctionContext):
    """Elemental emission, inline in the kernel body, where the hero's values are given
    (XLA's injected values): asking for the hero at any index returns them."""

    def __init__(self, elemental: ElementalEmitter, b: IRBuilder, injected: dict[int, list[Value]]):
        super().__init__(elemental, b, None)
        self.injected = injected

    def _emit(self, instr: HloInstruction, indices: list[Value]) -> list[Value]:
        values = self.injected.get(id(instr))
        if values is not None:
            return values
        return super()._emit(instr, indices)


_INDEX_MOVING = ("bitcast", "reshape", "transpose", "copy")


def _is_physical_bitcast(instr: HloInstruction) -> bool:
    """The op keeps every element at its physical position (a bitcast, or a reshape, transpose or
    copy that is one), so all of its index paths to a hero reach the same element."""
    if instr.opcode == "bitcast":
        return True
    if instr.opcode not in ("reshape", "transpose", "copy") or not instr.shape.is_array:
        return False
    a, b = instr.operands[0].shape, instr.shape
    if instr.opcode == "copy" and a.minor_to_major == b.minor_to_major:
        return True
    ka = [a.dims[d] for d in physical_dims(a) if a.dims[d] != 1]
    kb = [b.dims[d] for d in physical_dims(b) if b.dims[d] != 1]
    if ka != kb:
        return False
    if instr.opcode == "reshape":
        return True
    # transposes and copies: the non-unit dims keep their physical order
    perm = instr.attrs["dimensions"] if instr.opcode == "transpose" else list(range(b.rank))
    moved = [perm[d] for d in physical_dims(b) if b.dims[d] != 1]
    return moved == [d for d in physical_dims(a) if a.dims[d] != 1]


def epilogue_nodes(root: HloInstruction, hero: HloInstruction) -> list[HloInstruction] | None:
    """The instructions between `hero` (exclusive) and `root` (inclusive) that read the hero, in
    post order, when the root can be computed from the hero's value at one element: one path of
    elementwise ops, bitcasts, reshapes, transposes, copies and get-tuple-elements (of a tuple
    hero), or several paths where every op is elementwise or a physical bitcast (so every path
    reaches the same hero element). None when there is no such path."""
    if root is hero:
        return []
    order: list[HloInstruction] = []  # post order of what `root` reads, not below the hero
    visited: set[int] = {id(root)}
    stack: list[tuple[HloInstruction, int]] = [(root, 0)]
    while stack:  # iterative: priority fusion makes chains deeper than Python's recursion limit
        node, k = stack.pop()
        if node is not hero and k < len(node.operands):
            stack.append((node, k + 1))
            op = node.operands[k]
            if id(op) not in visited:
                visited.add(id(op))
                stack.append((op, 0))
        else:
            order.append(node)
    on_path: dict[int, bool] = {}
    for node in order:
        on_path[id(node)] = node is hero or any(on_path[id(op)] for op in node.operands)
    if not on_path[id(root)]:
        return None
    nodes = [n for n in order if on_path[id(n)] and n is not hero]
    seen = {id(n) for n in nodes}
    single = all(sum(1 for op in n.operands if on_path.get(id(op))) == 1 for n in nodes) and \
        all(len([u for u in n.users if id(u) in seen]) <= 1 for n in nodes)
    for n in nodes:
        elementwise = is_elementwise(n.opcode) and n.opcode != "copy"
        if single:
            ok = elementwise or n.opcode in _INDEX_MOVING or n.opcode == "reduce-precision" or (
                n.opcode == "get-tuple-element" and n.operands[0] is hero)
        else:
            ok = elementwise or _is_physical_bitcast(n)
        if not ok:
            return None
    return nodes


def hero_to_root_index(b: IRBuilder, hero: HloInstruction, root: HloInstruction,
                       idx: list[Value]) -> list[Value]:
    """Index of the root element computed from the hero element at `idx` (along the epilogue:
    elementwise ops keep it, bitcasts, reshapes and transposes move it)."""
    nodes = epilogue_nodes(root, hero)
    if nodes is None:
        raise EmitterError(f"%{root.name} is not computed elementwise from %{hero.name}")
    # follow one path: from the hero, the first user on the path each time
    on = {id(n) for n in nodes}
    node = hero
    while node is not root:
        nxt = next(u for u in nodes if id(u) in on and any(op is node for op in u.operands))
        prev_shape = leaf_shapes(node.shape)[0] if nxt.opcode != "get-tuple-element" else nxt.shape
        idx = _move_index(b, nxt, prev_shape, idx)
        node = nxt
    return idx


def _move_index(b: IRBuilder, op: HloInstruction, prev: Shape, idx: list[Value]) -> list[Value]:
    if op.opcode == "bitcast" or (op.opcode == "copy" and prev.dims != op.shape.dims):
        if prev.num_elements != op.shape.num_elements:
            raise EmitterError(f"%{op.name}: bitcast between different sizes")
        return b.apply_indexing(bitcast_map(prev, op.shape), idx) if op.shape.rank else []
    if op.opcode == "reshape" and prev.dims != op.shape.dims:
        return b.apply_indexing(reshape_map(op.shape.dims, prev.dims), idx) if op.shape.rank else []
    if op.opcode == "transpose":
        return [idx[p] for p in op.attrs["dimensions"]]
    return idx


def emit_epilogue(elemental: ElementalEmitter, b: IRBuilder, hero: HloInstruction, root: HloInstruction,
                  hero_values: list[Value], hero_idx: list[Value]) -> tuple[list[Value], list[Value]]:
    """(root values, root index) for the hero element at `hero_idx` holding `hero_values`."""
    if root is hero:
        return hero_values, hero_idx
    ctx = EpilogueContext(elemental, b, {id(hero): hero_values})
    root_idx = hero_to_root_index(b, hero, root, hero_idx)
    return ctx.emit(root, root_idx), root_idx
