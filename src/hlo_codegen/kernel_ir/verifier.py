"""Structural checks of a kernel (the kernel IR's verifier): run after emission and transforms.

Checked: every value is defined once and before its uses in an enclosing scope; ops are known;
`sync_threads` / `shuffle_reduce` appear only directly in the kernel body; thread ids and
barriers never appear in subgraph functions; loads and stores name existing buffers (stores only
to written parameters and shared memory); calls match their callee's signature; regions end with
the right terminator and yield what their op declares; `atomic_rmw` writes a written parameter
or shared memory, has a known `kind` if any, and its combiner maps (T, T) -> T for its value
type T. Failures raise `VerificationError`.
"""

from __future__ import annotations

from hlo_codegen.kernel_ir.ir import ATOMIC_KINDS, OP_SPECS, Block, Kernel, Op, Value
from hlo_common.errors import VerificationError


class _Verifier:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.defined: set[int] = set()
        self.where = ""

    def fail(self, message: str, op: Op | None = None) -> None:
        at = f" at {op.name} {[r.name for r in op.results]}" if op is not None else ""
        raise VerificationError(f"kernel @{self.kernel.name}, {self.where}{at}: {message}")

    def define(self, values: list[Value], op: Op | None = None) -> None:
        for v in values:
            if id(v) in self.defined:
                self.fail(f"%{v.name} defined twice", op)
            self.defined.add(id(v))

    def block(self, block: Block, scope: set[int], top_level: bool, in_function: bool,
              terminator: str | None) -> None:
        local = set(scope) | {id(a) for a in block.args}
        for i, op in enumerate(block.ops):
            spec = OP_SPECS.get(op.name)
            if spec is None:
                self.fail(f"unknown op {op.name}", op)
            if spec.top_level_only and not top_level:
                self.fail("only allowed directly in the kernel body", op)
            if spec.kernel_only and in_function:
                self.fail("not allowed in a subgraph function", op)
            if spec.terminator and (op.name != terminator or i != len(block.ops) - 1):
                self.fail(f"misplaced terminator (expected {terminator or 'none'} at the end)", op)
            for v in op.operands:
                if id(v) not in local:
                    self.fail(f"operand %{v.name} is not defined before its use", op)
            self.check_op(op)
            for region in op.regions:
                self.define(region.args, op)
                want = "return" if op.name == "func" else "yield"
                self.block(region, local, False, in_function, want)
            self.define(op.results, op)
            local |= {id(r) for r in op.results}
        if terminator and (not block.ops or block.ops[-1].name != terminator):
            self.fail(f"block does not end with {terminator}")

    def check_op(self, op: Op) -> None:
        if op.name in ("load", "store", "atomic_rmw"):
            try:
                b = self.kernel.buffer(op.attrs.get("buffer", ""))
            except KeyError:
                self.fail(f"unknown buffer @{op.attrs.get('buffer')}", op)
            if op.name == "store" and not (b.kind == "shared" or (b.kind == "param" and b.written)):
                self.fail(f"store to read-only buffer @{b.name}", op)
            if op.name == "atomic_rmw":
                self.check_atomic(op, b)
        elif op.name in ("call", "shuffle_reduce"):
            try:
                f = self.kernel.function(op.attrs.get("callee", ""))
            except KeyError:
                self.fail(f"unknown function @{op.attrs.get('callee')}", op)
            want_args = [a.type for a in f.args]
            got = [v.type for v in op.operands]
            if op.name == "shuffle_reduce":
                got = got + got
            if got != want_args or [r.type for r in op.results] != f.result_types:
                self.fail(f"arguments/results do not match @{f.name}", op)
        elif op.name == "loop":
            m = op.attrs["map"]
            body = op.regions[0]
            nd, ns, nr = m.num_dims, len(m.range_vars), m.num_results
            inits = op.operands[nd:]
            if (len(body.args) != ns + nr + len(inits)
                    or [r.type for r in op.results] != [v.type for v in inits]):
                self.fail("loop arguments do not match its map and iter_args", op)
            self.check_yield(op, body, [v.type for v in inits])
        elif op.name == "if":
            if op.operands[0].type != "i1":
                self.fail("if condition must be i1", op)
            for region in op.regions:
                self.check_yield(op, region, [r.type for r in op.results])

    def check_atomic(self, op: Op, b) -> None:
        if not (b.kind == "shared" or (b.kind == "param" and b.written)):
            self.fail(f"atomic_rmw on read-only buffer @{b.name}", op)
        if len(op.operands) != 2 or op.results or op.operands[0].type != "index":
            self.fail("atomic_rmw takes (index, value) and has no result", op)
        kind = op.attrs.get("kind")
        if kind is not None and kind not in ATOMIC_KINDS:
            self.fail(f"unknown atomic kind {kind}", op)
        try:
            f = self.kernel.function(op.attrs.get("callee", ""))
        except KeyError:
            self.fail(f"unknown function @{op.attrs.get('callee')}", op)
        t = op.operands[1].type
        if [a.type for a in f.args] != [t, t] or f.result_types != [t]:
            self.fail(f"combiner @{f.name} must map ({t}, {t}) -> {t}", op)

    def check_yield(self, op: Op, block: Block, types: list[str]) -> None:
        last = block.ops[-1] if block.ops else None
        if last is None or last.name != "yield" or [v.type for v in last.operands] != types:
            self.fail(f"region must yield ({', '.join(types)})", op)


def verify_kernel(kernel: Kernel) -> None:
    """Raise `VerificationError` if `kernel` breaks an invariant of the kernel IR."""
    v = _Verifier(kernel)
    names = [b.name for b in kernel.buffers] + [f.name for f in kernel.functions]
    if len(set(names)) != len(names):
        v.fail("buffer and function names must be unique")
    for f in kernel.functions:
        v.where = f"func @{f.name}"
        v.define(f.args)
        v.block(f.body, {id(a) for a in f.args}, False, True, "return")
        ret = f.body.ops[-1]
        if [x.type for x in ret.operands] != f.result_types:
            v.fail("return types do not match the signature")
    v.where = "body"
    v.block(kernel.body, set(), True, False, None)
