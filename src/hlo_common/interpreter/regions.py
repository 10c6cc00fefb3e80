"""Elementwise regions: runs of large elementwise instructions evaluated chunk by chunk.

A region is a set of instructions of one computation (an unfused entry computation as much as a
loop fusion's body) that are elementwise over one big shape (copies, reshapes and broadcasts stay
outside: they are views). The evaluation plan (`plan.py`) runs a region as one step: the
region's inputs are sliced into slabs of about `CHUNK_ELEMENTS` elements and every member runs on
each slab, so temporaries stay in cache (as in the fused kernel XLA emits) and only the region's
outputs (members read outside it, or the root) are written to full arrays. Slabs are independent,
so they run on the interpreter's threads (`parallel.py`). Each member still rounds its result into
its element type exactly as whole-array evaluation does, so results are bit-identical. Inside a
slab:

- the common float ops (f32, f64, bf16) run as kernels (`region_kernels.py`): computed in f32
  (f64) into the array of an operand that no other member reads after them (a temporary of the
  slab, never an input), bf16 results rounded in place and kept in f32 ("wide", `narrow.py`), so
  a chain of bf16 ops converts to and from bf16 only at the region's edges;
- other members run their handlers. A narrow-float value (bf16, f16, f8) read by handlers that
  widen their operands to f32 first (`WIDENING_OPCODES`) is widened once and the wide form is
  shared; a handler that needs bf16 operands gets them narrowed (exactly) from the wide form;
- a broadcast scalar stays a one-element array (converted once), never a full slab; a broadcast
  row stays a row (`_compact_broadcast`), and one that varies only along the dims after the slab
  axis (a per-column scale or bias) becomes one slab-sized tile that every slab reads (`_tiled`);
  members run with numpy's ufunc buffer no longer than a row (`_slab_bufsize`);
- a bf16 output that no member reads is rounded as it is narrowed into the output array
  (`narrow.round_narrow_into`, one pass);
- runs of consecutive kernel members doing f32 arithmetic (add, subtract, multiply, divide, ...,
  bf16 ones rounded) run as one compiled loop over the slab (`region_jit.py`, `compiled_runs`),
  which stores only what later members and the outputs read;
- a reduce over trailing dims of a member (`Reduction`, attached by `plan.py` when every slab
  holds whole rows) is computed slab by slab, so a member only reduced is never written out.

Members join greedily in evaluation order; an instruction joins the region of one of its
operands only if none of its other operands depends on that region (no cycle through an outside
instruction), and invariant (parameter-independent) instructions never share a region with the
rest, so the plan can still cache invariant values.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from hlo_common.errors import HloError, InterpreterError
from hlo_common.interpreter import narrow, parallel, region_jit
from hlo_common.interpreter.arith import LOW_FLOAT_DTYPES, up
from hlo_common.interpreter.region_kernels import kernel_for
from hlo_common.interpreter.registry import HANDLERS
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise

CHUNK_ELEMENTS = 1 << 18  # 1 MiB of f32 (measured best on the bench set: see docs/figures.md)
# numpy's ufunc buffer (elements) while a slab's members run, for rows of at least MIN_ROW_BUFFER
# elements: see `_slab_bufsize`.
MIN_ROW_BUFFER, DEFAULT_BUFFER = 512, 8192
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
# How a member gets an operand: as it is, widened to f32 (cached per slab), or narrowed to bf16.
AS_IS, WIDEN, NARROW = 0, 1, 2


class Region:
    """One region: `members` in evaluation order, `inputs` (outside instructions they read),
    `outputs` (members whose values are needed outside), all over array dims `dims`."""

    def __init__(self, dims: tuple[int, ...], invariant: bool):
        self.dims = dims
        self.invariant = invariant
        self.members: list[HloInstruction] = []
        self.inputs: list[HloInstruction] = []
        self.outputs: list[HloInstruction] = []
        self.reductions: list[Reduction] = []
        self._program: list[tuple] = []

    def finish(self, live: set[int], root: HloInstruction, absorbed=frozenset()) -> None:
        """Work out inputs, outputs and the per-slab program once all members are known; users
        whose ids are in `absorbed` (reductions the region computes) do not make outputs."""
        self.inputs = []
        self.absorbed = absorbed
        self._axis, self._step = chunking(self.dims)
        self._bufsize = _slab_bufsize(self.dims)
        local = {id(m): k for k, m in enumerate(self.members)}
        for m in self.members:
            for op in m.operands:
                if id(op) not in local:
                    local[id(op)] = len(self.members) + len(self.inputs)
                    self.inputs.append(op)
        self.outputs = [m for m in self.members if m is root or any(
            id(u) in live and id(u) not in local and id(u) not in absorbed for u in m.users)]
        self._reduction_slots = [local[id(r.member)] for r in self.reductions]
        n_members = len(self.members)
        self._input_slots = range(n_members, n_members + len(self.inputs))
        self._output_slots = [local[id(o)] for o in self.outputs]
        kept = set(self._output_slots) | set(self._reduction_slots)  # read after the members ran
        self._program, wide, kernels = _slab_program(self.members, local, kept)
        self.kernel_ids = {id(self.members[k]) for k in kernels}
        self._output_wide = [slot in wide for slot in self._output_slots]
        self._direct = {slot for slot in self._output_slots if slot in kernels and slot not in wide}
        self.handed_wide: list[bool] = [False] * len(self.outputs)
        # bf16 outputs no member reads: rounded as they are narrowed into the output (one pass)
        read = {s for _, _, slots, _, _, _ in self._program for s in slots} | set(self._reduction_slots)
        self._late_round = {slot for slot in self._output_slots
                            if slot in wide and self._program[slot][5] and slot not in read}
        self._kept, self._wide, self._read, self._runs = kept, wide, read, None

    def hand_wide(self, handed: set[int]) -> None:
        """Outputs whose ids are in `handed` (bf16 values kept in f32 by this region) leave it
        as f32 arrays of bf16 values, for other regions' kernels, which read them as they are
        (`keep_wide_outputs`): no narrowing here and no widening there."""
        self.handed_wide = [id(o) in handed and w for o, w in zip(self.outputs, self._output_wide)]
        for o, slot, handed_out in zip(self.outputs, self._output_slots, self.handed_wide):
            if handed_out:
                self._direct.add(slot)
                self._late_round.discard(slot)
        self._runs = None

    def compiled_runs(self) -> list:
        """The runs of this region's members compiled as one loop each (`region_jit`), planned
        once: a bf16 output that no member reads is stored narrowed, straight into the output."""
        if self._runs is None:
            outs = zip(self._output_slots, self._output_wide, self.handed_wide)
            self._narrow_slots = {slot for slot, w, h in outs if w and not h and slot not in self._read}
            kernels = {k for k, m in enumerate(self.members) if id(m) in self.kernel_ids}
            self._runs = region_jit.plan_runs(self._program, kernels, self._wide, self._kept,
                                              self._narrow_slots)
        return self._runs

    def can_reduce(self, dims: tuple[int, ...]) -> bool:
        """True when every slab holds whole rows of a reduction over trailing `dims`."""
        rank = len(self.dims)
        trailing = bool(dims) and dims == tuple(range(rank - len(dims), rank))
        return trailing and dims[0] > chunking(self.dims)[0]

    def run(self, instr: HloInstruction, operands, ev: Any) -> tuple[np.ndarray, ...]:
        """The region's outputs, then the reductions of its `reductions` (each in its accumulation
        dtype, the init not applied yet), computed slab by slab (a plan step handler)."""
        dims = self.dims
        outs = [np.empty(dims, np.float32 if handed else o.shape.element_type.np_dtype)
                for o, handed in zip(self.outputs, self.handed_wide)]
        partials = [np.empty(dims[:r.dims[0]], r.wide) for r in self.reductions]
        inputs = [_tiled(*_compact_broadcast(x, dims), dims, self._axis, self._step) for x in operands]
        n_values = len(self.members) + len(inputs)
        donors = self._donors([cut is True or cut is TILE for _, cut in inputs])
        axis, step, late = self._axis, self._step, self._late_round
        bound = region_jit.bind(self.compiled_runs(), inputs, len(self.members), axis)

        def slab(index: tuple) -> None:
            values: list[Any] = [None] * n_values
            for slot, (x, cut) in zip(self._input_slots, inputs):
                if cut is TILE:
                    whole = index[axis].stop - index[axis].start == step
                    values[slot] = x if whole else x[_head(index, axis)]
                else:
                    values[slot] = x if cut is None else x[index] if cut is True else x[_cut(index, cut)]
            # kernels of plain-typed outputs write straight into the output arrays
            targets = {slot: out[index] for out, slot in zip(outs, self._output_slots)
                       if slot in self._direct}
            narrowed = {slot: out[index] for out, slot in zip(outs, self._output_slots)
                        if slot in self._narrow_slots} if bound else {}
            compiled = (bound, index, targets, narrowed) if bound else None
            if self._bufsize:
                default = np.setbufsize(self._bufsize)
                try:
                    self._run_slab(values, ev, targets, donors, compiled)
                finally:
                    np.setbufsize(default)
            else:
                self._run_slab(values, ev, targets, donors, compiled)
            for out, slot, wide, handed in zip(outs, self._output_slots, self._output_wide, self.handed_wide):
                if values[slot] is targets.get(slot) or values[slot] is narrowed.get(slot):
                    continue  # written in place
                if slot in late and not handed:
                    narrow.round_narrow_into(out[index], values[slot])
                elif wide and not handed:
                    narrow.narrow_into(out[index], values[slot])
                else:  # as it is (a handed output is the f32 form of bf16 values)
                    out[index] = values[slot]
            for r, partial, slot in zip(self.reductions, partials, self._reduction_slots):
                r.reduce_slab(values[slot], index, partial)

        parallel.for_each(slab, slabs(dims, self._axis, self._step))
        return tuple(outs) + tuple(partials)

    def _donors(self, full_inputs: list[bool]) -> list[int]:
        """Per member, the slot of the operand it may write into (-1: none): the program's choice
        when that operand holds a whole slab (not a broadcast row or column), so the result fits."""
        n = len(self.members)
        full = [False] * n + full_inputs
        donors = []
        for k, (_, _, slots, _, donate, _) in enumerate(self._program):
            full[k] = any(full[s] for s in slots)
            donors.append(donate if donate >= 0 and full[donate] else -1)
        return donors

    def _run_slab(self, values: list, ev: Any, targets: dict[int, np.ndarray], donors: list[int],
                  compiled: tuple | None) -> None:
        """Run every member on one slab; `targets` gives members the array to write into, else
        `donors` the slot of an operand they may write into; `compiled` (runs bound to this
        evaluation, the slab's index, the output targets) runs members as compiled loops."""
        forms: dict[tuple[int, int], Any] = {}  # (slot, WIDEN | NARROW) -> that form of the value
        member = None
        skip = 0  # members below this one were computed by a compiled run
        try:
            for k, (member, fn, slots, prep, _, rounds) in enumerate(self._program):
                if k < skip:
                    continue
                if compiled is not None and k in compiled[0] and self._compiled_run(values, k, compiled):
                    skip = compiled[0][k].run.end
                    continue
                ops = [values[s] if p == AS_IS else _form(values, forms, s, p)
                       for s, p in zip(slots, prep)]
                out = targets.get(k)
                if out is None and donors[k] >= 0:
                    out = values[donors[k]]
                value = fn(member, ops, out, ev)
                if rounds and k not in self._late_round:
                    narrow.round_bf16_in_place(value)  # in place, also in a target's array
                values[k] = value
        except InterpreterError:
            raise
        except HloError as exc:
            raise InterpreterError(f"{_where(member)}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - a failing member names itself
            raise InterpreterError(f"{_where(member)}: {type(exc).__name__}: {exc}") from exc


    def _compiled_run(self, values: list, k: int, compiled: tuple) -> bool:
        bound, index, targets, narrowed = compiled
        shape = tuple(i.stop - i.start for i in index) + self.dims[len(index):]
        return bound[k].call(values, index, shape, targets, narrowed)


def _slab_bufsize(dims: tuple[int, ...]) -> int:
    """The ufunc buffer size for a slab's members, or 0 to keep numpy's. A member reading a
    broadcast row or column (`_compact_broadcast`) is a ufunc call over a 2-D iteration; when
    numpy's buffer is longer than a row, its iterator copies the operands through the buffer to
    make longer inner loops, which takes 2-2.5x the time of the same op on full arrays (numpy 2.4,
    1024-element rows). A buffer no longer than the row makes it run one row per inner loop on the
    operands themselves. Rows shorter than MIN_ROW_BUFFER gain nothing (the per-row cost then
    dominates). Elementwise results do not depend on the buffer size; the reductions a region
    computes (`Reduction`) run outside it."""
    row = dims[-1] if dims else 0
    if not MIN_ROW_BUFFER <= row < DEFAULT_BUFFER:
        return 0
    return row // 16 * 16  # numpy wants a multiple of 16


def _form(values: list, forms: dict, slot: int, how: int) -> Any:
    """The widened (f32) or narrowed (bf16) form of a slot's value, made once per slab."""
    x = values[slot]
    key = (slot, how)
    form = forms.get(key)
    if form is None:
        if how == NARROW:
            form = narrow.narrow(x)
        elif getattr(x, "dtype", None) == narrow.BF16:
            form = narrow.widen(x)
        elif getattr(x, "dtype", None) in LOW_FLOAT_DTYPES:
            form = up(x)
        else:
            form = x
        forms[key] = form
    return form


def _slab_program(members: list[HloInstruction], local: dict[int, int], kept: set[int]):
    """(program, wide slots, kernel slots): per member (instr, fn, operand slots, how each is
    prepared, the slot of the operand whose array it may write into or -1, whether it rounds to
    bf16); wide slots hold bf16 values in f32 arrays; kernel slots are the members run as kernels.
    Slots in `kept` (outputs, reduced members) are never written into."""
    kernels = [kernel_for(m) for m in members]
    wide = {k for k, (m, kern) in enumerate(zip(members, kernels))
            if kern is not None and m.shape.element_type.np_dtype == narrow.BF16}
    last_read: dict[int, int] = {}
    handler_read: set[int] = set()  # a handler may return its operand itself: never written into
    for k, (m, kern) in enumerate(zip(members, kernels)):
        for op in m.operands:
            last_read[local[id(op)]] = k
            if kern is None:
                handler_read.add(local[id(op)])
    program = []
    for k, (m, kern) in enumerate(zip(members, kernels)):
        slots = tuple(local[id(op)] for op in m.operands)
        if kern is None:
            widening = m.opcode in WIDENING_OPCODES
            prep = tuple(_how(op, s in wide, widening) for op, s in zip(m.operands, slots))
            program.append((m, _member_call(m, None), slots, prep, -1, False))
            continue
        prep = tuple(_how(op, s in wide, True) for op, s in zip(m.operands, slots))
        compute = _compute_dtype(m, k in wide)
        donate = next((s for op, s in zip(m.operands, slots)
                       if s < len(members) and kernels[s] is not None and last_read[s] == k
                       and s not in kept and s not in handler_read
                       and _compute_dtype(op, s in wide) == compute), -1)
        program.append((m, _member_call(m, kern), slots, prep, donate, kern.rounds))
    return program, wide, {k for k, kern in enumerate(kernels) if kern is not None}


def _how(operand: HloInstruction, is_wide: bool, widening: bool) -> int:
    low = operand.shape.element_type.np_dtype in LOW_FLOAT_DTYPES
    if widening:
        return WIDEN if low and not is_wide else AS_IS
    return NARROW if is_wide else AS_IS


def _compute_dtype(instr: HloInstruction, is_wide: bool) -> np.dtype:
    """The dtype of the array holding `instr`'s value in a slab."""
    return np.dtype(np.float32) if is_wide else instr.shape.element_type.np_dtype


def _member_call(instr: HloInstruction, kernel):
    """What a slab calls for member `instr`: `fn(member, operands, out, ev)` runs its kernel (or,
    without one, its handler, which ignores `out`)."""
    if kernel is not None:
        fn = kernel.fn
        return lambda member, ops, out, ev: fn(ops, out)
    handler = HANDLERS.get(instr.opcode)
    if handler is None:
        raise InterpreterError(f"{_where(instr)}: the interpreter cannot evaluate opcode '{instr.opcode}'")
    return lambda member, ops, out, ev: handler(member, ops, ev)


def _compact_broadcast(x: Any, dims: tuple[int, ...]) -> tuple[Any, Any]:
    """(x, how slabs cut it): a broadcast input with its repeated dims (stride 0) collapsed to
    size 1, and None (nothing to cut: a scalar, or every dim collapsed), True (cut every dim) or
    a tuple saying which dims to cut."""
    if not isinstance(x, np.ndarray) or x.ndim == 0 or x.shape != dims:
        return x, None
    repeated = tuple(stride == 0 and size > 1 for stride, size in zip(x.strides, x.shape))
    if not any(repeated):
        return x, True
    x = x[tuple(slice(0, 1) if r else slice(None) for r in repeated)]
    if all(r or size == 1 for r, size in zip(repeated, dims)):
        return x, None
    return x, tuple(not r for r in repeated)


TILE = "tile"  # how slabs cut an input held as one slab-sized tile (`_tiled`)


def _tiled(x: Any, cut: Any, dims: tuple[int, ...], axis: int, step: int) -> tuple[Any, Any]:
    """(x, cut) as `_compact_broadcast` gives it, or, for a broadcast input that varies only along
    the dims after the slab axis (a per-column scale or bias), (a tile: that input broadcast to a
    whole slab, once, TILE): every slab reads the same values, and a member reading a full
    contiguous operand runs one inner loop over the slab instead of one per row. Narrow floats
    stay as they are (members widen what they read, and would widen a whole tile per slab)."""
    if not isinstance(cut, tuple) or any(cut[:axis + 1]) or x.dtype in LOW_FLOAT_DTYPES:
        return x, cut
    if dims[axis] <= step:  # one slab: nothing to share
        return x, cut
    shape = (1,) * axis + (min(step, dims[axis]),) + dims[axis + 1:]
    tile = np.empty(shape, x.dtype)
    tile[...] = x[(slice(0, 1),) * (axis + 1)]
    tile.flags.writeable = False  # shared by every slab and thread
    return tile, TILE


def _head(index: tuple, axis: int) -> tuple:
    """The part of a tile a shorter (last) slab reads."""
    return (slice(None),) * axis + (slice(0, index[axis].stop - index[axis].start),)


def _cut(index: tuple, cut: tuple) -> tuple:
    return tuple(i if c else slice(None) for i, c in zip(index, cut))


def _where(instr: HloInstruction | None) -> str:
    if instr is None:
        return "elementwise region"
    comp = instr.parent.name if instr.parent is not None else "?"
    return f"%{instr.name} ({instr.opcode}) in computation {comp}"


class Reduction:
    """A reduce over trailing dims of a region member, computed slab by slab inside the region
    (so the member need not be written out): `kind` and `wide` are the fast path's reducer and
    accumulation dtype (`reduction.fast_reduction`). Each slab holds whole rows, and numpy reduces
    a row the same way whatever else the array holds, so the values are those of one reduction
    of the whole array."""

    def __init__(self, reduce: HloInstruction, member: HloInstruction, kind: str, dims: tuple[int, ...],
                 ufunc: np.ufunc, wide: np.dtype):
        self.reduce, self.member, self.kind, self.dims = reduce, member, kind, dims
        self.ufunc, self.wide = ufunc, wide

    def reduce_slab(self, value: np.ndarray, index: tuple, partial: np.ndarray) -> None:
        """Reduce the slab `index` of the member (`value`) into its rows of `partial`."""
        shape = tuple(s.stop - s.start for s in index) + partial.shape[len(index):] + \
            self.member.shape.dims[partial.ndim:]
        if value.shape != shape:  # a member computed from broadcasts only
            value = np.broadcast_to(value, shape)
        self.ufunc.reduce(value, axis=self.dims, dtype=self.wide, out=partial[index[:self.dims[0]]])


def chunking(dims: tuple[int, ...]) -> tuple[int, int]:
    """(axis, step): slabs of about CHUNK_ELEMENTS elements cut `dims` along `axis` in steps of
    `step`, taking every index of the dims after it and one index of each dim before it."""
    inner = 1
    axis = len(dims) - 1
    while axis > 0 and inner * dims[axis] <= CHUNK_ELEMENTS:
        inner *= dims[axis]
        axis -= 1
    return axis, max(1, CHUNK_ELEMENTS // inner)


def chunks(dims: tuple[int, ...]) -> Iterator[tuple]:
    """Index tuples of slabs of about CHUNK_ELEMENTS elements covering an array of `dims`."""
    return slabs(dims, *chunking(dims))


def slabs(dims: tuple[int, ...], axis: int, step: int) -> Iterator[tuple]:
    """Index tuples of the slabs `chunking` describes."""
    for outer in np.ndindex(*dims[:axis]):
        lead = tuple(slice(i, i + 1) for i in outer)  # slabs keep the rank (broadcasts stay aligned)
        for start in range(0, dims[axis], step):
            yield lead + (slice(start, min(start + step, dims[axis])),)


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


def find_regions(order: list[HloInstruction], invariant: set[int], exclude=frozenset()) -> list[Region]:
    """Regions of the instructions in `order` (a valid evaluation order ending with the root);
    instructions whose ids are in `exclude` are never members."""
    region_of: dict[int, Region] = {}
    bit: dict[int, int] = {}  # id(region) -> its bit in the dependence masks
    deps: dict[int, int] = {}  # id(instr) -> bit mask of the regions it depends on
    found: list[Region] = []
    for instr in order:
        dims = None if id(instr) in exclude else region_dims(instr)
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


def keep_wide_outputs(groups: list[Region], live: set[int], root: HloInstruction) -> None:
    """Let each region hand a bf16 output to other regions in its f32 form when every live user of
    it is another region's member run as a kernel (those read bf16 operands in f32 anyway)."""
    kernel_region = {i: g for g in groups for i in g.kernel_ids}
    for g in groups:
        own = {id(m) for m in g.members} | g.absorbed  # these read the slab's value, not the output
        handed = {id(o) for o in g.outputs if o is not root and all(
            id(u) in own or kernel_region.get(id(u)) not in (None, g) for u in o.users if id(u) in live)}
        g.hand_wide(handed)


def _may_join(instr: HloInstruction, region: Region, region_bit: int, region_of: dict, deps: dict) -> bool:
    """No operand outside `region` may depend on it (joining would make a cycle)."""
    return all(region_of.get(id(op)) is region or not deps.get(id(op), 0) & region_bit
               for op in instr.operands)
