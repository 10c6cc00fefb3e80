"""FftExpander ("fft_expander", ours): fft becomes dots with DFT matrices built from iota, cos and
sin, so the emitters never see an fft.

XLA:GPU has no such pass: it keeps the fft and calls cuFFT through an FftThunk (XLA:CPU calls
DUCC). We have no FFT library call, so the `optimization` pipeline runs this expansion next to
`cholesky_expander` for both targets. The call is inlined later by call-inliner:

    %y = c64[3,5] fft(%x), fft_type=RFFT, fft_length={9}
      =>  %y = c64[3,5] call(%x), to_apply=%fft_expansion

Each transformed axis d of length n is one dot contracting d with W[j, k] = exp(s 2 pi i (j k mod
n) / n) (s = -1 forward, +1 inverse; the inverse also scales by 1/n as XLA does), followed by a
transpose that puts the new axis back at d: a direct DFT, O(n) work per output element. fft_length
names the last 1-3 dimensions. FFT / IFFT transform them all; RFFT treats the real input as
complex and keeps the first n/2+1 outputs of the last axis (W is [n, n/2+1]) before the other
axes; IRFFT inverts the other axes first, then the last one from its n/2+1 Hermitian half:
x[t] = sum_k c_k (Re X[k] cos - Im X[k] sin)(2 pi k t / n) / n with c_k = 1 for k = 0 and k = n/2,
else 2 (numpy's irfft reads only the real part of those two). The index product j k is reduced
modulo n in integers, so the angles stay exact for long axes. Dots use HIGHEST precision.
Declines an fft whose DFT matrix would hold more than MAX_DFT_ELEMENTS elements (an axis longer
than 4096): that one stays an fft, which hlo-codegen has no emitter for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes._text_expansion import TextBuilder, dims_text, embed_call, real_type, splat
from hlo_opt.passes.op_expander_pass import OpExpanderPass

_COMPLEX_OF = {"f32": "c64", "f64": "c128"}
MAX_DFT_ELEMENTS = 1 << 24


def _angles(b: TextBuilder, rt: str, n_in: int, n_out: int, period: int, sign: int) -> str:
    """rt[n_in, n_out] of sign * 2 pi (j k mod period) / period."""
    it = "s64" if n_in * n_out >= 2**31 else "s32"
    shape, dims = f"{it}[{n_in},{n_out}]", f"{n_in},{n_out}"
    j = b.op(shape, "iota(), iota_dimension=0", "j")
    k = b.op(shape, "iota(), iota_dimension=1", "k")
    period_b = splat(b, it, dims, str(period))
    jk = b.op(shape, f"remainder({b.op(shape, f'multiply({j}, {k})')}, {period_b})", "jk")
    step = splat(b, rt, dims, repr(sign * 2 * math.pi / period))
    return b.op(f"{rt}[{dims}]", f"multiply({b.op(f'{rt}[{dims}]', f'convert({jk})')}, {step})", "angle")


def _dot_on_axis(b: TextBuilder, x: str, dims: list[int], d: int, w: str, et: str,
                 n_out: int) -> tuple[str, list[int]]:
    """Contract axis d of x with w's first dimension; the new axis (n_out) takes d's place."""
    rest = dims[:d] + dims[d + 1:] + [n_out]
    y = b.op(f"{et}[{dims_text(rest)}]", f"dot({x}, {w}), lhs_contracting_dims={{{d}}}, "
             "rhs_contracting_dims={0}, operand_precision={highest,highest}", "dot")
    out = dims[:d] + [n_out] + dims[d + 1:]
    if d != len(dims) - 1:
        perm = list(range(d)) + [len(dims) - 1] + list(range(d, len(dims) - 1))
        y = b.op(f"{et}[{dims_text(out)}]", f"transpose({y}), dimensions={{{dims_text(perm)}}}", "transpose")
    return y, out


def _complex_axis(b: TextBuilder, x: str, dims: list[int], d: int, et: str, n_out: int,
                  inverse: bool) -> tuple[str, list[int]]:
    """The complex DFT (or inverse, scaled by 1/n) of axis d, keeping the first n_out outputs."""
    rt, n = real_type(et), dims[d]
    angle = _angles(b, rt, n, n_out, n, 1 if inverse else -1)
    mat = f"{rt}[{n},{n_out}]"
    cos, sin = b.op(mat, f"cosine({angle})", "cos"), b.op(mat, f"sine({angle})", "sin")
    if inverse:
        scale = splat(b, rt, f"{n},{n_out}", repr(1.0 / n))
        cos, sin = b.op(mat, f"multiply({cos}, {scale})"), b.op(mat, f"multiply({sin}, {scale})")
    w = b.op(f"{et}[{n},{n_out}]", f"complex({cos}, {sin})", "dft")
    return _dot_on_axis(b, x, dims, d, w, et, n_out)


def _complex_to_real_axis(b: TextBuilder, x: str, dims: list[int], et: str, n: int) -> str:
    """IRFFT's last axis: the real signal of length n from its n/2+1 Hermitian half."""
    rt, half = real_type(et), dims[-1]
    mat, it = f"{rt}[{half},{n}]", f"s32[{half},{n}]"
    angle = _angles(b, rt, half, n, n, 1)
    k = b.op(it, "iota(), iota_dimension=0", "k")
    zero = splat(b, "s32", f"{half},{n}", "0")
    twice = b.op(it, f"add({k}, {k})")
    nyquist = splat(b, "s32", f"{half},{n}", str(n))
    first = b.op(f"pred[{half},{n}]", f"compare({k}, {zero}), direction=EQ")
    last = b.op(f"pred[{half},{n}]", f"compare({twice}, {nyquist}), direction=EQ")
    single = b.op(f"pred[{half},{n}]", f"or({first}, {last})", "single")
    one_n, two_n = splat(b, rt, f"{half},{n}", repr(1.0 / n)), splat(b, rt, f"{half},{n}", repr(2.0 / n))
    coef = b.op(mat, f"select({single}, {one_n}, {two_n})", "coef")
    cos = b.op(mat, f"multiply({b.op(mat, f'cosine({angle})', 'cos')}, {coef})")
    sin = b.op(mat, f"sine({angle})", "sin")
    msin = b.op(mat, f"multiply({b.op(mat, f'negate({sin})')}, {coef})")
    d = len(dims) - 1
    re, _ = _dot_on_axis(b, b.op(f"{rt}[{dims_text(dims)}]", f"real({x})", "real"), dims, d, cos, rt, n)
    im, out = _dot_on_axis(b, b.op(f"{rt}[{dims_text(dims)}]", f"imag({x})", "imag"), dims, d, msin, rt, n)
    return b.op(f"{rt}[{dims_text(out)}]", f"add({re}, {im})", "irfft")


def expansion_text(instr: HloInstruction) -> str:
    kind = str(instr.attrs.get("fft_type", "FFT"))
    lengths = [int(v) for v in instr.attrs.get("fft_length", ())]
    in_shape = instr.operands[0].shape
    in_et, out_et = in_shape.element_type.name, instr.shape.element_type.name
    dims = list(in_shape.dims)
    axes = list(range(len(dims) - len(lengths), len(dims)))
    b = TextBuilder()
    x = b.op(f"{in_et}[{dims_text(dims)}]", "parameter(0)", "x")
    if kind == "RFFT":
        et = _COMPLEX_OF[in_et]
        zeros = splat(b, in_et, dims_text(dims), "0")
        x = b.op(f"{et}[{dims_text(dims)}]", f"complex({x}, {zeros})", "complex")
        x, dims = _complex_axis(b, x, dims, axes[-1], et, lengths[-1] // 2 + 1, inverse=False)
        for d in axes[:-1]:
            x, dims = _complex_axis(b, x, dims, d, et, dims[d], inverse=False)
    elif kind == "IRFFT":
        for d in axes[:-1]:
            x, dims = _complex_axis(b, x, dims, d, in_et, dims[d], inverse=True)
        x = _complex_to_real_axis(b, x, dims, in_et, lengths[-1])
    else:
        for d in reversed(axes):
            x, dims = _complex_axis(b, x, dims, d, in_et, dims[d], inverse=kind == "IFFT")
    root = b.op(f"{out_et}[{dims_text(instr.shape.dims)}]", f"copy({x})", "result")
    in_text, out_text = f"{in_et}[{dims_text(in_shape.dims)}]", f"{out_et}[{dims_text(instr.shape.dims)}]"
    header = f"ENTRY %fft_expansion (x: {in_text}) -> {out_text}"
    return "HloModule fft_expansion\n\n" + b.computation(header, root)


@register_pass
@dataclass
class FftExpander(OpExpanderPass):
    """Rewrites fft as a call of dots with DFT matrices."""

    name = "fft_expander"

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        if instr.opcode != "fft" or 0 in instr.shape.dims or 0 in instr.operands[0].shape.dims:
            return False
        lengths = [int(v) for v in instr.attrs.get("fft_length", ())]
        if any(n * n > MAX_DFT_ELEMENTS for n in lengths):
            return False
        return str(instr.attrs.get("fft_type", "FFT")) in ("FFT", "IFFT", "RFFT", "IRFFT")

    def expand_instruction(self, instr: HloInstruction) -> HloInstruction:
        return embed_call(instr, expansion_text(instr))
