"""Lowering of the kernel IR's memory ops (`load`, `store`) for both targets.

Where it sits: `RegionLowering.lower_op` (lowering.py) looks ops up in `MEMORY_LOWERING`. Buffers
are flat arrays of their storage type (lowering.py's module docstring: pred as a byte, sub-byte
types one per byte or packed, low bits first). A vector load or store is one LLVM vector access
on NVPTX and one scalar access per lane on the host (`Target.scalarize_vectors`, lanes.py).
"""

from __future__ import annotations

from typing import Callable

from hlo_codegen.kernel_ir.ir import Buffer, Op, hlo_bits
from hlo_codegen.kernel_ir.types import is_vector, vector_shape
from hlo_codegen.llvm import lanes as vec
from hlo_codegen.llvm.lanes import Lanes
from hlo_codegen.llvm.lowering import I64, RegionLowering, llvm_type, storage_type
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


MEMORY_LOWERING: dict[str, Callable] = {"load": _lower_load, "store": _lower_store}
