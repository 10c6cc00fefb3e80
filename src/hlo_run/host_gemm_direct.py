"""A GEMM fusion's dot written straight into its output buffer, its epilogue applied block by block.

Where it sits: `host_gemm_fusion.run_gemm_fusion` asks `direct_plan` first for every
GemmFusionThunk the host runs, and evaluates the fusion with the interpreter only when there is
no plan. A plan exists for the fusions XLA:GPU's gemm-fusion pass writes most often
(`xla/service/gpu/transforms/gemm_fusion.cc`): one f32-accumulating dot whose result (f32, bf16
or f16) is the root, or the operand of a chain of same-shaped elementwise ops that ends at the
root (a bias add, a scale, a convert), the other operands of that chain computed without the
dot (broadcasts of parameters and constants, parameters). Then:

- the prologue (everything the dot does not depend on: the operands' transposes, the scaled and
  shifted activations of a fused layer norm, the epilogue's broadcasts) is evaluated instruction
  by instruction with the interpreter's own handlers, as its evaluation would;
- the dot runs through the host GEMM (`host_blas.sgemm_batched`) with its f32 result in the
  fusion's output buffer (an f32 root) or a scratch array (a 16-bit one): no copy of the result;
- the dot's rounding to its type and the epilogue run, with the interpreter's handlers, on each
  block of rows the GEMM finishes, on the thread that finished it, while the block is in cache.

Every value is the interpreter's: the same handlers on the same elements (elementwise ops do not
depend on how an array is cut), and the same product as the interpreter's evaluation under
`numeric.f32_product(host_product)`, which splits the same matrices the same way. The host tests
compare the two paths bit for bit (tests/unit/hlo_run/test_host_gemm_direct.py).

    plan = direct_plan(module)          # None: evaluate the fusion with the interpreter
    plan.run(operands, out)             # the root's value, in `out` when it could be written there
"""

from __future__ import annotations

import math

import numpy as np

from hlo_common.hlo.ir import HloInstruction

# Elementwise opcodes whose interpreter handlers compute each element from the same elements of
# their operands whatever the arrays' shapes (so a block of rows gives that block of the result).
ELEMENTWISE = frozenset({
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "convert", "negate", "abs",
    "exponential", "tanh", "logistic", "sqrt", "rsqrt", "erf", "log",
})
_MAX_OUTPUT_DIMS = 8


def _post_order(root: HloInstruction) -> list[HloInstruction]:
    """The instructions `root` depends on, each after its operands (an explicit stack: deep chains)."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        instr, done = stack.pop()
        if done:
            order.append(instr)
            continue
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        stack.append((instr, True))
        stack.extend((o, False) for o in reversed(instr.operands) if id(o) not in seen)
    return order


class DirectPlan:
    """What `run` evaluates: `prologue` (without the dot, in order), the `dot`, then `epilogue`
    (the dot's users up to the root, in order) on each block of the dot's rows."""

    def __init__(self, prologue: list, dot: HloInstruction, epilogue: list, root: HloInstruction):
        from hlo_common.interpreter import fast
        from hlo_common.interpreter.evaluator import Evaluator
        from hlo_common.interpreter.registry import HANDLERS

        self.ev = Evaluator()  # registers the handlers; passed to them as their evaluator
        self.prologue, self.dot, self.epilogue, self.root = prologue, dot, epilogue, root
        self.handlers = {id(i): fast.specialize(i) or HANDLERS[i.opcode] for i in epilogue}

    def run(self, operands: list[np.ndarray], out: np.ndarray | None) -> np.ndarray | None:
        """The root's value (`out` itself when it was written there), or None when the operands'
        types or the output view do not fit (the caller then evaluates the fusion)."""
        from hlo_common.interpreter.linalg import _dot_dims
        from hlo_common.interpreter.numeric import dot_general, to_accumulation

        values = self._prologue(operands)
        result_type = self.dot.shape.element_type
        a, b = (to_accumulation(values[id(o)], result_type) for o in self.dot.operands)
        if a.dtype != np.float32 or b.dtype != np.float32:
            return None
        dims = self.dot.shape.dims
        root_dtype = self.root.shape.element_type.np_dtype
        fits = (out is not None and out.flags.c_contiguous and out.shape == tuple(dims)
                and out.dtype == root_dtype)
        dest = out if fits else np.empty(dims, root_dtype)
        f32_in_dest = result_type.np_dtype == np.float32 and root_dtype == np.float32
        acc = dest if f32_in_dest else np.empty(dims, np.float32)
        epilogue = self._blocks(values, acc, dest, dot_general, _dot_dims(self.dot), a, b)
        dot_general(a, b, *_dot_dims(self.dot), out=acc, product=epilogue)
        return dest

    def _prologue(self, operands: list[np.ndarray]) -> dict[int, np.ndarray]:
        values: dict[int, np.ndarray] = {}
        for instr in self.prologue:
            if instr.opcode == "parameter":
                values[id(instr)] = operands[instr.parameter_number]
            else:
                ops = [values[id(o)] for o in instr.operands]
                values[id(instr)] = self.ev.evaluate_instruction(instr, ops)
        return values

    def _blocks(self, values: dict, acc: np.ndarray, dest: np.ndarray, dot_general, dims, a, b):
        """The product function `dot_general` calls: the host GEMM on the stacks it is given,
        with the rounding and the epilogue per finished block of rows (when there is one)."""
        from hlo_common.interpreter.numeric import to_element_type
        from hlo_run.host_blas import sgemm_batched

        dot_type = self.dot.shape.element_type
        plain = acc is dest and not self.epilogue

        def product(sa: np.ndarray, sb: np.ndarray, target: np.ndarray) -> np.ndarray:
            batch = math.prod(sa.shape[:-2])
            m, n = sa.shape[-2], sb.shape[-1]
            a3, b3 = sa.reshape(batch, m, -1), sb.reshape(batch, *sb.shape[-2:])
            acc3 = target.reshape(batch, m, n)
            if plain:
                sgemm_batched(a3, b3, acc3)
                return target
            dest3 = _view(dest, (batch, m, n))
            sides = {key: _view(v, (batch, m, n)) for key, v in values.items()
                     if any(id(o) == key for e in self.epilogue for o in e.operands)}

            def block(i: int, r0: int, r1: int) -> None:
                with np.errstate(all="ignore"):
                    rows = {id(self.dot): to_element_type(acc3[i, r0:r1], dot_type)}
                    for e in self.epilogue:
                        ops = [rows[id(o)] if id(o) in rows else sides[id(o)][i, r0:r1] for o in e.operands]
                        rows[id(e)] = self.handlers[id(e)](e, ops, self.ev)
                    dest3[i, r0:r1] = rows[id(self.root)]

            sgemm_batched(a3, b3, acc3, epilogue=block)
            return target

        return product


def _view(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """x reshaped to `shape` without a copy where its strides allow (a broadcast bias stays a
    broadcast), else a copy."""
    v = x.view()
    try:
        v.shape = shape
    except AttributeError:
        return np.ascontiguousarray(x).reshape(shape)
    return v


def direct_plan(module) -> DirectPlan | None:
    """A plan for the fusion computation `module.entry` (see the module docstring), or None."""
    comp = module.entry
    root = comp.root
    order = _post_order(root)
    dots = [i for i in order if i.opcode == "dot"]
    if len(dots) != 1 or root.shape.is_tuple or not 0 < len(root.shape.dims) <= _MAX_OUTPUT_DIMS:
        return None
    dot = dots[0]
    t = dot.shape.element_type
    if not t.is_float or t.bits not in (16, 32) or len(dot.operands) != 2:
        return None
    after: set[int] = {id(dot)}
    prologue, epilogue = [], []
    for instr in order:
        if instr is dot:
            continue
        if any(id(o) in after for o in instr.operands):
            if instr.opcode not in ELEMENTWISE or instr.shape.dims != dot.shape.dims \
                    or not instr.shape.element_type.is_float or len(instr.operands) > 2:
                return None
            after.add(id(instr))
            epilogue.append(instr)
        else:
            prologue.append(instr)
    for e in epilogue:  # an operand from the prologue is read by rows: it must have the dot's dims
        if any(id(o) not in after and o.shape.dims != dot.shape.dims for o in e.operands):
            return None
    if root is not dot and id(root) not in after:
        return None
    return DirectPlan(prologue, dot, epilogue, root)


__all__ = ["DirectPlan", "direct_plan"]
