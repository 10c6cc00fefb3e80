"""Elementwise regions: runs of large elementwise instructions evaluated chunk by chunk.

A region is a set of instructions of one computation (an unfused entry computation as much as a
loop fusion's body) that are elementwise over one big shape (copies, reshapes and broadcasts stay
outside: they are views). The evaluation plan (`plan.py`) runs a region as one step: the
region's inputs are sliced into slabs of about `CHUNK_ELEMENTS` elements and every member runs on
each slab with its own handler, so temporaries stay in cache (as in the fused kernel XLA emits)
and only the region's outputs (members read outside it, or the root) are written to full arrays.
Each member still rounds its result into its element type exactly as whole-array evaluation
does, so results are bit-identical. Two more savings inside a slab:

- a narrow-float value (bf16, f16, f8) read by several members whose handlers widen their
  operands to f32 first (`WIDENING_OPCODES`) is widened once and the wide form is shared;
- a broadcast scalar stays a one-element array (converted once), never a full slab.

Members join greedily in evaluation order; an instruction joins the region of one of its
operands only if none of its other operands depends on that region (no cycle through an outside
instruction), and invariant (parameter-independent) instructions never share a region with the
rest, so the plan can still cache invariant values.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from hlo_common.errors import HloError, InterpreterError
from hlo_common.interpreter.arith import LOW_FLOAT_DTYPES, up
from hlo_common.interpreter.registry import HANDLERS
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise

CHUNK_ELEMENTS = 1 << 16
MIN_ELEMENTS = 1 << 17  # below this, whole-array evaluation is as fast
_NOT_CHUNKABLE = frozenset({"rng", "rng-bit-generator", "rng-get-and-update-state"})

# Handlers that apply `arith.up` to every operand before computing and look at nothing else of the
# operands' dtypes, so they may be given the f32 form of a narrow-float operand.
WIDENING_OPCODES = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "sine", "cosine", "tan", "tanh",
    "sinh", "cosh", "asin", "acos", "atanh", "asinh", "acosh", "sqrt", "rsqrt", "cbrt", "ceil", "floor",
    "round-nearest-even", "round-nearest-afz", "logistic", "erf", "abs", "negate", "sign", "is-finite",
    "add", "subtract", "multiply", "divide", "remainder", "power", "atan2", "maximum", "minimum",
    "clamp", "compare", "convert",
})


class Region:
    """One region: `members` in evaluation order, `inputs` (outside instructions they read),
    `outputs` (members whose values are needed outside), all over array dims `dims`."""

    def __init__(self, dims: tuple[int, ...], invariant: bool):
        self.dims = dims
        self.invariant = invariant
        self.members: list[HloInstruction] = []
        self.inputs: list[HloInstruction] = []
        self.outputs: list[HloInstruction] = []
        self._program: list[tuple] = []

    def finish(self, live: set[int], root: HloInstruction) -> None:
        """Work out inputs, outputs and the per-slab program once all members are known."""
        local = {id(m): k for k, m in enumerate(self.members)}
        for m in self.members:
            for op in m.operands:
                if id(op) not in local:
                    local[id(op)] = len(self.members) + len(self.inputs)
                    self.inputs.append(op)
        self.outputs = [m for m in self.members if m is root or any(
            id(u) in live and id(u) not in local for u in m.users)]
        n_members = len(self.members)
        self._program = [
            (m, _member_handler(m), tuple(local[id(op)] for op in m.operands), m.opcode in WIDENING_OPCODES)
            for m in self.members]
        self._input_slots = range(n_members, n_members + len(self.inputs))
        self._output_slots = [local[id(o)] for o in self.outputs]

    def run(self, instr: HloInstruction, operands, ev: Any) -> tuple[np.ndarray, ...]:
        """The region's outputs, computed slab by slab (a plan step handler)."""
        dims = self.dims
        outs = [np.empty(dims, o.shape.element_type.np_dtype) for o in self.outputs]
        inputs = [_compact_broadcast(x, dims) for x in operands]
        sliced = [isinstance(x, np.ndarray) and x.shape == dims and x.ndim > 0 for x in inputs]
        values: list[Any] = [None] * (len(self.members) + len(inputs))
        for index in chunks(dims):
            for slot, x, cut in zip(self._input_slots, inputs, sliced):
                values[slot] = x[index] if cut else x
            self._run_slab(values, ev)
            for out, slot in zip(outs, self._output_slots):
                out[index] = values[slot]
        return tuple(outs)

    def _run_slab(self, values: list, ev: Any) -> None:
        wide: dict[int, np.ndarray] = {}
        member = None
        try:
            for k, (member, handler, slots, widening) in enumerate(self._program):
                if widening:
                    ops = [_wide(values, wide, s) for s in slots]
                else:
                    ops = [values[s] for s in slots]
                values[k] = handler(member, ops, ev)
        except InterpreterError:
            raise
        except HloError as exc:
            raise InterpreterError(f"{_where(member)}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - a failing member names itself
            raise InterpreterError(f"{_where(member)}: {type(exc).__name__}: {exc}") from exc


def _wide(values: list, wide: dict[int, np.ndarray], slot: int) -> Any:
    x = values[slot]
    if getattr(x, "dtype", None) not in LOW_FLOAT_DTYPES:
        return x
    w = wide.get(slot)
    if w is None:
        w = wide[slot] = up(x)
    return w


def _member_handler(instr: HloInstruction):
    handler = HANDLERS.get(instr.opcode)
    if handler is None:
        raise InterpreterError(f"{_where(instr)}: the interpreter cannot evaluate opcode '{instr.opcode}'")
    return handler


def _compact_broadcast(x: Any, dims: tuple[int, ...]) -> Any:
    """A broadcast scalar (all strides 0) as a one-element array of the same rank."""
    if isinstance(x, np.ndarray) and x.ndim and x.shape == dims and not any(x.strides):
        return x[(slice(0, 1),) * x.ndim]
    return x


def _where(instr: HloInstruction | None) -> str:
    if instr is None:
        return "elementwise region"
    comp = instr.parent.name if instr.parent is not None else "?"
    return f"%{instr.name} ({instr.opcode}) in computation {comp}"


def chunks(dims: tuple[int, ...]) -> Iterator[tuple]:
    """Index tuples of slabs of about CHUNK_ELEMENTS elements covering an array of `dims`."""
    inner = 1
    axis = len(dims) - 1
    while axis > 0 and inner * dims[axis] <= CHUNK_ELEMENTS:
        inner *= dims[axis]
        axis -= 1
    step = max(1, CHUNK_ELEMENTS // inner)
    for outer in np.ndindex(*dims[:axis]):
        for start in range(0, dims[axis], step):
            yield outer + (slice(start, min(start + step, dims[axis])),)


# -- finding regions ---------------------------------------------------------------------------------


def region_dims(instr: HloInstruction) -> tuple[int, ...] | None:
    """The dims over which `instr` could be a region member, or None when it cannot be one."""
    shape = instr.shape
    if shape.is_tuple or not shape.is_array or shape.num_elements < MIN_ELEMENTS:
        return None
    op = instr.opcode
    dims = shape.dims
    if not is_elementwise(op) or op in _NOT_CHUNKABLE or op == "copy":
        return None
    if any(o.shape.is_tuple or not o.shape.is_array or o.shape.dims != dims for o in instr.operands):
        return None
    return dims


def find_regions(order: list[HloInstruction], invariant: set[int]) -> list[Region]:
    """Regions of the instructions in `order` (a valid evaluation order ending with the root)."""
    region_of: dict[int, Region] = {}
    bit: dict[int, int] = {}  # id(region) -> its bit in the dependence masks
    deps: dict[int, int] = {}  # id(instr) -> bit mask of the regions it depends on
    found: list[Region] = []
    for instr in order:
        dims = region_dims(instr)
        below = 0
        for op in instr.operands:
            below |= deps.get(id(op), 0)
        if dims is not None:
            inv = id(instr) in invariant
            target = None
            for op in instr.operands:
                r = region_of.get(id(op))
                if r is not None and r.dims == dims and r.invariant == inv and \
                        _may_join(instr, r, bit[id(r)], region_of, deps):
                    target = r
                    break
            if target is None:
                target = Region(dims, inv)
                bit[id(target)] = 1 << len(found)
                found.append(target)
            target.members.append(instr)
            region_of[id(instr)] = target
            below |= bit[id(target)]
        deps[id(instr)] = below
    live = {id(i) for i in order}
    for r in found:
        r.finish(live, order[-1])
    return found


def _may_join(instr: HloInstruction, region: Region, region_bit: int, region_of: dict, deps: dict) -> bool:
    """No operand outside `region` may depend on it (joining would make a cycle)."""
    return all(region_of.get(id(op)) is region or not deps.get(id(op), 0) & region_bit
               for op in instr.operands)
