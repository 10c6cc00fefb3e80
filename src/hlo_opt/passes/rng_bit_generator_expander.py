"""RngBitGeneratorExpander ("rng-bit-generator-expander"): rng-bit-generator becomes a call of a
computation that runs the Philox-4x32 or ThreeFry-2x32 counter-based generator in plain integer
HLO ops (XLA builds the same with `prng.cc` on XlaBuilder).

Runs in the `optimization` pipeline; the call is inlined later by call-inliner:

    %r = (u64[2], u32[8]) rng-bit-generator(%state), algorithm=rng_philox
      =>  %r = (u64[2], u32[8]) call(%state), to_apply=%rng_philox_u32_8

The generator computations are cached per (algorithm, state shape, data shape). Philox (the
default algorithm, as on XLA:GPU) takes the key from state[0] and a 128-bit counter from
state[1..2] (state[1] and the key when the state has two words), produces four 32-bit words per
counter and advances the counter by the number of counters used; ThreeFry takes the counter from
state[1], pairs words along the first even (else largest) dimension for 32-bit data and advances
by the number of counter values. 8- and 16-bit data keep the low bits of each 32-bit word; signed
and floating-point data are the same bits bitcast. Words of a longer state past the ones the
algorithm reads (ThreeFry's state[2:], Philox's state[3:]) come back unchanged, as the interpreter
and XLA's evaluator keep them (XLA's expander itself returns only the words it read, a state shape
that differs from the instruction's). Declines: sub-byte or pred data, states shorter than two
words or not u64, unknown algorithms.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import add_embedded_computation
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes.op_expander_pass import OpExpanderPass

_UNSIGNED = {8: "u8", 16: "u16", 32: "u32", 64: "u64"}
_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)


class _Bits:
    """Builds unsigned-integer HLO in one computation; array operands get broadcast scalars."""

    def __init__(self, comp: HloComputation):
        self.comp = comp

    def add(self, opcode: str, operands, shape: Shape | None = None, attrs=None, **fields) -> HloInstruction:
        return self.comp.add_new_instruction(opcode, operands, shape, attrs, **fields)

    def const(self, value: int, et: str, like: HloInstruction | None = None) -> HloInstruction:
        shape = Shape.array(et, ())
        literal = np.asarray(value, np.uint64).astype(shape.element_type.np_dtype)
        c = self.add("constant", [], shape, literal=literal)
        return c if like is None or like.shape.rank == 0 else self.bcast(c, like.shape.dims)

    def bcast(self, scalar: HloInstruction, dims) -> HloInstruction:
        shape = Shape.array(scalar.shape.element_type, dims)
        return self.add("broadcast", [scalar], shape, {"dimensions": ()})

    def op(self, opcode: str, a: HloInstruction, b: HloInstruction) -> HloInstruction:
        if a.shape.rank != b.shape.rank:  # scalar with array
            a, b = (self.bcast(a, b.shape.dims), b) if a.shape.rank == 0 else (a, self.bcast(b, a.shape.dims))
        return self.add(opcode, [a, b])

    def convert(self, x: HloInstruction, et: str) -> HloInstruction:
        return self.add("convert", [x], x.shape.with_element_type(et))

    def lo32(self, x: HloInstruction) -> HloInstruction:
        return self.convert(self.op("and", x, self.const(0xFFFFFFFF, "u64", x)), "u32")

    def hi32(self, x: HloInstruction) -> HloInstruction:
        return self.convert(self.op("shift-right-logical", x, self.const(32, "u64", x)), "u32")

    def join64(self, lo: HloInstruction, hi: HloInstruction) -> HloInstruction:
        high = self.op("shift-left", self.convert(hi, "u64"), self.const(32, "u64", hi))
        return self.op("or", self.convert(lo, "u64"), high)

    def rotl(self, x: HloInstruction, d: int) -> HloInstruction:
        left = self.op("shift-left", x, self.const(d, "u32", x))
        return self.op("or", left, self.op("shift-right-logical", x, self.const(32 - d, "u32", x)))

    def word(self, state: HloInstruction, i: int) -> HloInstruction:
        from hlo_common.hlo.attributes import SliceSpec

        piece = self.add("slice", [state], attrs={"slice": SliceSpec(((i, i + 1, 1),))})
        return self.add("reshape", [piece], Shape.array("u64", ()))

    def vector(self, scalars: list[HloInstruction], tail: HloInstruction | None = None) -> HloInstruction:
        """The scalars as a rank-1 array, followed by the rank-1 `tail` when given."""
        parts = [self.add("reshape", [s], Shape.array(s.shape.element_type, (1,))) for s in scalars]
        parts += [tail] if tail is not None else []
        return parts[0] if len(parts) == 1 else self.add("concatenate", parts, attrs={"dimensions": (0,)})

    def tail(self, state: HloInstruction, start: int) -> HloInstruction | None:
        """state[start:] when the state has words there, else None."""
        from hlo_common.hlo.attributes import SliceSpec

        length = state.shape.dims[0]
        if length <= start:
            return None
        return self.add("slice", [state], attrs={"slice": SliceSpec(((start, length, 1),))})

    def interleave(self, words: list[HloInstruction], axis: int, out_dims) -> HloInstruction:
        """Stack `words` along a new dimension after `axis`, merge it into `axis`, cut to `out_dims`."""
        from hlo_common.hlo.attributes import SliceSpec

        dims = words[0].shape.dims
        et = words[0].shape.element_type
        widened = dims[:axis + 1] + (1,) + dims[axis + 1:]
        parts = [self.add("reshape", [w], Shape.array(et, widened)) for w in words]
        stacked = self.add("concatenate", parts, attrs={"dimensions": (axis + 1,)})
        merged = dims[:axis] + (dims[axis] * len(words),) + dims[axis + 1:]
        flat = self.add("reshape", [stacked], Shape.array(et, merged))
        if merged == tuple(out_dims):
            return flat
        return self.add("slice", [flat], attrs={"slice": SliceSpec(tuple((0, d, 1) for d in out_dims))})

    def counter_plus(self, lo: HloInstruction, hi: HloInstruction,
                     n: int) -> tuple[HloInstruction, HloInstruction]:
        """(lo, hi) + n as a 128-bit number."""
        new_lo = self.op("add", lo, self.const(n, "u64", lo))
        carry = self.add("compare", [new_lo, lo], attrs={"direction": "LT"})
        hi_plus = self.op("add", hi, self.const(1, "u64", hi))
        return new_lo, self.add("select", [carry, hi_plus, hi])


def philox(b: _Bits, key: HloInstruction, lo: HloInstruction, hi: HloInstruction, n: int, bits: int):
    """(words as a flat u32/u64[n], new counter lo, new counter hi)."""
    groups = (n * (2 if bits == 64 else 1) + 3) // 4
    idx = b.add("iota", [], Shape.array("u64", (groups,)), {"iota_dimension": 0})
    lo_b, hi_b = b.bcast(lo, (groups,)), b.bcast(hi, (groups,))
    c_lo = b.op("add", idx, lo_b)
    carry = b.add("compare", [c_lo, lo_b], attrs={"direction": "LT"})
    c_hi = b.add("select", [carry, b.op("add", hi_b, b.const(1, "u64", hi_b)), hi_b])
    x = [b.lo32(c_lo), b.hi32(c_lo), b.lo32(c_hi), b.hi32(c_hi)]
    k0, k1 = b.lo32(key), b.hi32(key)
    for _ in range(10):
        p0 = b.op("multiply", b.convert(x[0], "u64"), b.const(0xD2511F53, "u64", x[0]))
        p1 = b.op("multiply", b.convert(x[2], "u64"), b.const(0xCD9E8D57, "u64", x[2]))
        x = [b.op("xor", b.op("xor", b.hi32(p1), x[1]), k0), b.lo32(p1),
             b.op("xor", b.op("xor", b.hi32(p0), x[3]), k1), b.lo32(p0)]
        k0, k1 = b.op("add", k0, b.const(0x9E3779B9, "u32")), b.op("add", k1, b.const(0xBB67AE85, "u32"))
    words = [b.join64(x[0], x[1]), b.join64(x[2], x[3])] if bits == 64 else x
    flat = b.interleave(words, 0, (n,))
    new_lo, new_hi = b.counter_plus(lo, hi, groups)
    return flat, new_lo, new_hi


def threefry2x32(b: _Bits, x0: HloInstruction, x1: HloInstruction, key: HloInstruction):
    ks = [b.lo32(key), b.hi32(key)]
    ks.append(b.op("xor", b.op("xor", b.const(0x1BD11BDA, "u32"), ks[0]), ks[1]))
    x0, x1 = b.op("add", x0, ks[0]), b.op("add", x1, ks[1])
    for block in range(5):
        for r in _ROTATIONS[(block % 2) * 4:(block % 2) * 4 + 4]:
            x0 = b.op("add", x0, x1)
            x1 = b.op("xor", b.rotl(x1, r), x0)
        x0 = b.op("add", x0, ks[(block + 1) % 3])
        x1 = b.op("add", x1, b.op("add", ks[(block + 2) % 3], b.const(block + 1, "u32")))
    return x0, x1


def threefry(b: _Bits, key: HloInstruction, counter: HloInstruction, dims: tuple[int, ...], bits: int):
    """(words shaped `dims`, new counter)."""
    if bits == 64 or not dims:
        n = int(np.prod(dims, dtype=np.int64)) if dims else 1
        inputs = b.op("add", b.add("iota", [], Shape.array("u64", (n,)), {"iota_dimension": 0}), counter)
        o0, o1 = threefry2x32(b, b.lo32(inputs), b.hi32(inputs), key)
        out = b.join64(o0, o1) if bits == 64 else o0
        return b.add("reshape", [out], Shape.array(out.shape.element_type, dims)), \
            b.op("add", counter, b.const(n, "u64"))
    # XLA's SplitShapeIntoHalves: the first even dimension, else the (first) largest one.
    largest = max(range(len(dims)), key=lambda i: (dims[i], -i))
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), largest)
    half = list(dims)
    half[split] = (dims[split] + 1) // 2
    n = int(np.prod(half, dtype=np.int64))
    inputs = b.op("add", b.add("iota", [], Shape.array("u64", (n,)), {"iota_dimension": 0}), counter)
    o0, o1 = threefry2x32(b, b.lo32(inputs), b.hi32(inputs), key)
    words = [b.add("reshape", [o], Shape.array("u32", half)) for o in (o0, o1)]
    return b.interleave(words, split, dims), b.op("add", counter, b.const(n, "u64"))


def generator_computation(algorithm: str, state_shape: Shape, data_shape: Shape) -> HloComputation:
    et = data_shape.element_type
    bits = 64 if et.bits == 64 else 32
    dims_text = "x".join(map(str, data_shape.dims))
    comp = HloComputation(f"rng_{algorithm.removeprefix('rng_')}_{et.name}_{dims_text}")
    b = _Bits(comp)
    state = comp.add_new_instruction("parameter", [], state_shape, name="state", parameter_number=0)
    key = b.word(state, 0)
    if algorithm == "rng_three_fry":
        data, counter = threefry(b, key, b.word(state, 1), data_shape.dims, bits)
        new_state = b.vector([key, counter], b.tail(state, 2))
    else:
        hi = b.word(state, 2) if state_shape.dims[0] >= 3 else key
        n = int(np.prod(data_shape.dims, dtype=np.int64))
        flat, new_lo, new_hi = philox(b, key, b.word(state, 1), hi, n, bits)
        data = b.add("reshape", [flat], Shape.array(flat.shape.element_type, data_shape.dims))
        words = [key, new_lo, new_hi] if state_shape.dims[0] >= 3 else [key, new_lo]
        new_state = b.vector(words, b.tail(state, 3))
    if et.bits < 32:
        data = b.convert(data, _UNSIGNED[et.bits])
    if data.shape.element_type is not et:
        data = b.add("bitcast-convert", [data], data.shape.with_element_type(et))
    comp.root = comp.add_new_instruction("tuple", [new_state, data])
    return comp


@register_pass
@dataclass
class RngBitGeneratorExpander(OpExpanderPass):
    """Rewrites rng-bit-generator as a call of a Philox / ThreeFry computation."""

    name = "rng-bit-generator-expander"
    default_algorithm: str = "rng_philox"
    _cache: dict = field(default_factory=dict, repr=False)

    def _algorithm(self, instr: HloInstruction) -> str:
        algorithm = str(instr.attrs.get("algorithm", "rng_default"))
        return self.default_algorithm if algorithm == "rng_default" else algorithm

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        if instr.opcode != "rng-bit-generator":
            return False
        algorithm, state = self._algorithm(instr), instr.operands[0].shape
        et = instr.shape.tuple_shapes[1].element_type
        known = algorithm in ("rng_philox", "rng_three_fry")
        words = state.rank == 1 and state.dims[0] >= 2 and state.element_type.name == "u64"
        return known and words and et.bits in _UNSIGNED and not et.is_pred

    def run(self, module: HloModule) -> bool:
        self._cache = {}
        return super().run(module)

    def expand_instruction(self, rng: HloInstruction) -> HloInstruction:
        algorithm = self._algorithm(rng)
        state_shape, data_shape = rng.operands[0].shape, rng.shape.tuple_shapes[1]
        key = (algorithm, str(state_shape), str(data_shape))
        if key not in self._cache:
            comp = generator_computation(algorithm, state_shape, data_shape)
            module = rng.parent.parent  # no callees: first in the module is before every caller
            self._cache[key] = add_embedded_computation(module, comp, before=module.computations[0])
        return rng.parent.add_new_instruction("call", [rng.operands[0]], rng.shape,
                                              {"to_apply": self._cache[key]}, name="call")
