"""RngExpander ("rng-expander"): `rng` becomes a call of a computation that draws Philox bits
from a key and the module's 128-bit random-number state and shapes them into the distribution
(XLA's `rng_expander.cc` with the distributions of `prng.cc`).

Runs in the `optimization` pipeline, before rng-bit-generator-expander; the call is inlined
later by call-inliner, so hlo-codegen sees integer / float ops plus rng-get-and-update-state:

    %r = f32[2,3] rng(%lo, %hi), distribution=rng_uniform
      =>  %key = u64[] constant(0)
          %state = u64[2] rng-get-and-update-state(), delta=6
          %r = f32[2,3] call(%key, %state, %lo, %hi), to_apply=%rng_uniform_f32_2x3

`delta` is the number of 32-bit words the draw uses (elements, twice for 64-bit types). The
computations (key, state, a, b) -> values, one per (distribution, shape, operand shapes):

    uniform, float   the top mantissa-width bits of each word as an integer, times 2^-mantissa,
                     scaled to [a, b): u * (b - a) + a
    uniform, integer range = b - a as unsigned, d = bits mod range: a + d/2 + (d - d/2)
    normal           Box-Muller on uniform [0, 1) pairs taken along XLA's split dimension
                     (SplitShapeIntoHalves), then mean + sigma * z

f16 / bf16 draws are made in f32 with converted operands and converted back, as XLA does.
The key: XLA xors a value from the module's generator with one from a process-wide generator
(both mt19937_64 seeded with 42, advanced together in a fresh process), which is 0; a module
seed in the config, which XLA would use instead, does not exist here. Declines narrower integers
and pred (XLA's expander cannot expand them either).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hlo_common.hlo.attributes import SliceSpec
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import add_embedded_computation
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes.op_expander_pass import OpExpanderPass
from hlo_opt.passes.rng_bit_generator_expander import _Bits, philox

RNG_KEY = 0  # see the module docstring
_UNSIGNED = {32: "u32", 64: "u64"}
_MANTISSA = {"f32": 23, "f64": 52}


class _Values(_Bits):
    """_Bits plus floating-point constants and binary ops that broadcast scalars."""

    def fconst(self, value: float, et: str, like: HloInstruction | None = None) -> HloInstruction:
        shape = Shape.array(et, ())
        c = self.add("constant", [], shape, literal=np.asarray(value, shape.element_type.np_dtype))
        return c if like is None or like.shape.rank == 0 else self.bcast(c, like.shape.dims)

    def unary(self, opcode: str, x: HloInstruction) -> HloInstruction:
        return self.add(opcode, [x])

    def cut(self, x: HloInstruction, starts, limits) -> HloInstruction:
        spec = SliceSpec(tuple((s, e, 1) for s, e in zip(starts, limits)))
        return self.add("slice", [x], attrs={"slice": spec})


def _bits(b: _Values, key: HloInstruction, state: HloInstruction, dims: tuple[int, ...], width: int):
    """Philox words shaped `dims` (u32 or u64), from state = [counter lo, counter hi]."""
    n = int(np.prod(dims, dtype=np.int64))
    flat, _, _ = philox(b, key, b.word(state, 0), b.word(state, 1), n, width)
    return b.add("reshape", [flat], Shape.array(_UNSIGNED[width], dims))


def _uniform_float(b: _Values, key, state, dims, et: str, a, c) -> HloInstruction:
    width = 64 if et == "f64" else 32
    mantissa = _MANTISSA[et]
    bits = _bits(b, key, state, dims, width)
    top = b.op("shift-right-logical", bits, b.const(width - mantissa, _UNSIGNED[width], bits))
    unit = b.op("multiply", b.convert(top, et), b.fconst(math.ldexp(1.0, -mantissa), et, bits))
    scaled = b.op("multiply", unit, b.op("subtract", c, a))
    return b.op("add", scaled, a)


def _uniform_int(b: _Values, key, state, dims, et: str, a, c) -> HloInstruction:
    width = Shape.array(et, ()).element_type.bits
    unsigned = _UNSIGNED[width]
    bits = _bits(b, key, state, dims, width)
    as_unsigned = [b.add("bitcast-convert", [x], x.shape.with_element_type(unsigned)) for x in (c, a)]
    dist = b.op("remainder", bits, b.op("subtract", *as_unsigned))
    half = b.op("shift-right-logical", dist, b.const(1, unsigned, dist))
    pieces = [b.add("bitcast-convert", [x], x.shape.with_element_type(et))
              for x in (half, b.op("subtract", dist, half))]
    return b.op("add", b.op("add", a, pieces[0]), pieces[1])


def _split_shape(dims: tuple[int, ...]) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """XLA's SplitShapeIntoHalves: (split dimension, half dims, concat dims)."""
    if not dims:
        return 0, (1,), (2,)
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), None)
    if split is None:
        split = max(range(len(dims)), key=lambda i: (dims[i], -i))
    half = dims[:split] + ((dims[split] + 1) // 2, 1) + dims[split + 1:]
    concat = dims[:split] + ((dims[split] + 1) // 2, 2) + dims[split + 1:]
    return split, half, concat


def _normal(b: _Values, key, state, dims, et: str, mean, sigma) -> HloInstruction:
    split, half, concat = _split_shape(dims)
    zero, one = b.fconst(0.0, et), b.fconst(1.0, et)
    uniform = _uniform_float(b, key, state, concat, et, zero, one)
    starts = [0] * len(half)
    x0 = b.cut(uniform, starts, half)
    starts[split + 1 if dims else 0] = 1
    x1 = b.cut(uniform, starts, concat)
    # Box-Muller; the constants are XLA's float literals (1e-7f, 2.0f * M_PI in double).
    u1 = b.op("maximum", x0, b.fconst(float(np.float32(1.0e-7)), et, x0))
    v1 = b.op("multiply", b.fconst(2.0 * math.pi, et, x1), x1)
    u2 = b.unary("sqrt", b.op("multiply", b.fconst(-2.0, et, u1), b.unary("log", u1)))
    pair = [b.op("multiply", b.unary("sine", v1), u2), b.op("multiply", b.unary("cosine", v1), u2)]
    if not dims:
        z = b.add("reshape", [pair[0]], Shape.array(et, ()))
    else:
        joined = b.add("concatenate", pair, attrs={"dimensions": (split + 1,)})
        even = dims[:split] + (concat[split] * 2,) + dims[split + 1:]
        z = b.add("reshape", [joined], Shape.array(et, even))
        if even != dims:
            z = b.cut(z, [0] * len(dims), dims)
    return b.op("add", mean, b.op("multiply", sigma, z))


def rng_computation(distribution: str, shape: Shape, a_shape: Shape, b_shape: Shape) -> HloComputation:
    """(key, state, a_or_mean, b_or_sigma) -> the distribution's values shaped `shape`."""
    et = shape.element_type.name
    dims_text = "x".join(map(str, shape.dims))
    comp = HloComputation(f"rng_{distribution.removeprefix('rng_')}_{et}_{dims_text}")
    b = _Values(comp)
    params = [comp.add_new_instruction("parameter", [], s, name=n, parameter_number=i) for i, (n, s) in
              enumerate((("key", Shape.array("u64", ())), ("state", Shape.array("u64", (2,))),
                         ("a_or_mean", a_shape), ("b_or_sigma", b_shape)))]
    key, state, a, c = params
    if distribution == "rng_normal":
        comp.root = _normal(b, key, state, shape.dims, et, a, c)
    elif shape.element_type.is_float:
        comp.root = _uniform_float(b, key, state, shape.dims, et, a, c)
    else:
        comp.root = _uniform_int(b, key, state, shape.dims, et, a, c)
    return comp


@register_pass
@dataclass
class RngExpander(OpExpanderPass):
    """Rewrites rng as rng-get-and-update-state plus a call of a Philox-based computation."""

    name = "rng-expander"
    _cache: dict = field(default_factory=dict, repr=False)

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        if instr.opcode != "rng" or not instr.shape.is_array:
            return False
        et = instr.shape.element_type
        normal = str(instr.attrs.get("distribution", "rng_uniform")) == "rng_normal"
        if et.is_float:
            return et.name in ("f16", "bf16", "f32", "f64")
        return not normal and not et.is_pred and not et.is_complex and et.bits in (32, 64)

    def run(self, module: HloModule) -> bool:
        self._cache = {}
        return super().run(module)

    def expand_instruction(self, rng: HloInstruction) -> HloInstruction:
        comp = rng.parent
        operands, shape = list(rng.operands), rng.shape
        narrow = shape.element_type.is_float and shape.element_type.bits < 32
        if narrow:  # XLA's ConvertSmallFpRngToF32Rng
            operands = [comp.add_new_instruction("convert", [x], x.shape.with_element_type("f32"))
                        for x in operands]
            shape = shape.with_element_type("f32")
        distribution = str(rng.attrs.get("distribution", "rng_uniform"))
        callee = self._computation(rng.parent.parent, distribution, shape, operands)
        words = shape.num_elements * (shape.element_type.bits // 32)
        key = comp.add_new_instruction("constant", [], Shape.array("u64", ()), literal=np.uint64(RNG_KEY))
        state = comp.add_new_instruction("rng-get-and-update-state", [], Shape.array("u64", (2,)),
                                         {"delta": words})
        call = comp.add_new_instruction("call", [key, state, *operands], shape, {"to_apply": callee})
        if narrow:
            call = comp.add_new_instruction("convert", [call], rng.shape)
        return call

    def _computation(self, module: HloModule, distribution: str, shape: Shape, operands) -> HloComputation:
        cache_key = (distribution, str(shape), str(operands[0].shape), str(operands[1].shape))
        if cache_key not in self._cache:
            comp = rng_computation(distribution, shape, operands[0].shape, operands[1].shape)
            self._cache[cache_key] = add_embedded_computation(module, comp, before=module.computations[0])
        return self._cache[cache_key]
