"""Kernel-IR vectors as one scalar per lane: how the host lowering keeps vector values.

Where it sits: lowering.py and arith.py hand vector values to these helpers when the target sets
`scalarize_vectors` (the host; NVPTX keeps real LLVM vectors). On a GPU the kernel IR's vector
loads and stores (`vectorize_loops`) let one thread move 4-16 bytes at once. On the host a thread
is one iteration of the thread loop, and LLVM's loop vectorizer - which turns that loop into SIMD
code over 8 or 16 threads at a time, by far the larger win - rejects any loop that holds a
vector-typed instruction. So a vector value is a `Lanes` (its scalars, in lane order), a vector
load or store is one scalar access per lane at consecutive element indices (the same bytes), and
the loop vectorizer turns those back into wide interleaved accesses across threads. Where one
LLVM vector value is needed (a value kept across a barrier, a function's result), `pack` builds
it with insertelement; `as_lanes` splits a real vector with extractelement.

    >>> v = constant_lanes("<2 x float>", LV("float", "0.0"), 2)
    >>> insert(f, v, LV("float", "%x"), LV("i64", "1")).lanes[1].ref     # doctest: +SKIP
    '%x'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from hlo_codegen.llvm.text import LV, LLFunction

I64 = "i64"


@dataclass(frozen=True)
class Lanes:
    """A vector value of LLVM type `ty` (`<4 x i16>`) held as its lanes' scalar values."""

    ty: str
    lanes: tuple[LV, ...]

    @property
    def element_type(self) -> str:
        return self.ty[1:-1].partition(" x ")[2]


def is_vector_type(ty: str) -> bool:
    return ty.startswith("<")


def vector_lanes(ty: str) -> int:
    return int(ty[1:].partition(" x ")[0])


def constant_lanes(ty: str, lane: LV, n: int) -> Lanes:
    return Lanes(ty, (lane,) * n)


def pack(f: LLFunction, v: Lanes) -> LV:
    """One LLVM vector value with these lanes."""
    out = LV(v.ty, "undef")
    for k, lane in enumerate(v.lanes):
        out = f.insertelement(out, lane, LV(I64, str(k)))
    return out


def as_lanes(f: LLFunction, v: LV | Lanes) -> Lanes:
    """`v` as lanes (a real vector is split with extractelement)."""
    if isinstance(v, Lanes):
        return v
    elem = v.ty[1:-1].partition(" x ")[2]
    return Lanes(v.ty, tuple(f.extractelement(elem, v, LV(I64, str(k))) for k in range(vector_lanes(v.ty))))


def _constant_index(idx: LV) -> int | None:
    return int(idx.ref) if idx.ref.lstrip("-").isdigit() else None


def extract(f: LLFunction, v: Lanes, idx: LV) -> LV:
    """Lane `idx` (a constant after unrolling; otherwise a chain of selects)."""
    k = _constant_index(idx)
    if k is not None:
        return v.lanes[k]
    out = v.lanes[0]
    for k, lane in enumerate(v.lanes[1:], start=1):
        out = f.select(f.icmp("eq", idx, LV(I64, str(k))), lane, out)
    return out


def insert(f: LLFunction, v: Lanes, value: LV, idx: LV) -> Lanes:
    """`v` with lane `idx` replaced by `value`."""
    k = _constant_index(idx)
    if k is not None:
        return Lanes(v.ty, v.lanes[:k] + (value,) + v.lanes[k + 1:])
    return Lanes(v.ty, tuple(f.select(f.icmp("eq", idx, LV(I64, str(j))), value, lane)
                             for j, lane in enumerate(v.lanes)))


def normalize(f: LLFunction, values: Sequence[LV | Lanes]) -> list[LV | Lanes]:
    """Every vector value as lanes (before a branch, so that phis can be built per lane)."""
    return [as_lanes(f, v) if not isinstance(v, Lanes) and is_vector_type(v.ty) else v for v in values]


def flatten(values: Sequence[LV | Lanes]) -> list[LV]:
    """Scalars only: each Lanes replaced by its lanes."""
    out: list[LV] = []
    for v in values:
        out.extend(v.lanes if isinstance(v, Lanes) else (v,))
    return out


def unflatten(template: Sequence[LV | Lanes], flat: Sequence[LV]) -> list[LV | Lanes]:
    """The inverse of `flatten` for values shaped like `template`."""
    out: list[LV | Lanes] = []
    pos = 0
    for t in template:
        if isinstance(t, Lanes):
            out.append(Lanes(t.ty, tuple(flat[pos:pos + len(t.lanes)])))
            pos += len(t.lanes)
        else:
            out.append(flat[pos])
            pos += 1
    return out
