"""The elemental emitter's core: subgraph functions, operand emission and memoization.

Where it sits: an emitter (hlo_codegen.emitters) creates an `ElementalEmitter` for its fusion
with the computation partition and the kernel's parameter buffers, then calls `call_root` (or
`call_instruction`) from its thread loops. Per-opcode rules live in the sibling modules and
register in `ELEMENTAL_RULES`; a rule gets a `FunctionContext`, the instruction and its output
indices (index values) and returns the element's value(s).

Subgraph functions take one index per dimension of their first root's shape and return every
leaf of every root; a root whose shape differs from the first is evaluated at the bitcast of the
index (the same physical position, as XLA's loop emitter writes multi-output fusions). Within a
function, an instruction asked for twice at the same index values is emitted once.
"""

from __future__ import annotations

from typing import Callable, Sequence

from hlo_codegen.indexing import DIM, IndexingMap, bitcast_map, logical_to_linear
from hlo_codegen.kernel_ir.builder import FunctionBuilder, IRBuilder
from hlo_codegen.kernel_ir.ir import Function, Kernel, Value
from hlo_codegen.kernel_ir.types import UnsupportedTypeError, ir_type
from hlo_codegen.partitioner import PartitionedComputation, Subgraph, partition_computation, sanitize_name
from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.shape import Shape

Rule = Callable[["FunctionContext", HloInstruction, list[Value]], "Value | list[Value]"]
ELEMENTAL_RULES: dict[str, Rule] = {}


class ElementalError(HloError):
    """An instruction the elemental emitter cannot generate code for (names it)."""


def elemental(*opcodes: str) -> Callable[[Rule], Rule]:
    """Register a rule for `opcodes` in ELEMENTAL_RULES."""
    def register(fn: Rule) -> Rule:
        for op in opcodes:
            ELEMENTAL_RULES[op] = fn
        return fn
    return register


def leaf_shapes(shape: Shape) -> list[Shape]:
    return [s for _, s in shape.leaf_shapes()]


def value_type(shape: Shape) -> str:
    try:
        return ir_type(shape.element_type.name)
    except UnsupportedTypeError as err:
        raise ElementalError(str(err)) from None


def same_layout(a: Shape, b: Shape) -> bool:
    return a.dims == b.dims and a.minor_to_major == b.minor_to_major


class ElementalEmitter:
    """Emits a fused computation's subgraphs as functions of `kernel`."""

    def __init__(self, kernel: Kernel, computation: HloComputation, param_buffers: dict[int, str],
                 partition: PartitionedComputation | None = None):
        self.kernel = kernel
        self.computation = computation
        self.param_buffers = param_buffers
        self.partition = partition or partition_computation(computation)
        self.functions: dict[int, Function] = {}
        self.scalar_functions: dict[int, Function] = {}

    # -- subgraph functions ---------------------------------------------------------------------
    def subgraph_function(self, subgraph: Subgraph) -> Function:
        fn = self.functions.get(id(subgraph))
        if fn is not None:
            return fn
        index_shape = subgraph.index_shape
        results = [value_type(s) for r in subgraph.roots for s in leaf_shapes(r.shape)]
        fb = FunctionBuilder(self.kernel, self._unique_function_name(subgraph.name),
                             ["index"] * index_shape.rank, results,
                             [f"d{i}" for i in range(index_shape.rank)])
        self.functions[id(subgraph)] = fb.function
        ctx = FunctionContext(self, fb, subgraph)
        out: list[Value] = []
        for root in subgraph.roots:
            indices = ctx.reindex(index_shape, root.shape, fb.function.args)
            out.extend(ctx.emit(root, indices))
        fb.return_(out)
        return fb.function

    def _unique_function_name(self, base: str) -> str:
        taken = {f.name for f in self.kernel.functions} | {b.name for b in self.kernel.buffers}
        name, k = base, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        return name

    def call_instruction(self, b: IRBuilder, instr: HloInstruction, indices: Sequence[Value]) -> list[Value]:
        """Leaf values of `instr` (emitted in its own subgraph's function) at `indices`."""
        subgraph = self.partition.find_subgraph(instr)
        fn = self.subgraph_function(subgraph)
        index_shape = subgraph.index_shape
        root_shape = leaf_shapes(instr.shape)[0]
        args = list(indices)
        if not same_layout(root_shape, index_shape):
            args = b.apply_indexing(bitcast_map(root_shape, index_shape), list(indices))
        results = b.call(fn, args)
        offset = 0
        for root in subgraph.roots:
            n = len(leaf_shapes(root.shape))
            if root is instr:
                return results[offset:offset + n]
            offset += n
        raise ElementalError(f"%{instr.name} is not a root of {subgraph.name}")

    def call_root(self, b: IRBuilder, indices: Sequence[Value]) -> list[Value]:
        """Every output leaf of the fused computation at `indices` of its first leaf's shape."""
        return self.call_instruction(b, self.computation.root, indices)

    # -- scalar computations (reducers, map functions) -----------------------------------------------
    def scalar_function(self, computation: HloComputation) -> Function:
        """A function of the computation's scalar parameters returning its root's leaves."""
        fn = self.scalar_functions.get(id(computation))
        if fn is not None:
            return fn
        params = computation.parameters
        for p in params:
            if p.shape.is_tuple or p.shape.rank != 0:
                raise ElementalError(f"computation {computation.name}: parameter %{p.name} is not a scalar")
        results = [value_type(s) for s in leaf_shapes(computation.root.shape)]
        fb = FunctionBuilder(self.kernel, self._unique_function_name(sanitize_name(computation.name)),
                             [value_type(p.shape) for p in params], results,
                             [sanitize_name(p.name) for p in params])
        self.scalar_functions[id(computation)] = fb.function
        sub = ElementalEmitter(self.kernel, computation, {}, partition_computation(computation))
        sub.scalar_functions = self.scalar_functions
        args = {p.parameter_number: a for p, a in zip(params, fb.function.args)}
        ctx = FunctionContext(sub, fb, None, args)
        fb.return_(ctx.emit(computation.root, []))
        return fb.function


class FunctionContext:
    """Emission state of one function: its builder, subgraph and memo (scoped like regions)."""

    def __init__(self, emitter: ElementalEmitter, builder: IRBuilder, subgraph: Subgraph | None,
                 scalar_params: dict[int, Value] | None = None):
        self.emitter = emitter
        self.b = builder
        self.subgraph = subgraph
        self.scalar_params = scalar_params
        self.memo: list[dict] = [{}]

    @property
    def kernel(self) -> Kernel:
        return self.emitter.kernel

    # -- values ----------------------------------------------------------------------------------
    def emit(self, instr: HloInstruction, indices: Sequence[Value]) -> list[Value]:
        key = (id(instr), tuple(id(v) for v in indices))
        for scope in reversed(self.memo):
            hit = scope.get(key)
            if hit is not None:
                return hit
        out = self._emit(instr, list(indices))
        self.memo[-1][key] = out
        return out

    def _emit(self, instr: HloInstruction, indices: list[Value]) -> list[Value]:
        if instr.opcode == "parameter":
            return [self.parameter(instr, indices)]
        if self.subgraph is not None and not self.subgraph.contains(instr):
            return self.emitter.call_instruction(self.b, instr, indices)
        rule = ELEMENTAL_RULES.get(instr.opcode)
        if rule is None:
            raise ElementalError(f"no elemental emission for %{instr.name} ({instr.opcode})")
        try:
            out = rule(self, instr, indices)
        except (UnsupportedTypeError, KeyError, ValueError, TypeError) as err:
            raise ElementalError(f"cannot emit %{instr.name} ({instr.opcode}): {err}") from err
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def value(self, instr: HloInstruction, indices: Sequence[Value]) -> Value:
        out = self.emit(instr, indices)
        if len(out) != 1:
            raise ElementalError(f"%{instr.name} has {len(out)} values where one is needed")
        return out[0]

    def operand(self, instr: HloInstruction, i: int, indices: Sequence[Value]) -> Value:
        return self.value(instr.operands[i], indices)

    def parameter(self, param: HloInstruction, indices: list[Value]) -> Value:
        if self.scalar_params is not None:
            return self.scalar_params[param.parameter_number]
        if param.shape.is_tuple:
            raise ElementalError(f"tuple parameter %{param.name} is not supported")
        buffer = self.emitter.param_buffers[param.parameter_number]
        return self.b.load(buffer, self.linear_index(param.shape, indices), value_type(param.shape))

    def linear_index(self, shape: Shape, indices: Sequence[Value]) -> Value:
        """Offset of the element at logical `indices` in a buffer of `shape` (layout order)."""
        if shape.rank == 0:
            return self.b.index(0)
        m = logical_to_linear(shape)
        if shape.rank == 1:
            return indices[0]
        return self.b.apply_indexing(m, list(indices))[0]

    def apply(self, m: IndexingMap, indices: Sequence[Value], symbols: Sequence[Value] = ()) -> list[Value]:
        """`m` applied to index values; identity results reuse the inputs."""
        if not symbols and all(e.kind == DIM for e in m.results):
            return [indices[e.value] for e in m.results]
        return self.b.apply_indexing(m, list(indices), list(symbols))

    def reindex(self, from_shape: Shape, to_shape: Shape, indices: Sequence[Value]) -> list[Value]:
        """Indices of `to_shape` at the same physical position as `indices` of `from_shape`."""
        if to_shape.is_tuple or same_layout(from_shape, to_shape):
            return list(indices)
        return self.apply(bitcast_map(from_shape, to_shape), indices)

    # -- regions (keep the memo scoped like the IR's regions) -------------------------------------
    def if_(self, cond: Value, result_types: list[str], then_fn: Callable[[], list[Value]],
            else_fn: Callable[[], list[Value]]) -> list[Value]:
        return self.b.if_(cond, result_types, self._scoped(then_fn), self._scoped(else_fn))

    def loop(self, m: IndexingMap, dims: Sequence[Value], inits: Sequence[Value],
             body: Callable[[list[Value], list[Value], list[Value]], Sequence[Value]]) -> list[Value]:
        def scoped(syms, idx, iters):
            self.memo.append({})
            try:
                return body(syms, idx, iters)
            finally:
                self.memo.pop()
        return self.b.loop(m, dims, inits, scoped)

    def _scoped(self, fn: Callable[[], list[Value]]) -> Callable[[], list[Value]]:
        def run() -> list[Value]:
            self.memo.append({})
            try:
                return fn()
            finally:
                self.memo.pop()
        return run
