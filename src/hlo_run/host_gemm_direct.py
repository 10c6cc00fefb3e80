"""A GEMM fusion's dot written straight into its output buffer, its epilogue applied block by block.

Where it sits: `host_gemm_fusion.run_gemm_fusion` asks `direct_plan` first for every
GemmFusionThunk the host runs, and evaluates the fusion with the interpreter only when there is
no plan. A plan exists for the fusions XLA:GPU's gemm-fusion pass writes most often
(`xla/service/gpu/transforms/gemm_fusion.cc`): one f32-accumulating dot whose result (f32, bf16
or f16) is the root, or the operand of a chain of same-shaped elementwise ops that ends at the
root (a bias add, a scale, a convert), the other operands of that chain computed without the
dot (broadcasts of parameters and constants, parameters), or an f32 dot whose root transposes it
keeping the last dim last. Then:

- the prologue (everything the dot does not depend on: the operands' transposes, the scaled and
  shifted activations of a fused layer norm, the epilogue's broadcasts) is evaluated instruction
  by instruction with the interpreter's own handlers, as its evaluation would, but for a dot
  operand computed by elementwise ops the interpreter's compiled regions compile, which runs as
  one compiled loop (`host_gemm_epilogue.prologue_chains`);
- the dot runs through the host GEMM (`host_blas.sgemm_batched`; bf16 operands as they are, the
  GEMM widening them exactly as it reads them), its f32 result written in the fusion's output
  buffer when it is the root (through the transposed view for a transposed root): no copy of the
  result. The output buffer is not used when it shares memory with an operand (a residual the
  epilogue adds may own it);
- an f32 dot's first epilogue ops `multiply(dot, broadcast(scalar))` and `add(., broadcast(v))`
  along the columns run in the GEMM's store of each finished sum (`_fold`);
- the dot's rounding to its type and the rest of the epilogue run on each block of rows the GEMM
  finishes, on the thread that finished it, from that thread's scratch block of sums (in L2; the
  f32 sums of the whole product are never stored): one compiled loop when every op is one the
  interpreter's compiled regions compile (`host_gemm_epilogue`), else the interpreter's handlers,
  with bf16 results of add, subtract, multiply and the dot rounded by the JIT's
  `host_blas.round_bf16` (ml_dtypes' bits, four times faster).

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

from hlo_common.hlo.graph import post_order
from hlo_common.hlo.ir import HloInstruction
from hlo_run.host_gemm_epilogue import CompiledEpilogue, prologue_chains

# Elementwise opcodes whose interpreter handlers compute each element from the same elements of
# their operands whatever the arrays' shapes (so a block of rows gives that block of the result).
ELEMENTWISE = frozenset({
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "convert", "negate", "abs",
    "exponential", "tanh", "logistic", "sqrt", "rsqrt", "erf", "log",
})
_MAX_OUTPUT_DIMS = 8


class DirectPlan:
    """What `run` evaluates: `prologue` (without the dot, in order), the `dot` (times the scalar
    `alpha` plus the column vector `bias` where the fusion's first epilogue ops are those, in
    the GEMM's store: `head` is then the last of them), then `epilogue` (the rest of the dot's
    users up to the root, in order) on each block of the dot's rows."""

    def __init__(self, prologue: list, dot: HloInstruction, epilogue: list, root: HloInstruction,
                 folded: dict, perm: tuple[int, ...] | None = None):
        from hlo_common.interpreter import fast
        from hlo_common.interpreter.evaluator import Evaluator
        from hlo_common.interpreter.registry import HANDLERS

        self.ev = Evaluator()  # registers the handlers; passed to them as their evaluator
        self.prologue, self.dot, self.epilogue, self.root = prologue, dot, epilogue, root
        self.alpha, self.bias = folded.get("alpha"), folded.get("bias")  # their scalar and vector
        self.head = folded.get("head", dot)
        self.perm = perm  # the root is transpose(dot) with these dimensions
        self.handlers = {id(i): _bf16_binary(i) or fast.specialize(i) or HANDLERS[i.opcode]
                         for i in epilogue}
        self.compiled = CompiledEpilogue.build(self.head, epilogue, root) if perm is None else None
        self.chains = prologue_chains(prologue, dot)  # dot operands computed by one compiled loop
        self.in_chains = {id(m) for _, chain in self.chains.values() for m in chain[:-1]}

    def run(self, operands: list[np.ndarray], out: np.ndarray | None) -> np.ndarray | None:
        """The root's value (`out` itself when it was written there), or None when the operands'
        types do not fit (the caller then evaluates the fusion)."""
        from hlo_common.interpreter.linalg import _dot_dims
        from hlo_common.interpreter import narrow
        from hlo_common.interpreter.numeric import dot_general

        with self.ev.session():  # once, not per prologue instruction
            values = self._prologue(operands)
        result_type = self.dot.shape.element_type
        a, b = (_operand(values[id(o)], result_type) for o in self.dot.operands)
        if not all(x.dtype in (np.float32, narrow.BF16) for x in (a, b)):
            return None
        dims, root_dims = self.dot.shape.dims, tuple(self.root.shape.dims)
        root_dtype = self.root.shape.element_type.np_dtype
        # the output buffer may be an operand's (buffer assignment lets an elementwise epilogue
        # operand, a residual, share it): then the GEMM must not write it before the epilogue reads
        fits = (out is not None and out.flags.c_contiguous and out.shape == root_dims
                and out.dtype == root_dtype and not any(np.may_share_memory(out, o) for o in operands))
        dest = out if fits else np.empty(root_dims, root_dtype)
        f32_in_dest = result_type.np_dtype == np.float32 and root_dtype == np.float32
        if self.perm is not None:
            acc = dest.transpose(np.argsort(self.perm))  # the dot's dims, over the root's buffer
        else:
            # with an epilogue the sums stay in the GEMM threads' blocks: this array is not written
            acc = dest if f32_in_dest else np.empty(dims, np.float32)
        plain = f32_in_dest and not self.epilogue
        product = self._product(values, acc, dest, plain)
        result = dot_general(a, b, *_dot_dims(self.dot), out=acc, product=product)
        if plain and not np.may_share_memory(result, acc):  # dot_general could not reshape acc
            acc[...] = result
        return dest

    def _prologue(self, operands: list[np.ndarray]) -> dict[int, np.ndarray]:
        values: dict[int, np.ndarray] = {}
        for instr in self.prologue:
            if instr.opcode == "parameter":
                values[id(instr)] = operands[instr.parameter_number]
            elif id(instr) in self.chains:
                self._chain(instr, values)
            elif id(instr) not in self.in_chains:
                values[id(instr)] = self._evaluate(instr, values)
        return values

    def _evaluate(self, instr: HloInstruction, values: dict) -> np.ndarray:
        return self.ev.evaluate_instruction(instr, [values[id(o)] for o in instr.operands])

    def _chain(self, end: HloInstruction, values: dict) -> None:
        """The value of a dot operand computed by a compiled chain (`prologue_chains`), over rows
        on the host threads; member by member with the interpreter's handlers where the loop cannot
        read an input's layout."""
        compiled, chain = self.chains[id(end)]
        dims = end.shape.dims
        out = np.empty(dims, end.shape.element_type.np_dtype)
        shape2 = (math.prod(dims[:-1]), dims[-1])
        sides = {}
        for source in compiled.sources:
            x = values[source[1]] if source[0] == "side" else None
            sides[source[1]] = x if x is None else _no_copy_view(x, shape2)
        if all(v is not None for k, v in sides.items() if isinstance(k, int)) \
                and compiled.run_parallel(sides, out.reshape(shape2)):
            values[id(end)] = out
            return
        for m in chain:
            values[id(m)] = self._evaluate(m, values)

    def _product(self, values: dict, acc: np.ndarray, dest: np.ndarray, plain: bool):
        """The product function `dot_general` calls: the host GEMM on the stacks it is given
        (alpha and bias in its store), with the rounding and the epilogue per finished block of
        rows (when there is one)."""
        from hlo_common.interpreter.numeric import to_element_type
        from hlo_run.host_blas import round_bf16, sgemm_batched

        head_type = self.head.shape.element_type
        alpha = 1.0 if self.alpha is None else float(values[id(self.alpha)])
        bias = None if self.bias is None else values[id(self.bias)]

        def product(sa: np.ndarray, sb: np.ndarray, target: np.ndarray) -> np.ndarray:
            stacked = (sa[None], sb[None], target[None]) if sa.ndim == 2 else (sa, sb, target)
            if plain:
                sgemm_batched(*stacked, alpha=alpha, bias=bias)
                return target
            batch = math.prod(sa.shape[:-2])
            shape3 = (batch, sa.shape[-2], sb.shape[-1])
            dest3 = _view(dest, shape3)
            sides = {key: _view(v, shape3) for key, v in values.items()
                     if any(id(o) == key for e in self.epilogue for o in e.operands)}

            def block(i: int, r0: int, r1: int, head: np.ndarray) -> None:
                if self.compiled is not None and self.compiled.run(
                        head, {key: v[i, r0:r1] for key, v in sides.items()}, dest3[i, r0:r1]):
                    return
                with np.errstate(all="ignore"):
                    rows = {id(self.head): round_bf16(head) if head_type.name == "bf16"
                            else to_element_type(head, head_type)}
                    for e in self.epilogue:
                        ops = [rows[id(o)] if id(o) in rows else sides[id(o)][i, r0:r1] for o in e.operands]
                        rows[id(e)] = self.handlers[id(e)](e, ops, self.ev)
                    dest3[i, r0:r1] = rows[id(self.root)]

            sgemm_batched(*stacked, epilogue=block, alpha=alpha, bias=bias)
            return target

        return product


def _operand(x: np.ndarray, result_type) -> np.ndarray:
    """A dot operand as the host GEMM takes it: a bf16 operand of a dot that accumulates in f32 (a
    bf16 or f32 result) as it is, the GEMM widening it exactly (B as it is packed, A's rows per
    unit: numpy's conversion of the bf16 MLP block's operands took 1.4 ms, and wrote an f32 copy
    of each); any other as the interpreter converts it (`numeric.to_accumulation`)."""
    from hlo_common.interpreter import narrow
    from hlo_common.interpreter.numeric import to_accumulation

    if x.dtype == narrow.BF16 and result_type.name in ("bf16", "f32"):
        return x
    return to_accumulation(x, result_type)


_F32_UFUNCS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}


def _bf16_binary(instr: HloInstruction):
    """For a bf16 add, subtract or multiply of bf16 values: the interpreter's handler's steps
    (both operands widened to f32, the f32 op, the result rounded to bf16) with the JIT's rounding
    (`host_blas.round_bf16`, the same bits as ml_dtypes' astype and three times faster); else None."""
    ufunc = _F32_UFUNCS.get(instr.opcode)
    if ufunc is None or instr.shape.element_type.name != "bf16" \
            or any(o.shape.element_type.name != "bf16" for o in instr.operands):
        return None
    from hlo_common.interpreter.arith import up
    from hlo_run.host_blas import round_bf16

    def handler(instr, operands, ev):
        return round_bf16(ufunc(up(operands[0]), up(operands[1])))

    return handler


def _no_copy_view(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """x as `shape` without a copy (a broadcast keeps its zero strides), or None."""
    v = x.view()
    try:
        v.shape = shape
    except AttributeError:
        return None
    return v


def _view(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """x reshaped to `shape` without a copy where its strides allow (a broadcast bias stays a
    broadcast), else a copy."""
    v = _no_copy_view(x, shape)
    return np.ascontiguousarray(x).reshape(shape) if v is None else v


def direct_plan(module) -> DirectPlan | None:
    """A plan for the fusion computation `module.entry` (see the module docstring), or None."""
    comp = module.entry
    root = comp.root
    order = post_order([root], lambda i: i.operands)
    dots = [i for i in order if i.opcode == "dot"]
    if len(dots) != 1 or root.shape.is_tuple or not 0 < len(root.shape.dims) <= _MAX_OUTPUT_DIMS:
        return None
    dot = dots[0]
    t = dot.shape.element_type
    if not t.is_float or t.bits not in (16, 32) or len(dot.operands) != 2:
        return None
    if root.opcode == "transpose" and root.operands[0] is dot:
        return _transposed_root(order, dot, root)
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
    folded = _fold(comp, dot, epilogue)
    return DirectPlan(prologue, dot, epilogue[len(folded) - 1 if folded else 0:], root, folded)


def _transposed_root(order: list, dot: HloInstruction, root: HloInstruction) -> DirectPlan | None:
    """An f32 dot whose transpose is the root (an attention product put back in [batch, seq,
    heads, dim] order): the GEMM writes the output buffer through the transposed view, which keeps
    rows readable when the permutation leaves the last dim last."""
    perm = tuple(root.attrs.get("dimensions", ()))
    f32 = dot.shape.element_type
    if not perm or perm[-1] != len(perm) - 1 or f32.np_dtype != np.float32 \
            or root.shape.element_type is not f32:
        return None
    prologue = [i for i in order if i is not dot and i is not root]
    return DirectPlan(prologue, dot, [], root, {}, perm)


def _fold(comp, dot: HloInstruction, epilogue: list) -> dict:
    """{"alpha": scalar, "bias": vector, "head": the last folded op} for an f32 dot whose first
    epilogue ops are `multiply(dot, broadcast(scalar))` and/or then `add(., broadcast(vector))`
    along the result's last dim (the GEMM's columns), each the only user of its operand; {} when
    none is. The GEMM applies them to each finished sum, rounding as the two ops do."""
    f32 = dot.shape.element_type
    if f32.np_dtype != np.float32 or len(dot.operands[1].shape.dims) - _batch(dot) != 2:
        return {}  # the rhs must have one free dim for the bias to run along the columns
    folded: dict = {}
    cur = dot
    for e, want in zip(epilogue, ("multiply", "add")):
        if len(e.operands) != 2:  # a convert, a tanh: not a scale or a bias
            break
        other = e.operands[1] if e.operands[0] is cur else e.operands[0]
        chained = len(cur.users) == 1 and cur is not comp.root and any(o is cur for o in e.operands)
        if not chained or e.shape.element_type is not f32 or other.opcode != "broadcast" \
                or other.shape.element_type is not f32:
            break
        src, bdims = other.operands[0], tuple(other.attrs.get("dimensions", ()))
        if e.opcode == "multiply" and want == "multiply" and src.shape.dims == ():
            folded["alpha"] = src
        elif e.opcode == "add" and len(src.shape.dims) == 1 and bdims == (len(dot.shape.dims) - 1,):
            folded["bias"] = src
        else:
            break
        cur = folded["head"] = e
        if e.opcode == "add":
            break
    return folded


def _batch(dot: HloInstruction) -> int:
    dims = dot.attrs.get("lhs_batch_dims") or ()
    return len(dims) if isinstance(dims, (list, tuple)) else 1


__all__ = ["DirectPlan", "direct_plan"]
