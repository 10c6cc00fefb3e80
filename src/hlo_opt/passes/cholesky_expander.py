"""CholeskyExpander ("cholesky_expander", XLA's `xla/service/cholesky_expander.cc`): cholesky
becomes a while loop of plain HLO (dot, dynamic-slice, dynamic-update-slice, select, sqrt), so
the emitters never see a cholesky.

Runs in the `optimization` pipeline; the call is inlined later by call-inliner:

    %l = f32[2,4,4] cholesky(%a), lower=true
      =>  %l = f32[2,4,4] call(%a), to_apply=%cholesky_expansion

The expansion works on the matrices as [batch, n, n] (batch dims flattened) in the lower form
(for `lower=false` it factors the conjugate transpose and transposes back, U = L^H). Step j of
the loop (XLA's unblocked algorithm, one column per step) computes column j from the columns
before it:

    c = a[:, j] - L[:, :j] @ conj(L[j, :j]);  L[j, j] = sqrt(c[j]);  L[j+1:, j] = c[j+1:] / L[j, j]

and zeroes the other triangle. A matrix whose pivot is not positive (or NaN) at some step is
not positive definite: its whole result is NaN, as XLA's expander and the interpreter give.
Differences from XLA: no blocking (XLA factors 128-column blocks with a triangular solve for the
panel), which changes only rounding; the result is identical in exact arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes._text_expansion import (TextBuilder, conj_text, dims_text, dynamic_slice, embed_call,
                                              literal_text, real_type, splat, swap_minor)
from hlo_opt.passes.op_expander_pass import OpExpanderPass


def _body(et: str, nb: int, n: int) -> str:
    """One column of L per step; state (j, L, ok) with ok[b] false once a pivot was not positive."""
    rt, bn, mat = real_type(et), f"{nb},{n}", f"{et}[{nb},{n},{n}]"
    state = f"(s32[], {mat}, pred[{nb}])"
    b = TextBuilder()
    st = b.op(state, "parameter(0)", "state")
    j = b.op("s32[]", f"get-tuple-element({st}), index=0", "j")
    lmat = b.op(mat, f"get-tuple-element({st}), index=1", "l")
    ok = b.op(f"pred[{nb}]", f"get-tuple-element({st}), index=2", "ok")
    zero = b.op("s32[]", "constant(0)", "zero")
    row = b.op(f"{et}[{bn}]", f"reshape({dynamic_slice(b, et, lmat, [zero, j, zero], [nb, 1, n])})")
    k = b.op(f"s32[{bn}]", "iota(), iota_dimension=1", "iota")
    jb = b.op(f"s32[{bn}]", f"broadcast({j}), dimensions={{}}", "jb")
    zeros = splat(b, et, bn, literal_text(et, "0"))
    before = b.op(f"pred[{bn}]", f"compare({k}, {jb}), direction=LT", "before")
    row = conj_text(b, b.op(f"{et}[{bn}]", f"select({before}, {row}, {zeros})"), f"{et}[{bn}]", et, bn)
    dot = b.op(f"{et}[{bn}]", f"dot({lmat}, {row}), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, "
               "rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={highest,highest}", "dot")
    col = b.op(f"{et}[{bn}]", f"reshape({dynamic_slice(b, et, lmat, [zero, zero, j], [nb, n, 1])})")
    c = b.op(f"{et}[{bn}]", f"subtract({col}, {dot})", "c")
    d = b.op(f"{et}[{nb}]", f"reshape({dynamic_slice(b, et, c, [zero, j], [nb, 1])})")
    if rt != et:
        d = b.op(f"{rt}[{nb}]", f"real({d})", "real")
    rzero = splat(b, rt, str(nb), "0")
    pos = b.op(f"pred[{nb}]", f"compare({d}, {rzero}), direction=GT", "pos")
    ok2 = b.op(f"pred[{nb}]", f"and({ok}, {pos})", "ok")
    pivot = b.op(f"{rt}[{nb}]", f"sqrt({d})", "sqrt")
    if rt != et:
        pivot = b.op(f"{et}[{nb}]", f"complex({pivot}, {rzero})", "complex")
    pivots = b.op(f"{et}[{bn}]", f"broadcast({pivot}), dimensions={{0}}", "pivots")
    scaled = b.op(f"{et}[{bn}]", f"divide({c}, {pivots})", "scaled")
    below = b.op(f"pred[{bn}]", f"compare({k}, {jb}), direction=GT", "below")
    on = b.op(f"pred[{bn}]", f"compare({k}, {jb}), direction=EQ", "diag")
    new = b.op(f"{et}[{bn}]", f"select({below}, {scaled}, {zeros})")
    new = b.op(f"{et}[{bn}]", f"select({on}, {pivots}, {new})")
    new = b.op(f"{et}[{nb},{n},1]", f"reshape({new})")
    l2 = b.op(mat, f"dynamic-update-slice({lmat}, {new}, {zero}, {zero}, {j})", "dus")
    j2 = b.op("s32[]", f"add({j}, {b.op('s32[]', 'constant(1)', 'one')})", "next")
    root = b.op(state, f"tuple({j2}, {l2}, {ok2})", "tuple")
    return b.computation(f"%cholesky_body (state: {state}) -> {state}", root)


def _cond(et: str, nb: int, n: int) -> str:
    state = f"(s32[], {et}[{nb},{n},{n}], pred[{nb}])"
    b = TextBuilder()
    j = b.op("s32[]", f"get-tuple-element({b.op(state, 'parameter(0)', 'state')}), index=0", "j")
    root = b.op("pred[]", f"compare({j}, {b.op('s32[]', f'constant({n})', 'n')}), direction=LT", "lt")
    return b.computation(f"%cholesky_cond (state: {state}) -> pred[]", root)


def expansion_text(instr: HloInstruction) -> str:
    shape, et = instr.shape, instr.shape.element_type.name
    dims, n = tuple(shape.dims), shape.dims[-1]
    nb, lower = prod(dims[:-2]), bool(instr.attrs.get("lower", False))
    orig, mat = f"{et}[{dims_text(dims)}]", f"{et}[{nb},{n},{n}]"
    b = TextBuilder()
    a = b.op(mat, f"reshape({b.op(orig, 'parameter(0)', 'a')})")
    if not lower:
        a = swap_minor(b, a, et, nb, n, n, conj=True)
    true = b.op(f"pred[{nb}]", f"broadcast({b.op('pred[]', 'constant(true)')}), dimensions={{}}")
    init = b.op(f"(s32[], {mat}, pred[{nb}])", f"tuple({b.op('s32[]', 'constant(0)')}, {a}, {true})")
    loop = b.op(f"(s32[], {mat}, pred[{nb}])",
                f"while({init}), condition=%cholesky_cond, body=%cholesky_body", "while")
    lmat = b.op(mat, f"get-tuple-element({loop}), index=1")
    ok = b.op(f"pred[{nb}]", f"get-tuple-element({loop}), index=2")
    ok = b.op(f"pred[{nb},{n},{n}]", f"broadcast({ok}), dimensions={{0}}")
    rt = real_type(et)
    nan = b.op(f"{rt}[]", "constant(nan)", "nan")
    if rt != et:
        nan = b.op(f"{et}[]", f"complex({nan}, {b.op(f'{rt}[]', 'constant(0)')})")
    result = b.op(mat, f"select({ok}, {lmat}, {b.op(mat, f'broadcast({nan}), dimensions={{}}')})", "select")
    if not lower:
        result = swap_minor(b, result, et, nb, n, n, conj=True)
    root = b.op(orig, f"reshape({result})", "result")
    entry = b.computation(f"ENTRY %cholesky_expansion (a: {orig}) -> {orig}", root)
    return "HloModule cholesky_expansion\n\n" + _cond(et, nb, n) + "\n" + _body(et, nb, n) + "\n" + entry


@register_pass
@dataclass
class CholeskyExpander(OpExpanderPass):
    """Rewrites cholesky as a call of a column-by-column while loop."""

    name = "cholesky_expander"

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        return instr.opcode == "cholesky" and 0 not in instr.shape.dims

    def expand_instruction(self, instr: HloInstruction) -> HloInstruction:
        return embed_call(instr, expansion_text(instr))
