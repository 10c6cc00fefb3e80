"""Run a module *inside its buffer assignment* and compare with the reference interpreter.

A test oracle independent of the assigner's reasoning: every allocation is a byte array filled
with garbage; each instruction of a global computation reads its operands from their slices,
is evaluated by the interpreter's handler, and writes the leaves it defines into its own slices
(with the layout's physical order). Forwarding ops (bitcast, tuple, get-tuple-element, ...) do
nothing, while / conditional / call run their computations' sequences in place. If the assignment
let a live value be overwritten, or a value was never written where it is read, the result
differs from `evaluate(module, args)`.

It cannot see an in-place op that reads its operand non-elementwise (operands are read whole
before the output is written); the checker covers that case.
"""

from __future__ import annotations

import numpy as np

from hlo_common.analysis import call_graph as cg
from hlo_common.interpreter.evaluator import Evaluator, evaluate
from hlo_common.hlo.shape import Shape

FORWARDING = frozenset({"parameter", "bitcast", "get-tuple-element", "tuple", "opt-barrier", "domain",
                        "add-dependency", "constant"})
MAX_TRIPS = 100_000


def _physical_perm(shape: Shape) -> list[int]:
    return list(reversed(shape.minor_to_major))


class MemoryExecutor:
    def __init__(self, module, assignment, seed: int = 0):
        self.module = module
        self.ba = assignment
        rng = np.random.default_rng(seed)
        self.mem = [rng.integers(0, 256, a.size, dtype=np.uint8) for a in assignment.allocations]
        self.ev = Evaluator()
        self.ev.module = module
        self.seq = {}

    # -- memory ------------------------------------------------------------------------------------
    def read_leaf(self, instr, index):
        shape = instr.shape.subshape(index)
        sl = self.ba.get_slice(instr, index)
        dtype = np.dtype(shape.element_type.np_dtype)
        raw = self.mem[sl.index][sl.offset:sl.offset + shape.num_elements * dtype.itemsize]
        perm = _physical_perm(shape)
        phys = np.frombuffer(raw.tobytes(), dtype=dtype).reshape([shape.dims[d] for d in perm])
        return np.transpose(phys, np.argsort(perm)).copy()

    def write_leaf(self, instr, index, value) -> None:
        shape = instr.shape.subshape(index)
        sl = self.ba.get_slice(instr, index)
        dtype = np.dtype(shape.element_type.np_dtype)
        phys = np.ascontiguousarray(np.transpose(np.asarray(value, dtype=dtype).reshape(shape.dims),
                                                 _physical_perm(shape)))
        data = np.frombuffer(phys.tobytes(), dtype=np.uint8)
        assert data.size <= sl.size, (instr.name, index, data.size, sl)
        self.mem[sl.index][sl.offset:sl.offset + data.size] = data

    def read_value(self, instr, shape=None, index=()):
        shape = instr.shape if shape is None else shape
        if shape.is_tuple:
            return tuple(self.read_value(instr, s, index + (i,)) for i, s in enumerate(shape.tuple_shapes))
        if not shape.is_array:
            from hlo_common.interpreter.registry import TOKEN
            return TOKEN
        return self.read_leaf(instr, index)

    def write_value(self, instr, value, only_defined: bool) -> None:
        df = self.ba.dataflow
        for idx, shape in instr.shape.leaf_shapes():
            if not shape.is_array or (only_defined and not df.defines_value(instr, idx)):
                continue
            v = value
            for i in idx:
                v = v[i]
            self.write_leaf(instr, idx, v)

    # -- execution ---------------------------------------------------------------------------------
    def run(self, args):
        entry = self.module.entry
        for comp in self.ba.dataflow.global_computations:
            for instr in comp.instructions:
                if instr.opcode == "constant":
                    self.write_value(instr, self.ev.evaluate_instruction(instr, []), True)
        for p in entry.parameters:
            self.write_value(p, args[p.parameter_number], False)
        self.execute(entry)
        return self.read_value(entry.root)

    def execute(self, comp) -> None:
        if comp not in self.seq:
            self.seq[comp] = cg.instruction_sequence(comp, self.module.is_scheduled)
        for instr in self.seq[comp]:
            op = instr.opcode
            if op in FORWARDING:
                continue
            if op == "while":
                cond, body = instr.attrs["condition"], instr.attrs["body"]
                for _ in range(MAX_TRIPS):
                    self.execute(cond)
                    if not bool(self.read_leaf(cond.root, ())):
                        break
                    self.execute(body)
                else:
                    raise TimeoutError(f"while %{instr.name} runs too long")
            elif op == "call":
                self.execute(instr.attrs["to_apply"])
            elif op == "conditional":
                branches = cg.branch_computations(instr)
                sel = self.read_leaf(instr.operands[0], ())
                if "branch_computations" in instr.attrs:
                    k = int(sel)
                    k = k if 0 <= k < len(branches) else len(branches) - 1
                else:
                    k = 0 if bool(sel) else 1
                self.execute(branches[k])
            else:
                operands = [self.read_value(o) for o in instr.operands]
                with np.errstate(all="ignore"):
                    out = self.ev.evaluate_instruction(instr, operands)
                self.write_value(instr, out, True)


def random_args(module, seed: int = 0):
    rng = np.random.default_rng(seed)

    def make(shape):
        if shape.is_tuple:
            return tuple(make(s) for s in shape.tuple_shapes)
        dt = np.dtype(shape.element_type.np_dtype)
        et = shape.element_type
        if et.is_pred:
            return rng.integers(0, 2, shape.dims).astype(bool)
        if et.is_integer:
            return rng.integers(0, 8, shape.dims).astype(dt)
        if et.is_complex:
            return (rng.standard_normal(shape.dims) + 1j * rng.standard_normal(shape.dims)).astype(dt)
        return rng.standard_normal(shape.dims).astype(dt)

    return [make(p.shape) for p in module.entry.parameters]


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if not isinstance(a, np.ndarray):
        return True  # tokens
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.tobytes() == b.tobytes():
        return True
    try:
        return bool(np.array_equal(a.astype(np.float64) if a.dtype.kind not in "c" else a,
                                   b.astype(np.float64) if b.dtype.kind not in "c" else b, equal_nan=True))
    except (TypeError, ValueError):
        return False


def run_and_compare(module, assignment, seed: int = 0) -> bool:
    """True when running in the assigned memory gives the interpreter's exact result."""
    args = random_args(module, seed)
    expected = evaluate(module, args)
    got = MemoryExecutor(module, assignment, seed + 1).run(args)
    return _same(got, expected)
