"""The two sides `hlo-run --find-first-mismatch` (`hlo_run.bisect`) compares, and what it records:
the interpreter's kept values (`TracingEvaluator`), what each thunk computes (`thunk_groups`: the
instruction, its output and operand slices, the loops it runs in) and a difference found
(`Mismatch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlo_common.hlo.hlo_utils import global_computations
from hlo_common.interpreter.evaluator import Evaluator
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.manifest.manifest import Manifest
from hlo_common.manifest.thunks import (
    BufferSlice, ConditionalThunk, ConvolutionThunk, CopyThunk, GemmThunk, KernelThunk, MemsetThunk,
    SequentialThunk, Thunk, WhileThunk,
)
from hlo_run.compare import LeafComparison

MAX_TRACE_BYTES = 4 << 30  # the interpreter's kept values; beyond this, later thunks are not compared


# -- the interpreter side ---------------------------------------------------------------------------
class TracingEvaluator(Evaluator):
    """The reference evaluator, keeping a copy of the value of chosen instructions every time one is
    computed (and, for one instruction and execution, its operand values).

    It wraps the handlers of the evaluator's plan steps (`Evaluator._exec`); values are copied, so
    a later in-place update (dynamic-update-slice, scatter) cannot change what was kept. A
    loop-invariant instruction is computed only on the first runs of its computation (the
    evaluator caches it after that), so it has fewer kept values than executions; its last value
    stands for the later ones.
    """

    fold_converts = False  # every watched instruction is evaluated, a convert read by a reduce too

    def __init__(self, watched: list[HloInstruction], capture: tuple[HloInstruction, int] | None = None,
                 max_bytes: int = MAX_TRACE_BYTES):
        super().__init__()
        self.watched = {id(i) for i in watched}
        self.trace: dict[int, list[Any]] = {id(i): [] for i in watched}
        self.executions: dict[int, int] = {id(i): 0 for i in watched}
        self.capture = (id(capture[0]), capture[1]) if capture else None
        self.captured: list[Any] | None = None
        self.max_bytes = max_bytes
        self.kept_bytes = 0
        self.truncated = False
        self._wrapped: dict[int, tuple[list, list]] = {}
        self._keep = watched  # the instructions stay alive while their ids key the trace

    def _exec(self, steps: list[tuple], values: list) -> None:
        entry = self._wrapped.get(id(steps))
        if entry is None or entry[0] is not steps:
            entry = self._wrapped[id(steps)] = (steps, [self._wrap(s) for s in steps])
        super()._exec(entry[1], values)

    def _wrap(self, step: tuple) -> tuple:
        handler, instr = step[0], step[1]
        if instr is None or id(instr) not in self.watched or _is_region_step(handler):
            return step
        key = id(instr)

        def recording(ins, operands, ev, _handler=handler):
            runs = self.trace[key]
            if self.capture is not None and self.capture == (key, self.executions[key]):
                self.captured = [_copy(v) for v in operands]
            self.executions[key] += 1
            value = _handler(ins, operands, ev)
            if not self.truncated:
                kept = _copy(value)
                self.kept_bytes += _nbytes(kept)
                if self.kept_bytes > self.max_bytes:
                    self.truncated = True
                else:
                    runs.append(kept)
            return value

        return (recording,) + tuple(step[1:])


def _is_region_step(handler) -> bool:
    from hlo_common.interpreter import regions

    return isinstance(getattr(handler, "__self__", None), regions.Region)


def _copy(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def _nbytes(value: Any) -> int:
    if isinstance(value, tuple):
        return sum(_nbytes(v) for v in value)
    return int(value.nbytes) if isinstance(value, np.ndarray) else 0


# -- what each thunk computes -----------------------------------------------------------------------
@dataclass
class Group:
    """Consecutive thunks of one instruction in one sequence; compared after the last of them."""

    instr: HloInstruction
    thunks: list[Thunk]
    loops: list[str]  # the while loops around it, outermost first
    outputs: list[tuple[tuple[int, ...], BufferSlice, str]] = field(default_factory=list)
    operands: list[tuple[BufferSlice, str]] | None = None  # where each operand is read, when known

    @property
    def kernels(self) -> list[str]:
        return [t.kernel for t in self.thunks if isinstance(t, KernelThunk)]


def thunk_groups(manifest: Manifest, module: HloModule) -> dict[int, Group]:
    """id(last thunk of a group) -> its Group, for every kernel, gemm, copy and memset group whose
    instruction the module has. A thunk's instruction is looked up by name in the computation its
    sequence comes from (the entry; a while's condition and body; a conditional's branches), then,
    for sequences inlined from calls, in every computation thunks come from."""
    anywhere: dict[str, HloInstruction] = {}
    for comp in global_computations(module):
        for instr in comp.instructions:
            anywhere.setdefault(instr.name, instr)
    groups: dict[int, Group] = {}

    def find(comp: HloComputation | None, name: str) -> HloInstruction | None:
        if comp is not None:
            for instr in comp.instructions:
                if instr.name == name:
                    return instr
        return anywhere.get(name)

    def visit(seq: SequentialThunk, comp: HloComputation | None, loops: list[str]) -> None:
        run: list[Thunk] = []
        for t in list(seq.thunks) + [None]:
            if run and (t is None or not _leaf(t) or t.profile_annotation != run[0].profile_annotation):
                instr = find(comp, run[0].profile_annotation)
                if instr is not None:
                    group = Group(instr, run, loops)
                    group.outputs = _output_slices(group, manifest)
                    group.operands = _operand_slices(group)
                    if group.outputs:
                        groups[id(run[-1])] = group
                run = []
            if t is None:
                break
            if _leaf(t):
                run.append(t)
            elif isinstance(t, SequentialThunk):
                visit(t, comp, loops)
            elif isinstance(t, WhileThunk):
                w = find(comp, t.profile_annotation)
                attrs = w.attrs if w is not None and w.opcode == "while" else {}
                visit(t.condition, attrs.get("condition"), loops + [t.profile_annotation])
                visit(t.body, attrs.get("body"), loops + [t.profile_annotation])
            elif isinstance(t, ConditionalThunk):
                c = find(comp, t.profile_annotation)
                branches = c.called_computations() if c is not None and c.opcode == "conditional" else []
                for k, branch in enumerate(t.branches):
                    visit(branch, branches[k] if k < len(branches) else None, loops)

    visit(manifest.thunks, module.entry, [])
    return groups


def _leaf(t: Thunk) -> bool:
    return isinstance(t, (KernelThunk, GemmThunk, ConvolutionThunk, CopyThunk, MemsetThunk))


def _output_slices(group: Group, manifest: Manifest) -> list[tuple[tuple[int, ...], BufferSlice, str]]:
    """(output shape index, slice, shape text) of each array leaf the group writes."""
    instr = group.instr
    leaves = [(index, leaf.to_string()) for index, leaf in instr.shape.leaf_shapes() if leaf.is_array]
    last = group.thunks[-1]
    if isinstance(last, GemmThunk):
        index = (0,) if instr.shape.is_tuple else ()
        return [(index, last.output, last.config.output_shape)]
    if isinstance(last, ConvolutionThunk):
        return [((), last.output, last.config.output_shape)]
    if isinstance(last, (CopyThunk, MemsetThunk)):
        if instr.shape.is_tuple:
            return []
        return [((), last.destination, instr.shape.to_string())]
    held = {index: a.slice for t in group.thunks for a in t.args for index in a.outputs}
    if held:  # the manifest says which argument holds which output (it may be an operand's)
        return [(index, held[index], text) for index, text in leaves if index in held]
    written: list[tuple[BufferSlice, str]] = []  # a manifest without `outputs`: match by shape
    for t in group.thunks:
        for a in t.args:
            if a.written:
                written = [w for w in written if w[0] != a.slice] + [(a.slice, a.shape)]
    out, used = [], set()
    for index, text in leaves:
        for k, (s, shape_text) in enumerate(written):
            if k not in used and shape_text == text:
                used.add(k)
                out.append((index, s, shape_text))
                break
    return out


def _operand_slices(group: Group) -> list[tuple[BufferSlice, str]] | None:
    """(slice, shape text) of each operand of the group's instruction, or None when the thunks do
    not say it unambiguously. A kernel's arguments are the fusion's operands in order, then its
    outputs, each distinct slice once (hlo-codegen's KernelArguments): operand k takes the next
    argument unless it repeats an earlier operand; the arguments left over must be written."""
    instr, thunks = group.instr, group.thunks
    if len(thunks) != 1:
        return None
    t = thunks[0]
    if isinstance(t, GemmThunk):
        if len(instr.operands) != 2:
            return None
        return [(t.lhs, t.config.lhs_shape), (t.rhs, t.config.rhs_shape)]
    if isinstance(t, ConvolutionThunk):
        if len(instr.operands) != 2:
            return None
        return [(t.input, t.config.input_shape), (t.filter, t.config.filter_shape)]
    if isinstance(t, CopyThunk):
        return [(t.source, instr.operands[0].shape.to_string())] if len(instr.operands) == 1 else None
    if isinstance(t, MemsetThunk):
        return [] if not instr.operands else None
    args, k, seen, out = list(t.args), 0, {}, []
    for op in instr.operands:
        if id(op) in seen:
            out.append(seen[id(op)])
            continue
        if k >= len(args) or args[k].shape != op.shape.to_string():
            return None
        seen[id(op)] = (args[k].slice, args[k].shape)
        out.append(seen[id(op)])
        k += 1
    return out if all(a.written for a in args[k:]) else None


def _leaf_value(value: Any, index: tuple[int, ...]) -> Any:
    for i in index:
        value = value[i]
    return value


def _what(group: Group) -> str:
    kernels = group.kernels
    if kernels:
        return f"kernel{'s' if len(kernels) > 1 else ''} {', '.join(kernels)}"
    return {GemmThunk: "gemm", ConvolutionThunk: "convolution", CopyThunk: "copy",
            MemsetThunk: "memset"}.get(type(group.thunks[-1]), "thunk")


def _unique(items: list[HloInstruction]) -> list[HloInstruction]:
    seen, out = set(), []
    for i in items:
        if id(i) not in seen:
            seen.add(id(i))
            out.append(i)
    return out


@dataclass
class Mismatch:
    group: Group
    label: str
    execution: int  # 0-based: the how-many-th run of this thunk group
    leaves: list[LeafComparison]
    compared: int  # groups compared before this one
    local: list[LeafComparison] | None = None  # against the interpreter on the kernel's own inputs
    operands: list[Any] | None = None  # the operand values the test platform gave it

    @property
    def severity(self) -> float:
        """How many times over the bounds its worst listed element is (inf for exact types)."""
        worst = 0.0
        for leaf in self.local if self.local is not None else self.leaves:
            if leaf.problem is not None:
                return float("inf")
            for _, _, _, abs_err, rel_err in leaf.worst:
                a = abs_err / leaf.abs_bound if leaf.abs_bound else float("inf")
                r = rel_err / leaf.rel_bound if leaf.rel_bound else float("inf")
                worst = max(worst, min(a, r))
        return worst
