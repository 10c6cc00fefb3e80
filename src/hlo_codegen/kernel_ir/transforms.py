"""Kernel IR transforms run after emission: inlining, dead-code elimination, vectorization.

Where it sits: emitters call `optimize_kernel` before returning a kernel (XLA runs the same
steps as MLIR passes: inliner, CSE/DCE, `vectorize_loads_stores`).

- `inline_calls`: a subgraph function called exactly once is inlined (as XLA's inliner does);
  functions called more often stay functions (LLVM may still inline them).
- `eliminate_common_subexpressions`: value numbering of pure ops and read-only loads.
- `eliminate_dead_code`: removes pure ops, loads and side-effect-free loops/ifs whose results
  are unused.
- `vectorize_loops`: a `loop` marked `vectorize = v` (one range variable, the unroll index s in
  [0, v-1], unconstrained) turns each load from a read-only buffer and each store to a written
  parameter whose index is `base + s` with `base` a multiple of v (proved by composing the
  `apply_indexing` chain symbolically and simplifying) into one vector load before the loop
  (`vector.extract` inside) or a `vector.insert` into an iter_arg and one vector store after it.
"""

from __future__ import annotations

import re

from hlo_codegen.indexing import IndexingMap, const, sym
from hlo_codegen.indexing.affine import AffineExpr
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import OP_SPECS, Block, Kernel, Op, Value, hlo_bits
from hlo_codegen.kernel_ir.types import ir_type, vector_type


def _all_blocks(kernel: Kernel) -> list[Block]:
    out = []

    def visit(block: Block) -> None:
        out.append(block)
        for op in block.ops:
            for r in op.regions:
                visit(r)

    visit(kernel.body)
    for f in kernel.functions:
        visit(f.body)
    return out


def _replace_uses(kernel: Kernel, subst: dict[int, Value]) -> None:
    def resolve(v: Value) -> Value:
        while id(v) in subst:
            v = subst[id(v)]
        return v

    for block in _all_blocks(kernel):
        for op in block.ops:
            op.operands = [resolve(v) for v in op.operands]


def _clone_ops(kernel: Kernel, ops: list[Op], mapping: dict[int, Value]) -> list[Op]:
    names = kernel._names

    def fresh(v: Value) -> Value:
        new = Value(names.fresh(v.name), v.type)
        mapping[id(v)] = new
        return new

    def clone(op: Op) -> Op:
        operands = [mapping.get(id(v), v) for v in op.operands]
        regions = []
        for r in op.regions:
            args = [fresh(a) for a in r.args]
            regions.append(Block(args, [clone(x) for x in r.ops]))
        return Op(op.name, operands, [fresh(r) for r in op.results], dict(op.attrs), regions)

    return [clone(op) for op in ops]


def inline_calls(kernel: Kernel) -> None:
    """Inline every function that is called exactly once (and is not a shuffle reducer)."""
    counts: dict[str, int] = {}
    for block in _all_blocks(kernel):
        for op in block.ops:
            if op.name in ("call", "shuffle_reduce", "atomic_rmw"):  # only calls are inlined
                bump = 1 if op.name == "call" else 2
                counts[op.attrs["callee"]] = counts.get(op.attrs["callee"], 0) + bump
    subst: dict[int, Value] = {}

    def process(block: Block) -> None:
        work, out = list(block.ops), []
        while work:
            op = work.pop(0)
            if op.name == "call" and counts.get(op.attrs["callee"]) == 1:
                f = kernel.function(op.attrs["callee"])
                mapping = {id(a): v for a, v in zip(f.args, op.operands)}
                cloned = _clone_ops(kernel, f.body.ops[:-1], mapping)
                ret = f.body.ops[-1]
                for r, v in zip(op.results, ret.operands):
                    subst[id(r)] = mapping.get(id(v), v)
                counts[op.attrs["callee"]] = 0
                work = cloned + work
                continue
            for r in op.regions:
                process(r)
            out.append(op)
        block.ops = out

    process(kernel.body)
    for f in kernel.functions:
        if counts.get(f.name, 0):
            process(f.body)
    kernel.functions = [f for f in kernel.functions if counts.get(f.name, 0) > 0]
    _replace_uses(kernel, subst)


def _cse_key(kernel: Kernel, op: Op):
    spec = OP_SPECS[op.name]
    if op.regions or not op.results:
        return None
    if op.name == "load":
        b = kernel.buffer(op.attrs["buffer"])
        if not (b.kind == "global" or (b.kind == "param" and not b.written)):
            return None
    elif spec.kind != "pure":
        return None
    attrs = tuple(sorted((k, str(v)) for k, v in op.attrs.items()))
    return (op.name, tuple(id(v) for v in op.operands), tuple(r.type for r in op.results), attrs)


def eliminate_common_subexpressions(kernel: Kernel) -> None:
    """Value-number pure ops (and read-only loads), scoped by regions."""
    subst: dict[int, Value] = {}

    def resolve(v: Value) -> Value:
        while id(v) in subst:
            v = subst[id(v)]
        return v

    def process(block: Block, scopes: list[dict]) -> None:
        table: dict = {}
        scopes = scopes + [table]
        out = []
        for op in block.ops:
            op.operands = [resolve(v) for v in op.operands]
            for r in op.regions:
                process(r, scopes)
            key = _cse_key(kernel, op)
            hit = next((s[key] for s in reversed(scopes) if key is not None and key in s), None)
            if hit is not None:
                for a, b in zip(op.results, hit.results):
                    subst[id(a)] = b
                continue
            if key is not None:
                table[key] = op
            out.append(op)
        block.ops = out

    process(kernel.body, [])
    for f in kernel.functions:
        process(f.body, [])


def rename_values(kernel: Kernel) -> None:
    """Renumber builder-numbered values (`%12`, `%3_1`) in program order; hint names stay."""
    from hlo_codegen.kernel_ir.builder import NameTable

    numbered = re.compile(r"^\d+(_\d+)*$")
    counter = [0]
    names = NameTable()

    def visit_value(v: Value) -> None:
        if numbered.match(v.name):
            v.name = str(counter[0])
            counter[0] += 1
        names.reserve(v.name)

    def visit(block: Block) -> None:
        for a in block.args:
            visit_value(a)
        for op in block.ops:
            for r in op.regions:
                visit(r)
            for r in op.results:
                visit_value(r)

    for f in kernel.functions:
        for a in f.args:
            visit_value(a)
        visit(f.body)
    visit(kernel.body)
    names.counter = counter[0]
    kernel._names = names


def _has_effects(op: Op) -> bool:
    spec = OP_SPECS[op.name]
    if op.name in ("store", "atomic_rmw") or spec.kind == "sync":
        return True
    return any(_has_effects(x) for r in op.regions for x in r.ops)


def eliminate_dead_code(kernel: Kernel) -> None:
    """Remove unused pure ops, loads and effect-free loops/ifs (to a fixed point)."""
    while True:
        used: set[int] = set()
        for block in _all_blocks(kernel):
            for op in block.ops:
                used.update(id(v) for v in op.operands)
        removed = False
        for block in _all_blocks(kernel):
            keep = []
            for op in block.ops:
                spec = OP_SPECS[op.name]
                dead = (op.results and not any(id(r) in used for r in op.results)
                        and (spec.kind in ("pure", "memory") and op.name != "store"
                             or op.name in ("loop", "if")) and not _has_effects(op))
                if dead:
                    removed = True
                else:
                    keep.append(op)
            block.ops = keep
        if not removed:
            return


# -- vectorization -----------------------------------------------------------------------------------
def _storage_bits(hlo_type: str) -> int:
    return 8 if hlo_type == "pred" else hlo_bits(hlo_type)  # pred is a byte in memory


def _vector_element_ok(kernel: Kernel, buffer: str, lanes: int) -> bool:
    """pred vectorizes as its bytes (a vector<N x i1> value loaded as N bytes, as XLA loads
    vector<N x i8>); sub-byte packed and complex elements do not."""
    b = kernel.buffer(buffer)
    if b.packed or b.hlo_type.startswith("c"):
        return False
    bits = _storage_bits(b.hlo_type)
    # XLA's vectorize_loads_stores takes 2, 4 or 8 lanes of any vector element type; wider than
    # 16 bytes (4 x 64-bit) LLVM splits into 16-byte accesses
    return bits >= 8 and lanes * bits // 8 <= 32


def _simplify(expr: AffineExpr, m: IndexingMap) -> AffineExpr:
    return IndexingMap([expr], m.dim_vars, m.range_vars).simplify().results[0]


def _base_if_contiguous(expr: AffineExpr, m: IndexingMap, lanes: int) -> AffineExpr | None:
    """expr(s=0) if expr == expr(s=0) + s and expr(s=0) is a multiple of `lanes`."""
    base = _simplify(expr.replace(None, [const(0)]), m)
    if not _simplify(expr - base - sym(0), m).is_const(0):
        return None
    if base.is_multiple_of(lanes) or _simplify(base % lanes, m).is_const(0):
        return base
    return None


def _track(body: Block, m: IndexingMap) -> dict[int, AffineExpr]:
    """Symbolic index expressions (over the loop map's dims and symbol) of the body's values."""
    nr = m.num_results
    exprs: dict[int, AffineExpr] = {id(body.args[0]): sym(0)}
    for k in range(nr):
        exprs[id(body.args[1 + k])] = m.results[k]
    for op in body.ops:
        if op.name == "constant" and op.result.type == "index":
            exprs[id(op.result)] = const(int(op.attrs["value"]))
        elif op.name == "apply_indexing" and all(id(v) in exprs for v in op.operands):
            am: IndexingMap = op.attrs["map"]
            args = [exprs[id(v)] for v in op.operands]
            dims, syms = args[:am.num_dims], args[am.num_dims:]
            for r, e in zip(op.results, am.results):
                exprs[id(r)] = _simplify(e.replace(dims, syms), m)
    return exprs


def _vectorize(kernel: Kernel, parent: Block, loop: Op) -> None:
    m: IndexingMap = loop.attrs["map"]
    lanes = int(loop.attrs.pop("vectorize"))
    if (len(m.range_vars) != 1 or m.rt_vars or m.range_vars[0].bounds.lower != 0
            or m.range_vars[0].bounds.upper != lanes - 1
            or any(0 in e.used_symbols() for e in m.constraints)):
        return
    body = loop.regions[0]
    exprs = _track(body, m)
    plans = []
    for op in body.ops:
        if op.name not in ("load", "store"):
            continue
        idx = op.operands[-1]
        buf = kernel.buffer(op.attrs["buffer"])
        if id(idx) not in exprs or not _vector_element_ok(kernel, buf.name, lanes):
            continue
        if op.name == "load" and (buf.kind == "shared" or buf.written):
            continue
        if op.name == "store" and buf.kind != "param":
            continue
        base = _base_if_contiguous(exprs[id(idx)], m, lanes)
        if base is not None:
            plans.append((op, buf, base))
    if plans:
        _rewrite(kernel, parent, loop, plans, lanes)
        loop.attrs["unroll"] = True  # lanes are extracted / inserted at constant positions


def _rewrite(kernel: Kernel, parent: Block, loop: Op, plans: list, lanes: int) -> None:
    m: IndexingMap = loop.attrs["map"]
    body = loop.regions[0]
    dims = loop.operands[:m.num_dims]
    s_arg = body.args[0]
    pre = IRBuilder(kernel, block=Block())
    post = IRBuilder(kernel, block=Block())
    replace: dict[int, list[Op]] = {}
    extra_yields = []
    for op, buf, base in plans:
        elem = ir_type(buf.hlo_type)
        vty = vector_type(lanes, elem)
        align = min(lanes * max(1, _storage_bits(buf.hlo_type) // 8), 16)  # parameters: 16-byte aligned
        start = pre.apply_indexing(IndexingMap([base], m.dim_vars), dims)[0]
        if op.name == "load":
            vec = pre.op("load", [start], [vty], {"buffer": buf.name, "align": align}, cse=False).result
            replace[id(op)] = [Op("vector.extract", [vec, s_arg], op.results, {})]
            continue
        init = pre.constant(0, vty)
        acc = Value(kernel._names.fresh("vec"), vty)
        body.args.append(acc)
        loop.operands.append(init)
        new = Value(kernel._names.fresh("vec"), vty)
        replace[id(op)] = [Op("vector.insert", [op.operands[0], acc, s_arg], [new], {})]
        extra_yields.append(new)
        result = Value(kernel._names.fresh("vec"), vty)
        loop.results.append(result)
        post.op("store", [result, start], [], {"buffer": buf.name, "align": align}, cse=False)
    new_ops = []
    for op in body.ops:
        if op.name == "yield":
            op.operands = op.operands + extra_yields
        new_ops.extend(replace.get(id(op), [op]))
    body.ops = new_ops
    at = parent.ops.index(loop)
    parent.ops[at:at + 1] = pre.block.ops + [loop] + post.block.ops


def vectorize_loops(kernel: Kernel) -> None:
    """Vectorize the loads and stores of every loop marked `vectorize` (see the module doc)."""
    for block in _all_blocks(kernel):
        for op in list(block.ops):
            if op.name == "loop" and "vectorize" in op.attrs:
                _vectorize(kernel, block, op)


def optimize_kernel(kernel: Kernel, vectorize: bool = True) -> Kernel:
    """inline_calls + vectorize_loops + eliminate_dead_code, in place; returns the kernel."""
    inline_calls(kernel)
    eliminate_common_subexpressions(kernel)
    if vectorize:
        vectorize_loops(kernel)
    else:
        for block in _all_blocks(kernel):
            for op in block.ops:
                op.attrs.pop("vectorize", None)
    eliminate_dead_code(kernel)
    rename_values(kernel)
    return kernel
