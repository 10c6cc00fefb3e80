"""Lowering of the kernel IR's memory ops (`load`, `store`, `atomic_rmw`) for both targets.

Where it sits: `RegionLowering.lower_op` (lowering.py) looks ops up in `MEMORY_LOWERING`. Buffers
are flat arrays of their storage type (lowering.py's module docstring: pred as a byte, sub-byte
types one per byte or packed, low bits first). A vector load or store is one LLVM vector access
on NVPTX and one scalar access per lane on the host (`Target.scalarize_vectors`, lanes.py).

`atomic_rmw` becomes one LLVM `atomicrmw` when its `kind` has a native form for the element
(NVPTX: `atom.global.add.f32/f64`, `.add.noftz.f16/bf16`, integer add/min/max/and/or/xor/exch;
LLVM widens 8- and 16-bit integer atomics to a 32-bit compare-and-swap itself). Otherwise - other
combiners, sub-byte and packed elements, f16/bf16 on the host - it is a compare-and-swap loop:
read the element's storage word (the whole byte of a packed element), run the combiner function
on the current value, `cmpxchg` the new word in, and retry with the word `cmpxchg` saw until it
succeeds. The host runs blocks on several CPU threads, so it needs the same atomics.
"""

from __future__ import annotations

from typing import Callable

from hlo_codegen.kernel_ir.ir import Buffer, Op, hlo_bits
from hlo_codegen.kernel_ir.types import FLOAT_FORMATS, INT_BITS, is_complex, is_vector, vector_shape
from hlo_codegen.llvm import lanes as vec
from hlo_codegen.llvm.lanes import Lanes
from hlo_codegen.llvm.lowering import I64, LoweringError, RegionLowering, llvm_type, storage_type
from hlo_codegen.llvm.text import LV


def _buffer(rl: RegionLowering, op: Op) -> tuple[Buffer, LV]:
    b = rl.ml.kernel.buffer(op.attrs["buffer"])
    return b, rl.buffers[b.name]


def _from_storage(rl: RegionLowering, b: Buffer, raw: LV, ty: str) -> LV:
    """Convert loaded storage bits (i8 for pred / sub-byte) into the value type."""
    f = rl.fn
    if b.hlo_type == "pred":
        zero = "zeroinitializer" if raw.ty.startswith("<") else "0"
        return f.icmp("ne", raw, LV(raw.ty, zero))
    if raw.ty != ty:
        return f.cast("trunc", raw, ty)
    return raw


def _to_storage(rl: RegionLowering, b: Buffer, value: LV, storage: str) -> LV:
    if value.ty != storage:
        return rl.fn.cast("zext", value, storage)
    return value


def _lower_load(rl: RegionLowering, op: Op) -> list[LV]:
    f = rl.fn
    b, base = _buffer(rl, op)
    idx = rl.v(op.operands[0])
    ty = llvm_type(op.result.type)
    if b.packed:
        return [_packed_load(rl, b, base, idx, ty)]
    st = storage_type(b.hlo_type)
    lanes = vector_shape(op.result.type)[0] if is_vector(op.result.type) else 0
    if lanes and rl.target.scalarize_vectors:
        return [_load_lanes(rl, b, base, idx, ty, st, lanes)]
    mem_ty = f"<{lanes} x {st}>" if lanes else st
    align = op.attrs.get("align") or _natural_align(st)
    invariant = rl.target.invariant_loads and (b.kind == "global" or (b.kind == "param" and not b.written))
    raw = f.load(mem_ty, f.gep(st, base, idx), align, invariant)
    return [_from_storage(rl, b, raw, ty)]


def _lower_store(rl: RegionLowering, op: Op) -> None:
    f = rl.fn
    b, base = _buffer(rl, op)
    value, idx = rl.raw(op.operands[0]), rl.v(op.operands[1])
    if b.name in rl.redirect:
        base, offset = rl.redirect[b.name]
        idx = f.binop("sub", idx, offset)
    st = storage_type(b.hlo_type)
    lanes = vector_shape(op.operands[0].type)[0] if is_vector(op.operands[0].type) else 0
    if lanes and rl.target.scalarize_vectors and not b.packed:
        _store_lanes(rl, b, base, idx, vec.as_lanes(f, value), st)
        return None
    if isinstance(value, Lanes):
        value = vec.pack(f, value)
    if b.packed:
        _packed_store(rl, b, base, idx, value)
        return None
    mem_ty = f"<{lanes} x {st}>" if lanes else st
    align = op.attrs.get("align") or _natural_align(st)
    f.store(_to_storage(rl, b, value, mem_ty), f.gep(st, base, idx), align)
    return None


def _lane_index(rl: RegionLowering, idx: LV, k: int) -> LV:
    return idx if k == 0 else rl.fn.binop("add", idx, LV(I64, str(k)))


def _load_lanes(rl: RegionLowering, b: Buffer, base: LV, idx: LV, ty: str, st: str, lanes: int) -> Lanes:
    """A vector load as one scalar load per lane (host: see lanes.py)."""
    f = rl.fn
    elem = ty[1:-1].partition(" x ")[2]
    out = []
    for k in range(lanes):
        raw = f.load(st, f.gep(st, base, _lane_index(rl, idx, k)), _natural_align(st))
        out.append(_from_storage(rl, b, raw, elem))
    return Lanes(ty, tuple(out))


def _store_lanes(rl: RegionLowering, b: Buffer, base: LV, idx: LV, value: Lanes, st: str) -> None:
    f = rl.fn
    for k, lane in enumerate(value.lanes):
        ptr = f.gep(st, base, _lane_index(rl, idx, k))
        f.store(_to_storage(rl, b, lane, st), ptr, _natural_align(st))


def _natural_align(st: str) -> int:
    if st.startswith("{"):
        return 8 if "double" in st else 4
    return {"i8": 1, "i16": 2, "i32": 4, "float": 4, "i64": 8, "double": 8, "i128": 16}.get(st, 1)


def _packed_addr(rl: RegionLowering, b: Buffer, base: LV, idx: LV) -> tuple[LV, LV]:
    f = rl.fn
    bits = hlo_bits(b.hlo_type)
    per_byte = 8 // bits
    byte_idx = f.binop("lshr", idx, LV(I64, str(per_byte.bit_length() - 1)))
    shift = f.binop("mul", f.binop("and", idx, LV(I64, str(per_byte - 1))), LV(I64, str(bits)))
    return f.gep("i8", base, byte_idx), f.cast("trunc", shift, "i8")


def _packed_load(rl: RegionLowering, b: Buffer, base: LV, idx: LV, ty: str) -> LV:
    f = rl.fn
    ptr, shift = _packed_addr(rl, b, base, idx)
    byte = f.load("i8", ptr, 1)
    return f.cast("trunc", f.binop("lshr", byte, shift), ty)


def _packed_store(rl: RegionLowering, b: Buffer, base: LV, idx: LV, value: LV) -> None:
    f = rl.fn
    bits = hlo_bits(b.hlo_type)
    ptr, shift = _packed_addr(rl, b, base, idx)
    mask = f.binop("shl", LV("i8", str((1 << bits) - 1)), shift)
    old = f.binop("and", f.load("i8", ptr, 1), f.binop("xor", mask, LV("i8", "-1")))
    new = f.binop("shl", f.cast("zext", value, "i8"), shift)
    f.store(f.binop("or", old, new), ptr, 1)


_INT_RMW = {"addi": "add", "maxsi": "max", "minsi": "min", "maxui": "umax", "minui": "umin",
            "andi": "and", "ori": "or", "xori": "xor", "assign": "xchg"}
_HALF = {"f16": "half", "bf16": "bfloat"}


def _native_rmw(rl: RegionLowering, b: Buffer, kind: str | None, t: str) -> tuple[str, str] | None:
    """(atomicrmw operation, LLVM operand type) when `kind` on element type `t` is one instruction."""
    if kind is None or b.packed:
        return None
    if b.hlo_type == "pred":
        return (_INT_RMW[kind], "i8") if kind in ("andi", "ori", "xori", "assign") else None
    if t in ("f32", "f64"):
        ty = llvm_type(t)
        return {"addf": ("fadd", ty), "assign": ("xchg", ty)}.get(kind)
    if t in _HALF:
        if kind == "addf" and rl.target.half_atomics:
            return "fadd", _HALF[t]
        return ("xchg", llvm_type(t)) if kind == "assign" else None
    if t in FLOAT_FORMATS:
        return ("xchg", llvm_type(t)) if kind == "assign" and hlo_bits(b.hlo_type) >= 8 else None
    if t in INT_BITS and t != "index" and hlo_bits(b.hlo_type) >= 8 and kind in _INT_RMW:
        return _INT_RMW[kind], llvm_type(t)
    return None


def _lower_atomic_rmw(rl: RegionLowering, op: Op) -> None:
    f = rl.fn
    b, base = _buffer(rl, op)
    idx, value = rl.v(op.operands[0]), rl.v(op.operands[1])
    t = op.operands[1].type
    if is_vector(t) or is_complex(t):
        raise LoweringError(f"kernel @{rl.ml.kernel.name}: atomic_rmw on {t} is not supported")
    group, f.access_group = f.access_group, None  # atomics are no parallel-loop accesses
    try:
        native = _native_rmw(rl, b, op.attrs.get("kind"), t)
        if native is not None:
            kind, ty = native
            st = storage_type(b.hlo_type)
            v = value
            if ty in ("half", "bfloat"):
                v = f.cast("bitcast", v, ty)
            elif v.ty != ty:
                v = f.cast("zext", v, ty)  # pred as its 0/1 byte
            ptr = f.gep(st, base, idx)
            scope = rl.target.atomic_scope
            f.inst(ty, f"atomicrmw {kind} {ptr}, {v}{scope} monotonic, align {_natural_align(st)}")
        else:
            _cas_loop(rl, b, base, idx, value, t, op.attrs["callee"])
    finally:
        f.access_group = group
    return None


def _cas_loop(rl: RegionLowering, b: Buffer, base: LV, idx: LV, value: LV, t: str, callee: str) -> None:
    """Compare-and-swap loop around the combiner (see the module docstring)."""
    f = rl.fn
    vty = llvm_type(t)
    if b.packed:
        ptr, shift = _packed_addr(rl, b, base, idx)
        word = "i8"
        mask = f.binop("shl", LV("i8", str((1 << hlo_bits(b.hlo_type)) - 1)), shift)
        keep = f.binop("xor", mask, LV("i8", "-1"))
    else:
        st = storage_type(b.hlo_type)
        word = {"float": "i32", "double": "i64"}.get(st, st)
        ptr = f.gep(st, base, idx)
    align = 1 if b.packed else _natural_align(word)

    def to_value(w: LV) -> LV:
        if b.packed:
            return f.cast("trunc", f.binop("lshr", w, shift), vty)
        if word != st:
            return f.cast("bitcast", w, vty)
        return _from_storage(rl, b, w, vty)

    def to_word(v: LV, old: LV) -> LV:
        if b.packed:
            return f.binop("or", f.binop("and", old, keep), f.binop("shl", f.cast("zext", v, "i8"), shift))
        if word != st:
            return f.cast("bitcast", v, word)
        return _to_storage(rl, b, v, word)

    first = f.load(word, ptr, align)
    pre = f.current
    loop, done = f.new_block("cas_loop"), f.new_block("cas_done")
    f.br(loop)
    f.set_block(loop)
    old, phi = f.phi(word, "cas_old")
    args = [rl.buffers[p.name] for p in rl.ml.params] + [to_value(old), value]
    new = to_word(f.call(vty, rl.ml.symbols[callee], args), old)
    scope = rl.target.atomic_scope
    text = f"cmpxchg {ptr}, {old}, {new}{scope} monotonic monotonic, align {align}"
    pair = f.inst(f"{{ {word}, i1 }}", text)
    seen = f.extractvalue(word, pair, 0)
    ok = f.extractvalue("i1", pair, 1)
    phi.incoming += [(first.ref, pre), (seen.ref, f.current)]
    f.cbr(ok, done, loop)
    f.set_block(done)


MEMORY_LOWERING: dict[str, Callable] = {"load": _lower_load, "store": _lower_store,
                                        "atomic_rmw": _lower_atomic_rmw}
