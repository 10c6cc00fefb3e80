"""TriangularSolveExpander ("triangular_solve_expander", XLA's
`xla/service/triangular_solve_expander.cc`): triangular-solve becomes a while loop of plain HLO
(dot, dynamic-slice, dynamic-update-slice, divide), so the emitters never see it.

XLA:GPU does not run this pass: its `nvptx_compiler.cc` rewrites triangular-solve into a cuBLAS
trsm custom call (TriangularSolveRewriter); XLA:CPU runs the expander. We have no cuBLAS call
here, so the `optimization` pipeline runs it right after `cholesky_expander` for both targets.
The call is inlined later by call-inliner:

    %x = f32[4,3] triangular-solve(%a, %b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
      =>  %x = f32[4,3] call(%a, %b), to_apply=%triangular_solve_expansion

The expansion reduces every variant to one forward substitution on [batch, n, n] / [batch, n, m]
(batch dims flattened): only a's `lower` (else upper) triangle is read (the other is masked to
zero) and `unit_diagonal` puts ones on the diagonal; `transpose_a` TRANSPOSE / ADJOINT transposes
(and conjugates) that triangle; `left_side=false` (x op(a) = b) solves op(a)^T x^T = b^T; an
upper system is turned into a lower one by reversing the rows and columns of a and the rows of b
(and x). Step i of the loop is x[i] = (b[i] - a[i, :] @ x) / a[i, i] (rows of x after i are
still zero). XLA's expander uses blocked substitution with inverted diagonal blocks; this is the
same solution up to rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo_pass.pass_base import register_pass
from hlo_opt.passes._text_expansion import (TextBuilder, dims_text, dynamic_slice, embed_call,
                                              literal_text, splat, swap_minor)
from hlo_opt.passes.op_expander_pass import OpExpanderPass


def _cond(et: str, nb: int, n: int, m: int) -> str:
    state = f"(s32[], {et}[{nb},{n},{n}], {et}[{nb},{n},{m}], {et}[{nb},{n},{m}])"
    b = TextBuilder()
    i = b.op("s32[]", f"get-tuple-element({b.op(state, 'parameter(0)', 'state')}), index=0", "i")
    root = b.op("pred[]", f"compare({i}, {b.op('s32[]', f'constant({n})', 'n')}), direction=LT", "lt")
    return b.computation(f"%triangular_solve_cond (state: {state}) -> pred[]", root)


def _body(et: str, nb: int, n: int, m: int) -> str:
    """Forward substitution, one row of x per step; state (i, a, b, x)."""
    a_shape, b_shape = f"{et}[{nb},{n},{n}]", f"{et}[{nb},{n},{m}]"
    state, bm = f"(s32[], {a_shape}, {b_shape}, {b_shape})", f"{et}[{nb},{m}]"
    b = TextBuilder()
    st = b.op(state, "parameter(0)", "state")
    i, a, rhs, x = (b.op(shape, f"get-tuple-element({st}), index={k}", name) for k, (shape, name) in
                    enumerate((("s32[]", "i"), (a_shape, "a"), (b_shape, "b"), (b_shape, "x"))))
    zero = b.op("s32[]", "constant(0)", "zero")
    row = dynamic_slice(b, et, a, [zero, i, zero], [nb, 1, n])
    row = b.op(f"{et}[{nb},{n}]", f"reshape({row})", "row")
    dot = b.op(bm, f"dot({row}, {x}), lhs_batch_dims={{0}}, lhs_contracting_dims={{1}}, "
               "rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={highest,highest}", "dot")
    bi = dynamic_slice(b, et, rhs, [zero, i, zero], [nb, 1, m])
    r = b.op(bm, f"subtract({b.op(bm, f'reshape({bi})')}, {dot})", "subtract")
    d = dynamic_slice(b, et, a, [zero, i, i], [nb, 1, 1])
    d = b.op(bm, f"broadcast({b.op(f'{et}[{nb}]', f'reshape({d})')}), dimensions={{0}}", "diag")
    xi = b.op(f"{et}[{nb},1,{m}]", f"reshape({b.op(bm, f'divide({r}, {d})', 'divide')})")
    x2 = b.op(b_shape, f"dynamic-update-slice({x}, {xi}, {zero}, {i}, {zero})", "dus")
    i2 = b.op("s32[]", f"add({i}, {b.op('s32[]', 'constant(1)', 'one')})", "next")
    root = b.op(state, f"tuple({i2}, {a}, {rhs}, {x2})", "tuple")
    return b.computation(f"%triangular_solve_body (state: {state}) -> {state}", root)


def _read_triangle(b: TextBuilder, a: str, et: str, nb: int, n: int, lower: bool, unit: bool) -> str:
    """a with the unread triangle zeroed (and ones on the diagonal when `unit`)."""
    shape, dims = f"{et}[{nb},{n},{n}]", f"{nb},{n},{n}"
    rows = b.op(f"s32[{dims}]", "iota(), iota_dimension=1", "rows")
    cols = b.op(f"s32[{dims}]", "iota(), iota_dimension=2", "cols")
    keep = b.op(f"pred[{dims}]", f"compare({cols}, {rows}), direction={'LE' if lower else 'GE'}", "keep")
    zeros = splat(b, et, dims, literal_text(et, "0"))
    a = b.op(shape, f"select({keep}, {a}, {zeros})", "triangle")
    if unit:
        on = b.op(f"pred[{dims}]", f"compare({cols}, {rows}), direction=EQ", "diagonal")
        ones = splat(b, et, dims, literal_text(et, "1"))
        a = b.op(shape, f"select({on}, {ones}, {a})", "unit")
    return a


def expansion_text(instr: HloInstruction) -> str:
    a_shape, b_shape = instr.operands[0].shape, instr.operands[1].shape
    et = instr.shape.element_type.name
    n, nb = a_shape.dims[-1], prod(a_shape.dims[:-2])
    left = bool(instr.attrs.get("left_side", False))
    lower = bool(instr.attrs.get("lower", False))
    transpose = str(instr.attrs.get("transpose_a", "NO_TRANSPOSE"))
    p, q = b_shape.dims[-2:]
    m = q if left else p
    a_text, b_text = f"{et}[{dims_text(a_shape.dims)}]", f"{et}[{dims_text(b_shape.dims)}]"
    b = TextBuilder()
    a = b.op(f"{et}[{nb},{n},{n}]", f"reshape({b.op(a_text, 'parameter(0)', 'a')})")
    rhs = b.op(f"{et}[{nb},{p},{q}]", f"reshape({b.op(b_text, 'parameter(1)', 'b')})")
    a = _read_triangle(b, a, et, nb, n, lower, bool(instr.attrs.get("unit_diagonal", False)))
    if transpose in ("TRANSPOSE", "ADJOINT"):
        a, lower = swap_minor(b, a, et, nb, n, n, conj=transpose == "ADJOINT"), not lower
    if not left:  # x t = b  <=>  t^T x^T = b^T
        a, rhs, lower = swap_minor(b, a, et, nb, n, n), swap_minor(b, rhs, et, nb, p, q), not lower
    mat, vecs = f"{et}[{nb},{n},{n}]", f"{et}[{nb},{n},{m}]"
    if not lower:  # reversing rows and columns makes an upper triangle lower
        a = b.op(mat, f"reverse({a}), dimensions={{1,2}}", "reverse")
        rhs = b.op(vecs, f"reverse({rhs}), dimensions={{1}}", "reverse")
    x0 = splat(b, et, f"{nb},{n},{m}", literal_text(et, "0"))
    state = f"(s32[], {mat}, {vecs}, {vecs})"
    init = b.op(state, f"tuple({b.op('s32[]', 'constant(0)')}, {a}, {rhs}, {x0})")
    loop = b.op(state, f"while({init}), condition=%triangular_solve_cond, "
                "body=%triangular_solve_body", "while")
    x = b.op(vecs, f"get-tuple-element({loop}), index=3", "x")
    if not lower:
        x = b.op(vecs, f"reverse({x}), dimensions={{1}}", "reverse")
    if not left:
        x = swap_minor(b, x, et, nb, n, m)
    root = b.op(b_text, f"reshape({x})", "result")
    entry = b.computation(f"ENTRY %triangular_solve_expansion (a: {a_text}, b: {b_text}) -> {b_text}", root)
    return ("HloModule triangular_solve_expansion\n\n" + _cond(et, nb, n, m) + "\n" + _body(et, nb, n, m)
            + "\n" + entry)


@register_pass
@dataclass
class TriangularSolveExpander(OpExpanderPass):
    """Rewrites triangular-solve as a call of a forward-substitution while loop."""

    name = "triangular_solve_expander"

    def instruction_matches_pattern(self, instr: HloInstruction) -> bool:
        return (instr.opcode == "triangular-solve" and 0 not in instr.shape.dims
                and 0 not in instr.operands[0].shape.dims)

    def expand_instruction(self, instr: HloInstruction) -> HloInstruction:
        return embed_call(instr, expansion_text(instr))
