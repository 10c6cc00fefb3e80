"""`IRBuilder`: creates kernel IR ops at an insertion point, with unique names and local CSE.

Where it sits: used by the emitters and the elemental emitter to build a `Kernel`, and by the
transforms to rewrite one. Pure ops are value-numbered per region scope, so asking twice for
`apply_indexing #map(%d0)` or `load @arg0[%i]` of a read-only buffer returns the first value.

    >>> from hlo_codegen.kernel_ir.ir import Kernel
    >>> k = Kernel("k")
    >>> b = IRBuilder(k)
    >>> one = b.constant(1.0, "f32")
    >>> b.binary("addf", one, one) is b.binary("addf", one, one)
    True
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from hlo_codegen.indexing import IndexingMap
from hlo_codegen.kernel_ir.ir import OP_SPECS, Block, Function, Kernel, Op, Value


class NameTable:
    """Hands out value names unique within one kernel: hints as given when free, else numbered."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.counter = 0

    def fresh(self, hint: str | None = None) -> str:
        if hint:
            if hint not in self.used:
                self.used.add(hint)
                return hint
            k = 1
            while f"{hint}_{k}" in self.used:
                k += 1
            self.used.add(f"{hint}_{k}")
            return f"{hint}_{k}"
        while str(self.counter) in self.used:
            self.counter += 1
        name = str(self.counter)
        self.used.add(name)
        return name

    def reserve(self, name: str) -> None:
        self.used.add(name)


def _attr_key(value: Any):
    if isinstance(value, IndexingMap):
        return ("map", str(value))
    if isinstance(value, (list, tuple)):
        return tuple(_attr_key(v) for v in value)
    if isinstance(value, float) and value != value:
        return ("nan",)
    return value


class IRBuilder:
    """Appends ops to the current block; `region()` opens a nested block with its own CSE scope."""

    def __init__(self, kernel: Kernel, names: NameTable | None = None, block: Block | None = None):
        self.kernel = kernel
        self.names = names or kernel._names or NameTable()
        kernel._names = self.names  # one name table per kernel, shared by all builders
        self.blocks: list[Block] = [block if block is not None else kernel.body]
        self.scopes: list[dict] = [{}]
        self.constants: dict[int, object] = {}

    @property
    def block(self) -> Block:
        return self.blocks[-1]

    def value(self, type_: str, hint: str | None = None) -> Value:
        return Value(self.names.fresh(hint), type_)

    @contextmanager
    def region(self, block: Block) -> Iterator[Block]:
        self.blocks.append(block)
        self.scopes.append({})
        try:
            yield block
        finally:
            self.blocks.pop()
            self.scopes.pop()

    # -- generic creation --------------------------------------------------------------------
    def op(self, name: str, operands: Sequence[Value] = (), result_types: Sequence[str] = (),
           attrs: dict | None = None, regions: Sequence[Block] = (), hint: str | Sequence[str] | None = None,
           cse: bool = True) -> Op:
        attrs = dict(attrs or {})
        key = None
        if cse and not regions and self._cse_able(name, attrs):
            key = (name, tuple(id(v) for v in operands), tuple(result_types),
                   tuple(sorted((k, _attr_key(v)) for k, v in attrs.items())))
            for scope in reversed(self.scopes):
                hit = scope.get(key)
                if hit is not None:
                    return hit
        hints = list(hint) if isinstance(hint, (list, tuple)) else [hint] * len(result_types)
        results = [self.value(t, h) for t, h in zip(result_types, hints)]
        op = Op(name, list(operands), results, attrs, list(regions))
        self.block.ops.append(op)
        if key is not None:
            self.scopes[-1][key] = op
        return op

    def _cse_able(self, name: str, attrs: dict) -> bool:
        spec = OP_SPECS.get(name)
        if spec is None:
            return False
        if name == "load":
            buffer = attrs.get("buffer")
            try:
                b = self.kernel.buffer(buffer)
            except KeyError:
                return False
            return b.kind == "global" or (b.kind == "param" and not b.written)
        return spec.kind == "pure"

    def forget_loads(self) -> None:
        """Drop remembered loads (after a barrier, shared memory may hold new values)."""
        for scope in self.scopes:
            for key in [k for k in scope if k[0] == "load"]:
                del scope[key]

    # -- scalar helpers ----------------------------------------------------------------------
    def constant(self, value, type_: str) -> Value:
        v = self.op("constant", (), [type_], {"value": value}).result
        self.constants[id(v)] = value
        return v

    def index(self, value: int) -> Value:
        return self.constant(int(value), "index")

    def binary(self, name: str, a: Value, b: Value, type_: str | None = None) -> Value:
        return self.op(name, (a, b), [type_ or a.type]).result

    def unary(self, name: str, a: Value, type_: str | None = None) -> Value:
        return self.op(name, (a,), [type_ or a.type]).result

    def cast(self, name: str, a: Value, type_: str) -> Value:
        if a.type == type_ and name not in ("bitcast",):
            return a
        const = self.constants.get(id(a))
        if const is not None and name == "extf":  # widening a float constant is exact
            return self.constant(const, type_)
        return self.op(name, (a,), [type_]).result

    def cmpi(self, predicate: str, a: Value, b: Value) -> Value:
        return self.op("cmpi", (a, b), ["i1"], {"predicate": predicate}).result

    def cmpf(self, predicate: str, a: Value, b: Value) -> Value:
        return self.op("cmpf", (a, b), ["i1"], {"predicate": predicate}).result

    def select(self, cond: Value, a: Value, b: Value) -> Value:
        if a is b:
            return a
        return self.op("select", (cond, a, b), [a.type]).result

    def apply_indexing(self, map_: IndexingMap, dims: Sequence[Value], symbols: Sequence[Value] = (),
                       hints: Sequence[str] | None = None) -> list[Value]:
        if map_.num_dims != len(dims) or map_.num_symbols != len(symbols):
            raise ValueError(f"apply_indexing: {len(dims)} dims / {len(symbols)} symbols for {map_}")
        return self.op("apply_indexing", list(dims) + list(symbols), ["index"] * map_.num_results,
                       {"map": map_}, hint=list(hints) if hints else None).results

    def load(self, buffer: str, index: Value, type_: str, hint: str | None = None) -> Value:
        return self.op("load", (index,), [type_], {"buffer": buffer}, hint=hint).result

    def store(self, buffer: str, value: Value, index: Value) -> None:
        self.op("store", (value, index), [], {"buffer": buffer}, cse=False)

    def atomic_rmw(self, buffer: str, index: Value, value: Value, combiner: Function,
                   kind: str | None = None) -> None:
        """Atomically `buffer[index] = combiner(buffer[index], value)` (see ir.py's OP_SPECS)."""
        attrs = {"buffer": buffer, "callee": combiner.name}
        if kind is not None:
            attrs["kind"] = kind
        self.op("atomic_rmw", (index, value), [], attrs, cse=False)

    def call(self, function: Function, args: Sequence[Value]) -> list[Value]:
        return self.op("call", list(args), list(function.result_types), {"callee": function.name}).results

    def thread_id(self, dim: str, size: int) -> Value:
        return self.op("thread_id", (), ["index"], {"dim": dim, "range": [0, size - 1]},
                       hint=f"th_{dim}").result

    def block_id(self, dim: str, size: int) -> Value:
        return self.op("block_id", (), ["index"], {"dim": dim, "range": [0, size - 1]},
                       hint=f"bl_{dim}").result

    def yield_(self, values: Sequence[Value] = ()) -> None:
        self.op("yield", list(values), [], cse=False)

    def return_(self, values: Sequence[Value] = ()) -> None:
        self.op("return", list(values), [], cse=False)

    def sync_threads(self) -> None:
        self.op("sync_threads", (), [], cse=False)
        self.forget_loads()

    def shuffle_reduce(self, reducer: Function, values: Sequence[Value],
                       max_distance: int = 16) -> list[Value]:
        return self.op("shuffle_reduce", list(values), [v.type for v in values],
                       {"callee": reducer.name, "max_distance": max_distance}, cse=False).results

    # -- regions -----------------------------------------------------------------------------
    LoopBody = Callable[[list[Value], list[Value], list[Value]], Sequence[Value]]

    def loop(self, map_: IndexingMap, dims: Sequence[Value], inits: Sequence[Value],
             body: LoopBody, symbol_hints: Sequence[str] | None = None,
             index_hints: Sequence[str] | None = None, attrs: dict | None = None) -> list[Value]:
        """`loop`: for every symbol tuple of `map_`'s range variables whose point lies in the
        domain, run `body(symbols, indices, iter_args) -> new iter values`; returns the finals."""
        if map_.num_dims != len(dims) or map_.rt_vars:
            raise ValueError(f"loop: {len(dims)} dims for {map_} (runtime variables not allowed)")
        sym_hints = list(symbol_hints or [v.name or None for v in map_.range_vars])
        idx_hints = list(index_hints or [None] * map_.num_results)
        block = Block()
        block.args = ([self.value("index", h) for h in sym_hints]
                      + [self.value("index", h) for h in idx_hints]
                      + [self.value(v.type, "iter") for v in inits])
        op = self.op("loop", list(dims) + list(inits), [v.type for v in inits],
                     dict(attrs or {}, map=map_), [block], cse=False)
        ns, nr = len(map_.range_vars), map_.num_results
        with self.region(block):
            new = list(body(block.args[:ns], block.args[ns:ns + nr], block.args[ns + nr:]))
            self.yield_(new)
        return op.results

    def if_(self, cond: Value, result_types: Sequence[str], then_fn: Callable[[], Sequence[Value]],
            else_fn: Callable[[], Sequence[Value]] | None = None) -> list[Value]:
        then_block, else_block = Block(), Block()
        op = self.op("if", [cond], list(result_types), {}, [then_block, else_block], cse=False)
        with self.region(then_block):
            self.yield_(list(then_fn()))
        with self.region(else_block):
            self.yield_(list(else_fn()) if else_fn is not None else [])
        return op.results


class FunctionBuilder(IRBuilder):
    """Builds a subgraph function of a kernel (added to `kernel.functions`)."""

    def __init__(self, kernel: Kernel, name: str, arg_types: Sequence[str], result_types: Sequence[str],
                 arg_hints: Sequence[str] | None = None):
        super().__init__(kernel, block=Block())
        hints = list(arg_hints or [None] * len(arg_types))
        args = [self.value(t, h) for t, h in zip(arg_types, hints)]
        self.function = Function(name, args, list(result_types), self.blocks[0])
        kernel.functions.append(self.function)
