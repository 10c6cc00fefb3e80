"""Compiled runs of f32 arithmetic inside an elementwise region's slab (generated with llvmlite).

An elementwise region (`regions.py`) runs its members one numpy call each over a slab. A member
reading a per-row operand (a layer norm's mean, a softmax's row maximum) costs numpy one inner
loop per row, and every member writes its slab back to cache. This module compiles a run of
consecutive members whose arithmetic is exact IEEE single precision into one loop nest over the
slab's rows and columns (as XLA:CPU's fused loop does): every value stays in a register, per-row
operands are loaded once per row, and only the values needed after the run are stored.

The members compiled are the region kernels (`region_kernels.py`) of add, subtract, multiply,
divide, negate, abs and convert on f32 values (bf16 members too: their f32 values, rounded to
bf16 after each op with the rounding of `narrow_jit`, and the bf16 tables of `TABLED` unary ops
looked up). IEEE add, subtract, multiply and divide give one result for one pair of operands,
in numpy's loops as in LLVM's code, and the code is compiled without fast-math flags (no fused
multiply-add, no reciprocals), so every value is bit for bit the numpy kernels', with one
exception that IEEE leaves open: which NaN an operation on two NaN operands returns (numpy's own
loops differ there: the region kernels and op-by-op evaluation already give NaNs of either sign),
and LLVM may swap the operands of a commutative op. A NaN stays a NaN where numpy gives one
(tests/unit/hlo_common/interpreter/test_interp_region_jit.py compares the two on special values
and every operand form). Everything else (exp, tanh, sqrt in f32, f64, select, handlers) stays
numpy's and splits the region's program into runs.

A run's operands are region inputs (a full slab, a per-row value, a per-column row, one value:
`ROW`, `COL`, `SCALAR`, `FULL`, each f32 or bf16) or values of earlier members (full slabs). The
kinds are known when the region runs; the loop for each combination is compiled once per process
(30 to 60 ms, on the first run) and cached. `ENABLED` turns the compiled runs off (the numpy kernels
then run every member, as without llvmlite).
"""

from __future__ import annotations

import ctypes
import math
import threading

import numpy as np

from hlo_common.interpreter import narrow, narrow_jit
from hlo_common.interpreter.region_kernels import TABLED, bf16_table

ENABLED = True
FULL, ROW, COL, SCALAR = "full", "row", "col", "scalar"
_F32 = np.dtype(np.float32)
_OPS = {"add": "fadd", "subtract": "fsub", "multiply": "fmul", "divide": "fdiv"}
COMPILED_OPCODES = frozenset({*_OPS, "negate", "abs", "convert"})

_lock = threading.Lock()
_compiled: dict[str, object] = {}  # IR text -> ctypes function, or None when compiling failed
_by_key: dict[tuple, object] = {}  # (input kinds, ops, stores) -> the function of their loop


def _load(ptr: str, index: str, dtype: str, name: str) -> str:
    """IR loading element `index` of `ptr` as float %name (bf16 widened exactly)."""
    if dtype == "f32":
        return (f"  %{name}.p = getelementptr inbounds float, ptr {ptr}, i64 {index}\n"
                f"  %{name} = load float, ptr %{name}.p, align 4\n")
    return (f"  %{name}.p = getelementptr inbounds i16, ptr {ptr}, i64 {index}\n"
            f"  %{name}.h = load i16, ptr %{name}.p, align 2\n"
            f"  %{name}.w = zext i16 %{name}.h to i32\n"
            f"  %{name}.b = shl i32 %{name}.w, 16\n"
            f"  %{name} = bitcast i32 %{name}.b to float\n")


def _store(ptr: str, value: str, dtype: str, name: str) -> str:
    if dtype == "f32":
        return (f"  %{name}.p = getelementptr inbounds float, ptr {ptr}, i64 %i\n"
                f"  store float {value}, ptr %{name}.p, align 4\n")
    return (f"  %{name}.b = bitcast float {value} to i32\n"
            f"  %{name}.s = lshr i32 %{name}.b, 16\n"
            f"  %{name}.h = trunc i32 %{name}.s to i16\n"
            f"  %{name}.p = getelementptr inbounds i16, ptr {ptr}, i64 %i\n"
            f"  store i16 %{name}.h, ptr %{name}.p, align 2\n")


def _op(k: int, opcode: str, args: list[str], rounds: bool, table: str | None) -> tuple[str, str]:
    """(IR computing member k from float operands `args`, the float value holding it)."""
    if table is not None:  # a TABLED bf16 op: the entry of the operand's upper 16 bits
        return (f"  %m{k}.b = bitcast float {args[0]} to i32\n  %m{k}.k = lshr i32 %m{k}.b, 16\n"
                f"  %m{k}.x = zext i32 %m{k}.k to i64\n"
                f"  %m{k}.t = getelementptr inbounds i32, ptr {table}, i64 %m{k}.x\n"
                f"  %m{k}.e = load i32, ptr %m{k}.t, align 4\n  %m{k} = bitcast i32 %m{k}.e to float\n",
                f"%m{k}")
    v = f"%m{k}.v"
    if opcode in _OPS:
        text = f"  {v} = {_OPS[opcode]} float {args[0]}, {args[1]}\n"
    elif opcode == "negate":
        text = f"  {v} = fneg float {args[0]}\n"
    elif opcode == "abs":
        text = f"  {v} = call float @llvm.fabs.f32(float {args[0]})\n"
    else:  # convert: the operand's value (then rounded to bf16 when it converts to bf16)
        text, v = "", args[0]
    if not rounds:
        return text, v
    return (text + f"  %m{k}.b = bitcast float {v} to i32\n  %m{k}.r = call i32 @round_bits(i32 %m{k}.b)\n"
            f"  %m{k} = bitcast i32 %m{k}.r to float\n", f"%m{k}")


# The loop nest of `loop_ir`: rows (per-row operands loaded once), then each row's columns.
_LOOP_NEST = """define void @run({params}) {{
entry:
{entry}  %no_rows = icmp sle i64 %rows, 0
  %no_cols = icmp sle i64 %cols, 0
  %empty = or i1 %no_rows, %no_cols
  br i1 %empty, label %done, label %outer
outer:
  %r = phi i64 [ 0, %entry ], [ %r.next, %latch ]
  %base = mul nsw i64 %r, %cols
{outer}  br label %inner
inner:
  %c = phi i64 [ 0, %outer ], [ %c.next, %inner ]
  %i = add nsw i64 %base, %c
{inner}  %c.next = add nuw nsw i64 %c, 1
  %c.more = icmp slt i64 %c.next, %cols
  br i1 %c.more, label %inner, label %after
after:
{lookup}latch:
  %r.next = add nuw nsw i64 %r, 1
  %r.more = icmp slt i64 %r.next, %rows
  br i1 %r.more, label %outer, label %done
done:
  ret void
}}

declare float @llvm.fabs.f32(float)
{round_bits}
!0 = distinct !{{!0, !1}}
!1 = !{{!"llvm.loop.vectorize.enable", i1 false}}
"""
_LOOKUP_ROW = """  br label %look
look:
  %lc = phi i64 [ 0, %after ], [ %lc.next, %look ]
  %li = add nsw i64 %base, %lc
  %lp = getelementptr inbounds i32, ptr {out}, i64 %li
  %lb = load i32, ptr %lp, align 4
  %lk = lshr i32 %lb, 16
  %lx = zext i32 %lk to i64
  %lt = getelementptr inbounds i32, ptr {table}, i64 %lx
  %lv = load i32, ptr %lt, align 4
  store i32 %lv, ptr %lp, align 4
  %lc.next = add nuw nsw i64 %lc, 1
  %lc.more = icmp slt i64 %lc.next, %cols
  br i1 %lc.more, label %look, label %latch, !llvm.loop !0
"""


def loop_ir(inputs: tuple, ops: tuple, stores: tuple) -> str:
    """The loop nest `void @run(per input: ptr, i64 row stride; per store: ptr; i64 rows, i64 cols)`:
    `inputs` are (kind, dtype) pairs (kind "table": a bf16 table, read by ops); `ops` are (opcode,
    operand refs ("i", input) or ("m", op), rounds to bf16, table input or -1); `stores` are (op,
    dtype) pairs, written at element r * cols + c of their pointer."""
    params = [f"ptr noalias %a{j}, i64 %s{j}" for j in range(len(inputs))]
    params += [f"ptr noalias %o{q}" for q in range(len(stores))] + ["i64 %rows", "i64 %cols"]
    entry, outer, inner = [], [], []
    value = {}
    for j, (kind, dtype) in enumerate(inputs):
        value[("i", j)] = f"%in{j}"
        if kind == SCALAR:
            entry.append(_load(f"%a{j}", "0", dtype, f"in{j}"))
        elif kind == ROW:
            outer.append(f"  %ri{j} = mul nsw i64 %r, %s{j}\n" + _load(f"%a{j}", f"%ri{j}", dtype, f"in{j}"))
        elif kind in (FULL, COL):
            inner.append(_load(f"%a{j}", "%i" if kind == FULL else "%c", dtype, f"in{j}"))
    last = len(ops) - 1
    # A last op that looks a table up, stored in f32 and read by no other op: the vectorized loop
    # stores its operand, a second, scalar loop over the row (in cache) looks each up in place
    # (vector gathers are slower than scalar loads on this host; see narrow_jit).
    split = ops[last][3] >= 0 and [q for q, (k, _) in enumerate(stores) if k == last] == [len(stores) - 1] \
        and stores[-1][1] == "f32" and all(("m", last) not in refs for _, refs, _, _ in ops)
    for k, (opcode, refs, rounds, table) in enumerate(ops):
        if split and k == last:
            value[("m", k)] = value[tuple(refs[0])]
            continue
        text, value[("m", k)] = _op(k, opcode, [value[tuple(r)] for r in refs], rounds,
                                    f"%a{table}" if table >= 0 else None)
        inner.append(text)
    for q, (k, dtype) in enumerate(stores):
        inner.append(_store(f"%o{q}", value[("m", k)], dtype, f"st{q}"))
    lookup = _LOOKUP_ROW.format(out=f"%o{len(stores) - 1}", table=f"%a{ops[last][3]}") if split else \
        "  br label %latch\n"
    return _LOOP_NEST.format(params=", ".join(params), entry="".join(entry), outer="".join(outer),
                             inner="".join(inner), lookup=lookup, round_bits=narrow_jit.ROUND_BITS)


def compiled(ir: str, n_inputs: int, n_stores: int):
    """The ctypes function of `ir` (compiled once per process), or None when LLVM is unusable."""
    fn = _compiled.get(ir, False)
    if fn is False:
        with _lock:
            fn = _compiled.get(ir, False)
            if fn is False:
                try:
                    engine = narrow_jit.compile_ir(ir)
                    args = [ctypes.c_void_p, ctypes.c_int64] * n_inputs + [ctypes.c_void_p] * n_stores
                    fn = ctypes.CFUNCTYPE(None, *args, ctypes.c_int64, ctypes.c_int64)(
                        engine.get_function_address("run"))
                except Exception:  # noqa: BLE001 - no usable LLVM: the numpy kernels run
                    fn = None
                _compiled[ir] = fn
    return fn


def _dtype_name(dtype) -> str | None:
    if dtype == _F32:
        return "f32"
    return "bf16" if dtype == narrow.BF16 else None


def compilable(member, is_kernel: bool = True) -> bool:
    """Whether a compiled loop computes `member` (an elementwise op of a region, or of a GEMM
    fusion's epilogue or prologue, hlo_run.host_gemm_epilogue): one of COMPILED_OPCODES on f32/bf16
    values, or a TABLED bf16 function; `is_kernel`: its region computes it with a member kernel."""
    et = member.shape.element_type.name
    if not is_kernel or et not in ("f32", "bf16"):
        return False
    if any(o.shape.element_type.name not in ("f32", "bf16") for o in member.operands):
        return False
    return member.opcode in COMPILED_OPCODES or (member.opcode in TABLED and et == "bf16")


class Run:
    """Members `start` to `end - 1` of a region's slab program as one compiled loop: `sources` are
    its inputs (a slot of the slab's values, or ("table", opcode)), `ops` its members, `stores`
    (slot, dtype) the members whose values are needed after it ("bf16": stored narrowed, into
    the region's output)."""

    def __init__(self, start: int, end: int, program: list, wide: set[int], stores: list[tuple[int, str]]):
        self.start, self.end = start, end
        self.sources: list = []
        self.member_dtypes: dict[int, str] = {}  # earlier members' slots read: their array's dtype
        ops = []
        for k in range(start, end):
            member, _, slots, _, _, rounds = program[k]
            refs = []
            for s in slots:
                if start <= s < end:
                    refs.append(("m", s - start))
                    continue
                if ("slot", s) not in self.sources:
                    self.sources.append(("slot", s))
                    if s < len(program):
                        name = program[s][0].shape.element_type.name
                        self.member_dtypes[s] = "f32" if s in wide else name
                refs.append(("i", self.sources.index(("slot", s))))
            table = -1
            if member.opcode in TABLED and member.shape.element_type.name == "bf16":
                table = len(self.sources)
                self.sources.append(("table", member.opcode))
            ops.append((member.opcode, tuple(refs), bool(rounds), table))
        self.ops = tuple(ops)
        self.stores = [(s, dtype) for s, dtype in stores]

    def function(self, kinds: tuple):
        """The compiled loop for inputs of `kinds` ((kind, dtype) each), or None."""
        stores = tuple((s - self.start, dtype) for s, dtype in self.stores)
        key = (kinds, self.ops, stores)
        fn = _by_key.get(key, False)  # plans are made per evaluation: the text is made once
        if fn is False:
            fn = _by_key[key] = compiled(loop_ir(kinds, self.ops, stores), len(kinds), len(stores))
        return fn


def plan_runs(program: list, kernel_slots: set[int], wide: set[int], kept: set[int],
              narrow_slots: set[int]) -> list[Run]:
    """The runs of consecutive compilable members of a region's slab program; a member's value is
    stored when a later member reads it or its slot is in `kept` (outputs, reduced members); in
    bf16 straight into the output when its slot is in `narrow_slots`."""
    if not ENABLED or not narrow_jit.available():
        return []
    last_read: dict[int, int] = {}
    for k, entry in enumerate(program):
        for s in entry[2]:
            last_read[s] = k
    ok = [compilable(entry[0], k in kernel_slots) for k, entry in enumerate(program)]
    runs, k = [], 0
    while k < len(program):
        if not ok[k]:
            k += 1
            continue
        end = k
        while end < len(program) and ok[end]:
            end += 1
        stores = [(s, "bf16" if s in narrow_slots else "f32") for s in range(k, end)
                  if s in kept or last_read.get(s, -1) >= end]
        runs.append(Run(k, end, program, wide, stores))
        k = end
    return runs


def _input_form(x, cut, axis: int):
    """(kind, dtype, how the slab's pointer is found) of a region input as `regions.run` holds it
    ((x, cut) of `_compact_broadcast` / `_tiled`), or None when no compiled loop reads it:
    how is (base address, byte strides of the dims up to the slab axis, or None: fixed), and the
    row stride in elements."""
    if not isinstance(x, np.ndarray):
        return None
    dtype = _dtype_name(x.dtype)
    if dtype is None:
        return None
    size = x.dtype.itemsize
    if cut is None:
        return (SCALAR, dtype, x.ctypes.data, None, 0) if x.size == 1 else None
    if cut == "tile" or cut is True:
        if not x.flags.c_contiguous:
            return None
        return FULL, dtype, x.ctypes.data, None if cut == "tile" else x.strides[:axis + 1], 0
    if not any(cut[axis + 1:]):  # varies along the slab axis (and dims before it) only: per row
        if x.strides[axis] % size:
            return None
        strides = tuple(st if c else 0 for st, c in zip(x.strides[:axis + 1], cut))
        return ROW, dtype, x.ctypes.data, strides, x.strides[axis] // size if cut[axis] else 0
    if not any(cut[:axis + 1]) and all(cut[axis + 1:]) and x[(0,) * (axis + 1)].flags.c_contiguous:
        return COL, dtype, x.ctypes.data, None, 0
    return None


class Bound:
    """A run bound to one evaluation's inputs: `call` runs it on a slab."""

    def __init__(self, run: Run, fn, places: list):
        self.run, self.fn, self.places = run, fn, places

    def call(self, values: list, index: tuple, shape: tuple, targets: dict, narrow_targets: dict) -> bool:
        """Run the loop on the slab `index` (of `shape`), storing into `values`; False (nothing
        done) when an earlier member's value is not a full contiguous slab of the expected type."""
        args = []
        for place in self.places:
            if place[0] == "member":
                v = values[place[1]]
                if type(v) is not np.ndarray or v.dtype != place[2] or v.shape != shape \
                        or not v.flags.c_contiguous:
                    return False
                args += (v.ctypes.data, 0)
            else:
                _, base, strides, row = place
                if strides is not None:
                    base += sum(i.start * st for i, st in zip(index, strides))
                args += (base, row)
        outs = []
        for slot, dtype in self.run.stores:
            dest = narrow_targets.get(slot) if dtype == "bf16" else targets.get(slot)
            if dest is None:
                dest = np.empty(shape, np.float32)
            values[slot] = dest
            outs.append(dest.ctypes.data)
        rows = index[-1].stop - index[-1].start
        self.fn(*args, *outs, rows, math.prod(shape) // rows if rows else 0)
        return True


def bind(runs: list[Run], inputs: list, n_members: int, axis: int) -> dict[int, Bound]:
    """start -> the bound run, for each run whose inputs a compiled loop can read this time."""
    out = {}
    for run in runs:
        kinds, places = [], []
        for source in run.sources:
            if source[0] == "table":
                table = bf16_table(source[1])
                kinds.append(("table", "u32"))
                places.append(("fixed", table.ctypes.data, None, 0))
                continue
            s = source[1]
            if s < n_members:
                dtype = run.member_dtypes[s]
                kinds.append((FULL, dtype))
                places.append(("member", s, _F32 if dtype == "f32" else narrow.BF16))
                continue
            form = _input_form(*inputs[s - n_members], axis)
            if form is None:
                break
            kinds.append(form[:2])
            places.append(("fixed", *form[2:]))
        else:
            fn = run.function(tuple(kinds))
            if fn is not None:
                out[run.start] = Bound(run, fn, places)
    return out
