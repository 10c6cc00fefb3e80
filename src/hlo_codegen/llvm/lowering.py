"""Kernel IR -> LLVM IR text: what both targets share (ops, memory, control flow, functions).

Where it sits: nvptx.py and host.py build a `ModuleLowering` with their `Target` and lower the
kernel body their own way (one CUDA thread per kernel thread; or thread loops split into phases
at barriers); every op below the top level goes through `RegionLowering.lower_block`. Loads
and stores are in memory.py, scalar arithmetic, casts and constants in arith.py, the math
functions in math.py / libdevice.py, narrow-float conversions in floats.py.

Value representation: integers and `index` (i64) as LLVM integers, f32/f64 as float/double,
narrow floats (f16, bf16, f8*, ...) as integers holding their bits, complex as `{float, float}`,
vectors as LLVM vectors (on the host as one scalar per lane, lanes.py). Memory: pred as a byte
(0/1), sub-byte integers and floats one per byte (low bits) or packed (`packed` buffers, low
bits first), complex as (re, im) pairs.
Subgraph functions become `internal` LLVM functions taking every parameter buffer's pointer
first, then their own arguments; several results come back as a literal struct.
"""

from __future__ import annotations

from typing import Callable

from hlo_codegen.indexing import IndexingMap
from hlo_codegen.indexing.affine import ADD, CONST, DIM, FLOORDIV, MOD, MUL, SYMBOL, AffineExpr
from hlo_codegen.kernel_ir.ir import Block, Buffer, Kernel, Op, Value, hlo_bits
from hlo_codegen.kernel_ir.types import (
    FLOAT_FORMATS, INT_BITS, complex_element, ir_type, is_complex, is_vector, vector_shape,
)
from hlo_codegen.llvm import lanes as vec
from hlo_codegen.llvm.lanes import Lanes
from hlo_codegen.llvm.text import LV, LLFunction, LLModule
from hlo_common.errors import HloError

I64 = "i64"
MAX_UNROLL = 16  # loops marked `unroll` up to this trip count are unrolled while lowering


class LoweringError(HloError):
    """A kernel the LLVM lowering cannot translate (names the kernel and op)."""


def llvm_type(t: str) -> str:
    """LLVM type of a kernel IR value type."""
    if t in INT_BITS:
        return "i64" if t == "index" else t
    if t == "f32":
        return "float"
    if t == "f64":
        return "double"
    if t in FLOAT_FORMATS:
        return f"i{FLOAT_FORMATS[t].bits}"
    if is_complex(t):
        e = llvm_type(complex_element(t))
        return f"{{ {e}, {e} }}"
    if is_vector(t):
        n, e = vector_shape(t)
        return f"<{n} x {llvm_type(e)}>"
    raise LoweringError(f"no LLVM type for kernel IR type {t}")


def storage_type(hlo_type: str) -> str:
    """LLVM type of one element of an (unpacked) buffer of HLO type `hlo_type`."""
    t = ir_type(hlo_type)
    if hlo_type == "pred" or hlo_bits(hlo_type) < 8:
        return "i8"
    return llvm_type(t)


def type_suffix(llty: str) -> str:
    """Overload suffix of an intrinsic: float -> f32, <4 x i32> -> v4i32."""
    if llty.startswith("<"):
        n, _, e = llty[1:-1].partition(" x ")
        return f"v{n}{type_suffix(e)}"
    return {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16"}.get(llty, llty)


class Target:
    """What differs between NVPTX and the host below the kernel body's top level."""

    name = "generic"
    triple = ""
    datalayout: str | None = None
    global_ptr = "ptr"
    shared_ptr = "ptr"
    global_addrspace = 0
    invariant_loads = False
    native_half = False  # f32 <-> f16/bf16 with LLVM's half/bfloat types
    scalarize_vectors = False  # vector values as one scalar per lane (lanes.py)
    half_atomics = False  # `atomicrmw fadd` on half / bfloat (sm_90 has atom.add.{f16,bf16})
    atomic_scope = ""  # LLVM syncscope of atomics (NVPTX: the device, not the whole system)

    def math(self, rl: RegionLowering, op: str, ty: str, args: list[LV]) -> LV:
        from hlo_codegen.llvm.math import define_math

        return rl.fn.call(ty, define_math(rl.module, op, ty), args)

    def thread_id(self, rl: RegionLowering, dim: str) -> LV:
        raise NotImplementedError

    def block_id(self, rl: RegionLowering, dim: str) -> LV:
        raise NotImplementedError


class ModuleLowering:
    """One kernel's LLVM module: constant globals and subgraph functions, then the kernel."""

    def __init__(self, kernel: Kernel, target: Target):
        self.kernel = kernel
        self.target = target
        self.module = LLModule(target.triple, target.datalayout)
        self.params = kernel.params
        self.globals: dict[str, LV] = {}
        self.exact_narrowings: set[int] | None = None  # arith.exact_narrowings, on first truncf
        # LLVM symbol of each subgraph function (renamed if it would clash with the kernel's)
        self.symbols = {f.name: f"{f.name}.fn" if f.name == kernel.name else f.name
                        for f in kernel.functions}
        for b in kernel.buffers:
            if b.kind == "global":
                self.globals[b.name] = self._constant_global(b)

    def _constant_global(self, b: Buffer) -> LV:
        raw = b.data.reshape(-1).view("uint8").tobytes() if b.data is not None else b""
        text = "".join(f"\\{c:02X}" for c in raw)
        space = f" addrspace({self.target.global_addrspace})" if self.target.global_addrspace else ""
        self.module.globals.append(
            f"@{b.name} = internal{space} constant [{len(raw)} x i8] c\"{text}\", align 16")
        return LV(self.target.global_ptr, f"@{b.name}")

    def lower_functions(self) -> None:
        for f in self.kernel.functions:
            ret = _ret_type(f.result_types)
            params = [(self.target.global_ptr, p.name) for p in self.params]
            params += [(llvm_type(a.type), a.name) for a in f.args]
            fn = self.module.function(self.symbols[f.name], ret, params, prefix="internal")
            rl = RegionLowering(self, fn, dict(zip([p.name for p in self.params], fn.args)))
            for a, lv in zip(f.args, fn.args[len(self.params):]):
                rl.env[id(a)] = lv
            rl.lower_block(f.body)

    def text(self) -> str:
        return self.module.text()


def _ret_type(types: list[str]) -> str:
    if not types:
        return "void"
    if len(types) == 1:
        return llvm_type(types[0])
    return "{ " + ", ".join(llvm_type(t) for t in types) + " }"


class RegionLowering:
    """Lowers ops into one LLVM function; `env` maps kernel IR values to LLVM values."""

    def __init__(self, ml: ModuleLowering, fn: LLFunction, buffers: dict[str, LV]):
        self.ml = ml
        self.module = ml.module
        self.target = ml.target
        self.fn = fn
        self.buffers = dict(buffers, **ml.globals)
        self.env: dict[int, LV] = {}
        self.ranges: dict[int, tuple[int, int]] = {}  # known value ranges (thread ids, loop ivs)
        # buffer -> (base, offset): stores go to base[index - offset] (host.py's staged outputs)
        self.redirect: dict[str, tuple[LV, LV]] = {}
        self.returned: list[LV] | None = None

    def v(self, value: Value) -> LV:
        """The LLVM value of `value` (a vector kept as lanes is packed into one)."""
        lv = self.raw(value)
        return vec.pack(self.fn, lv) if isinstance(lv, Lanes) else lv

    def raw(self, value: Value) -> LV | Lanes:
        """The LLVM value of `value` as lowered: vectors may be `Lanes` (lanes.py)."""
        lv = self.env.get(id(value))
        if lv is None:
            raise LoweringError(f"kernel @{self.ml.kernel.name}: %{value.name} used before lowering")
        return lv

    def normalize(self, values: list) -> list:
        """Vectors as lanes where the target keeps them so (phis are then built per lane)."""
        return vec.normalize(self.fn, values) if self.target.scalarize_vectors else list(values)

    def bind(self, values: list[Value], lvs: list[LV]) -> None:
        for v, lv in zip(values, lvs):
            self.env[id(v)] = lv

    def lower_block(self, block: Block) -> list[LV] | None:
        """Lower a block's ops; returns the operands of its terminator (yield/return)."""
        for op in block.ops:
            if op.name in ("yield", "return"):
                if op.name == "yield":
                    return [self.raw(x) for x in op.operands]
                vals = [self.v(x) for x in op.operands]
                self._return(vals)
                return vals
            self.lower_op(op)
        return None

    def lower_op(self, op: Op) -> None:
        from hlo_codegen.llvm.arith import ARITH_LOWERING
        from hlo_codegen.llvm.memory import MEMORY_LOWERING

        handler: Callable | None = (_CONTROL.get(op.name) or MEMORY_LOWERING.get(op.name)
                                    or ARITH_LOWERING.get(op.name))
        if handler is None:
            raise LoweringError(f"kernel @{self.ml.kernel.name}: cannot lower '{op.name}' here")
        results = handler(self, op)
        if results is not None:
            self.bind(op.results, results)

    def _return(self, vals: list[LV]) -> None:
        f = self.fn
        if not vals:
            f.ret()
        elif len(vals) == 1:
            f.ret(vals[0])
        else:
            agg = LV(f.ret_ty, "undef")
            for i, v in enumerate(vals):
                agg = f.insertvalue(agg, v, i)
            f.ret(agg)

    # -- index arithmetic ----------------------------------------------------------------------
    def affine(self, expr: AffineExpr, dims: list[LV], syms: list[LV], m: IndexingMap, memo: dict) -> LV:
        hit = memo.get(expr)
        if hit is not None:
            return hit
        f, k = self.fn, expr.kind
        if k == CONST:
            out = LV(I64, str(expr.value))
        elif k == DIM:
            out = dims[expr.value]
        elif k == SYMBOL:
            out = syms[expr.value]
        else:
            a = self.affine(expr.lhs, dims, syms, m, memo)
            b = self.affine(expr.rhs, dims, syms, m, memo)
            if k == ADD:
                out = f.binop("add", a, b)
            elif k == MUL:
                out = f.binop("mul", a, b)
            else:
                nonneg = memo.setdefault("__ranges", m.range_evaluator()).range(expr.lhs).lower >= 0
                out = self._divmod(k, a, expr.rhs.value, nonneg)
        memo[expr] = out
        return out

    def _divmod(self, kind: int, a: LV, c: int, nonneg: bool) -> LV:
        f = self.fn
        cv = LV(I64, str(c))
        if nonneg and c > 0:
            return f.binop("udiv" if kind == FLOORDIV else "urem", a, cv)
        q, r = f.binop("sdiv", a, cv), f.binop("srem", a, cv)
        if kind == MOD:  # c > 0: result in [0, c)
            return f.select(f.icmp("slt", r, LV(I64, "0")), f.binop("add", r, cv), r)
        wrong = f.icmp("slt", r, LV(I64, "0")) if c > 0 else f.icmp("sgt", r, LV(I64, "0"))
        return f.binop("sub", q, f.cast("zext", wrong, I64))

    def apply_map(self, m: IndexingMap, dims: list[LV], syms: list[LV]) -> list[LV]:
        memo: dict = {}
        return [self.affine(e, dims, syms, m, memo) for e in m.results]

    def in_domain(self, m: IndexingMap, dims: list[LV], dim_values: list[Value], syms: list[LV]) -> LV | None:
        """i1 that is true when (dims, syms) satisfy the map's constraints (None: always)."""
        f = self.fn
        conds = []
        for v, lv, var in zip(dim_values, dims, m.dim_vars):
            known = self.ranges.get(id(v))
            b = var.bounds
            if known is not None and b.lower <= known[0] and known[1] <= b.upper:
                continue
            conds.append(f.icmp("sge", lv, LV(I64, str(b.lower))))
            conds.append(f.icmp("sle", lv, LV(I64, str(b.upper))))
        memo: dict = {}
        for expr, interval in sorted(m.constraints.items(), key=lambda kv: str(kv[0])):
            val = self.affine(expr, dims, syms, m, memo)
            if interval.lower > -(1 << 62):
                conds.append(f.icmp("sge", val, LV(I64, str(interval.lower))))
            if interval.upper < (1 << 62):
                conds.append(f.icmp("sle", val, LV(I64, str(interval.upper))))
        if not conds:
            return None
        out = conds[0]
        for c in conds[1:]:
            out = f.binop("and", out, c)
        return out

    # -- structured control flow -----------------------------------------------------------------
    def for_range(self, lo: int, hi: int, inits: list[LV], body: Callable[[LV, list[LV]], list[LV]],
                  hint: str = "i", loop_md: str | None = None) -> list[LV]:
        """`for i in [lo, hi]` (hi >= lo) carrying `inits`; body(i, iters) -> new iters.
        `loop_md` (e.g. `!7`) is attached to the back edge as the loop's `!llvm.loop`."""
        f = self.fn
        inits = self.normalize(inits)
        header, exit_ = f.new_block(f"{hint}_loop"), f.new_block(f"{hint}_exit")
        pre = f.current
        f.br(header)
        f.set_block(header)
        iv, iv_phi = f.phi(I64, hint)
        iv_phi.incoming.append((str(lo), pre))
        phis = []
        iters = []
        for v in vec.flatten(inits):
            lv, p = f.phi(v.ty, "iter")
            p.incoming.append((v.ref, pre))
            phis.append(p)
            iters.append(lv)
        new = self.normalize(body(iv, vec.unflatten(inits, iters)))
        nxt = f.binop("add", iv, LV(I64, "1"))
        latch = f.current
        iv_phi.incoming.append((nxt.ref, latch))
        for p, v in zip(phis, vec.flatten(new)):
            p.incoming.append((v.ref, latch))
        f.cbr(f.icmp("sle", nxt, LV(I64, str(hi))), header, exit_, loop_md)
        f.set_block(exit_)
        return list(new)

    def if_then_else(self, cond: LV | None, types: list[str], then_fn: Callable[[], list[LV]],
                     else_fn: Callable[[], list[LV]]) -> list[LV]:
        if cond is None:
            return then_fn()
        f = self.fn
        t, e, j = f.new_block("then"), f.new_block("else"), f.new_block("endif")
        f.cbr(cond, t, e)
        f.set_block(t)
        a = self.normalize(then_fn())
        ta = f.current
        f.br(j)
        f.set_block(e)
        b = self.normalize(else_fn())
        eb = f.current
        f.br(j)
        f.set_block(j)
        out = []
        for x, y, ty in zip(a, b, types):
            if isinstance(x, Lanes):
                out.append(Lanes(x.ty, tuple(self._phi2(xl, yl, ta, eb) for xl, yl in zip(x.lanes, y.lanes))))
            else:
                out.append(self._phi2(x, y, ta, eb, ty))
        return out

    def _phi2(self, x: LV, y: LV, ta: str, eb: str, ty: str | None = None) -> LV:
        lv, p = self.fn.phi(ty or x.ty)
        p.incoming += [(x.ref, ta), (y.ref, eb)]
        return lv


def _lower_loop(rl: RegionLowering, op: Op) -> list[LV]:
    m: IndexingMap = op.attrs["map"]
    nd = m.num_dims
    dim_values = op.operands[:nd]
    dims = [rl.v(x) for x in dim_values]
    inits = [rl.raw(x) for x in op.operands[nd:]]
    body = op.regions[0]
    ns, nr = len(m.range_vars), m.num_results
    if m.is_known_empty:
        return inits
    types = [x.ty for x in inits]

    def innermost(syms: list[LV], iters: list[LV]) -> list[LV]:
        cond = rl.in_domain(m, dims, dim_values, syms)

        def run() -> list[LV]:
            rl.bind(body.args[:ns], syms)
            rl.bind(body.args[ns:ns + nr], rl.apply_map(m, dims, syms))
            rl.bind(body.args[ns + nr:], iters)
            return rl.lower_block(body)

        return rl.if_then_else(cond, types, run, lambda: iters)

    def nest(j: int, syms: list[LV], iters: list[LV]) -> list[LV]:
        if j == ns:
            return innermost(syms, iters)
        b = m.range_vars[j].bounds
        if b.is_point:
            return nest(j + 1, syms + [LV(I64, str(b.lower))], iters)
        if op.attrs.get("unroll") and b.num_elements <= MAX_UNROLL:  # e.g. the vector lanes
            for value in range(b.lower, b.upper + 1):
                iters = nest(j + 1, syms + [LV(I64, str(value))], iters)
            return iters

        def step(iv: LV, it: list[LV]) -> list[LV]:
            rl.ranges[id(body.args[j])] = (b.lower, b.upper)
            return nest(j + 1, syms + [iv], it)

        return rl.for_range(b.lower, b.upper, iters, step, hint=body.args[j].name)

    return nest(0, [], inits)


def _lower_if(rl: RegionLowering, op: Op) -> list[LV]:
    types = [llvm_type(r.type) for r in op.results]
    return rl.if_then_else(rl.v(op.operands[0]), types, lambda: rl.lower_block(op.regions[0]),
                           lambda: rl.lower_block(op.regions[1]))


def _lower_call(rl: RegionLowering, op: Op) -> list[LV]:
    f = rl.fn
    args = [rl.buffers[p.name] for p in rl.ml.params] + [rl.v(x) for x in op.operands]
    types = [r.type for r in op.results]
    ret = _ret_type(types)
    out = f.call(ret, rl.ml.symbols[op.attrs["callee"]], args)
    if len(types) == 1:
        return [out]
    return [f.extractvalue(llvm_type(t), out, i) for i, t in enumerate(types)]


def _lower_apply_indexing(rl: RegionLowering, op: Op) -> list[LV]:
    m: IndexingMap = op.attrs["map"]
    vals = [rl.v(x) for x in op.operands]
    return rl.apply_map(m, vals[:m.num_dims], vals[m.num_dims:])


def _lower_thread_id(rl: RegionLowering, op: Op) -> list[LV]:
    rl.ranges[id(op.result)] = tuple(op.attrs["range"])
    return [rl.target.thread_id(rl, op.attrs["dim"])]


def _lower_block_id(rl: RegionLowering, op: Op) -> list[LV]:
    rl.ranges[id(op.result)] = tuple(op.attrs["range"])
    return [rl.target.block_id(rl, op.attrs["dim"])]


_CONTROL: dict[str, Callable] = {
    "loop": _lower_loop, "if": _lower_if, "call": _lower_call, "apply_indexing": _lower_apply_indexing,
    "thread_id": _lower_thread_id, "block_id": _lower_block_id,
}
