"""`hlo-run --find-first-mismatch`: the first kernel whose output differs from the interpreter's.

Where it sits: behind hlo-run's `--find-first-mismatch` (XLA's `--isolate_instructions` role). It
takes the program's manifest (HLO text is optimized and compiled first, as for a plain run), then

1. evaluates the manifest's own module (the optimized, fusion-wrapped HLO the kernels were made
   from) with the reference interpreter, keeping the value of every instruction a thunk computes,
   each time it is computed (loop bodies once per iteration; `TracingEvaluator`);
2. runs the manifest on the test platform (host or cuda) with observers on the runtime
   (`ManifestExecutable.observer_before` / `observer`): before the first thunk of an instruction
   (a fusion's kernels, a gemm, a copy, a memset) it reads the operands from the device, when the
   kernel arguments say where they are; after the last it reads the outputs and compares them, in
   execution order, with the interpreter's value of that instruction for the same execution (the
   n-th run of a thunk against the n-th evaluation of its instruction), using hlo-run's bounds
   (`hlo_run.compare`);
3. confirms each difference on the thunk's own inputs: the interpreter evaluates the instruction
   on the operands read before it ran. A thunk right on its own inputs only inherited a difference
   (rounding that grew along a chain of kernels, or an earlier bug) and is not blamed; one wrong
   on them is recorded, and the run goes on (to at most MAX_FOUND of them);
4. reports. When the final results differ, the culprit is the first recorded thunk more than
   SEVERE times over the bounds (else the first recorded): thunk label (as thunk_sequence.txt
   numbers it), kernel names, which execution (loop iteration), the worst elements against both
   references, the instruction and its fused computation, the kernel IR / `.ll` / `.ptx` dump
   paths when `--dump-to` is on, and a standalone module of just that instruction (its operands
   made parameters) with the inputs it was given, written to `--mismatch-dir` (default: the dump
   directory, else `./hlo_run_mismatch`), plus the hlo-run command that runs it; smaller earlier
   and later differences are listed. When the final results match, the differences are listed
   and the run passes (long f32 reductions summed in another order differ a little on the way).

When every thunk matches, the final results are compared as well, and the optimized module's
interpretation with the input's: a difference there means hlo-opt's passes changed the meaning,
not a kernel. For HLO text that hlo-run optimized itself, `blame_pass` then names the pass: hlo-opt
dumps the module after every pass that changed it, and a binary search over the dumps (each
interpreted on the same arguments) finds the pass after which the result leaves the input's.

The report goes to stdout; exit status 1 when a mismatch was found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import numpy as np

from hlo_common.errors import HloError
from hlo_common.hlo.hlo_utils import global_computations
from hlo_common.interpreter.evaluator import Evaluator
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.manifest.manifest import Manifest
from hlo_common.manifest.thunks import (
    BufferSlice, ConditionalThunk, CopyThunk, GemmThunk, KernelThunk, MemsetThunk, SequentialThunk,
    Thunk, WhileThunk,
)
from hlo_common.hlo.printer import print_computation, print_instruction
from hlo_run.compare import LeafComparison, compare_arrays, compare_values, flatten_leaves

MAX_TRACE_BYTES = 4 << 30  # the interpreter's kept values; beyond this, later thunks are not compared
MAX_FOUND = 10  # thunks found wrong on their own inputs before the run stops
SEVERE = 10.0  # a difference this many times over the bounds is not summation-order rounding
DEFAULT_MISMATCH_DIR = "hlo_run_mismatch"


class MismatchFound(HloError):
    """The first thunk whose output differs (the report is printed before this is raised)."""


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
    return isinstance(t, (KernelThunk, GemmThunk, CopyThunk, MemsetThunk))


def _output_slices(group: Group, manifest: Manifest) -> list[tuple[tuple[int, ...], BufferSlice, str]]:
    """(output shape index, slice, shape text) of each array leaf the group writes."""
    instr = group.instr
    leaves = [(index, leaf.to_string()) for index, leaf in instr.shape.leaf_shapes() if leaf.is_array]
    last = group.thunks[-1]
    if isinstance(last, GemmThunk):
        index = (0,) if instr.shape.is_tuple else ()
        return [(index, last.output, last.config.output_shape)]
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


# -- the run -----------------------------------------------------------------------------------------
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


class _Observer:
    def __init__(self, executable, groups: dict[int, Group], tracer: TracingEvaluator, options):
        self.executable = executable
        self.groups = groups
        self.tracer = tracer
        self.options = options
        self.count: dict[int, int] = {}
        self.compared = 0
        self.untraced = 0
        self.drift = 0  # outputs off the interpreter's run only because their inputs already were
        self.found: list[Mismatch] = []
        self.first = {id(g.thunks[0]): g for g in groups.values()}
        self.operands: list[Any] | None = None

    def before(self, thunk: Thunk) -> None:
        """Read the operands of a group before its first thunk runs (in-place kernels overwrite them)."""
        group = self.first.get(id(thunk))
        if group is None:
            return
        self.operands = None
        if group.operands is not None:
            self.operands = [self.executable.read_slice(s, shape) for s, shape in group.operands]

    def __call__(self, thunk: Thunk) -> None:
        group = self.groups.get(id(thunk))
        if group is None:
            return
        k = self.count.get(id(thunk), 0)
        self.count[id(thunk)] = k + 1
        runs = self.tracer.trace[id(group.instr)]
        if k < len(runs):
            expected = runs[k]
        elif runs and not self.tracer.truncated:
            expected = runs[-1]  # loop-invariant: the interpreter reuses its value after two runs
        else:
            self.untraced += 1
            return
        got = [self.executable.read_slice(s, shape_text) for _, s, shape_text in group.outputs]
        leaves = self._compare(group, got, expected)
        if all(leaf.ok for leaf in leaves):
            self.compared += 1
            return
        # Off the interpreter's run; is it the kernel, or inputs that had already drifted within
        # the bounds? Evaluate the instruction on the operands this kernel was given.
        local = None
        operands = self.operands if self.first.get(id(group.thunks[0])) is group else None
        if operands is not None:
            value = Evaluator().evaluate_instruction(group.instr, operands)
            local = self._compare(group, got, value)
            if all(leaf.ok for leaf in local):
                self.compared += 1
                self.drift += 1
                return
        label = self.executable.labels.get(id(thunk), thunk.profile_annotation)
        self.found.append(Mismatch(group, label, k, leaves, self.compared, local, operands))
        self.compared += 1
        if len(self.found) >= MAX_FOUND:
            raise _Stop()

    def _compare(self, group: Group, got: list[np.ndarray], expected: Any) -> list[LeafComparison]:
        leaves = []
        for n, ((index, _, _), array) in enumerate(zip(group.outputs, got)):
            want = np.asarray(_leaf_value(expected, index))
            if want.dtype != array.dtype:
                want = want.astype(array.dtype)
            name = f"out{n}" if len(group.outputs) > 1 else "out"
            leaves.append(compare_arrays(name, array, want, self.options.abs_error_bound,
                                         self.options.rel_error_bound))
        return leaves


class _Stop(Exception):
    pass


def find_first_mismatch(program, options, args: list[Any]) -> bool:
    """Run `program` on options.platform thunk by thunk against the interpreter (module docstring);
    True when nothing differs, else the report is printed and MismatchFound raised."""
    from hlo_common.hlo.parser import parse_module
    from hlo_run.backends import get_backend
    from hlo_run.compile_hook import manifest_for
    from hlo_run.manifest_runtime import ManifestExecutable

    platform = options.platform
    get_backend(platform)  # says why the platform cannot run here
    manifest = manifest_for(program, platform)
    module = parse_module(manifest.hlo, f"{program.name} (optimized module)")
    groups = thunk_groups(manifest, module)
    watched = _unique([g.instr for g in groups.values()])
    click.echo(f"Interpreting the optimized module {module.name}, keeping the values of "
               f"{len(watched)} instruction(s)...", err=True)
    tracer = TracingEvaluator(watched)
    tracer.max_while_iterations = options.max_while_iterations
    expected = _interpret_manifest_module(tracer, module, args, groups)
    if tracer.truncated:
        click.echo(f"note: the kept values passed {MAX_TRACE_BYTES >> 30} GiB; later thunks are not "
                   "compared", err=True)
    click.echo(f"Running {program.name} on {platform}, comparing each thunk's output...", err=True)
    executable = ManifestExecutable(manifest, _device(platform), program.name)
    executable.max_while_iterations = options.max_while_iterations
    observer = _Observer(executable, groups, tracer, options)
    executable.observer = observer
    executable.observer_before = observer.before
    try:
        try:
            result = executable.run(args)
        except _Stop:
            result = None
    finally:
        executable.close()
    final = None if result is None else compare_values(result, expected, options.abs_error_bound,
                                                        options.rel_error_bound)
    if observer.found:
        return _report_found(observer.found, final, program, module, args, options)
    notes = []
    if observer.drift:
        notes.append(f"{observer.drift} off the interpreter's run only because their inputs were, "
                     "and right on those inputs")
    if observer.untraced:
        notes.append(f"{observer.untraced} not compared: no kept value")
    click.echo(f"All {observer.compared} thunk output(s) compared match the interpreter"
               + (f" ({'; '.join(notes)})" if notes else "") + ".")
    if not final.ok:
        if observer.drift:  # each kernel right on its inputs, the differences grown on the way
            click.echo("The final results still differ: the rounding differences the thunks above carried "
                       "within the bounds grew past them (an ill-conditioned module; judge it by its "
                       "distance to a float64 evaluation): " + final.one_line())
            raise MismatchFound("results differ but every thunk is right on its inputs: rounding drift")
        click.echo("The final results still differ (an output no thunk writes?): " + final.one_line())
        raise MismatchFound("results differ but no thunk output does")
    if program.module is not None and program.module is not module:
        from hlo_common.interpreter.evaluator import evaluate

        original = evaluate(program.module, list(args))
        before = compare_values(expected, original, options.abs_error_bound, options.rel_error_bound)
        if not before.ok:
            click.echo("The optimized module's interpretation differs from the input's: "
                       f"{before.one_line()}. The kernels are right.")
            from hlo_run.cli import elided_constants

            elided = elided_constants(program.module)
            if elided:
                click.echo(f"The input has {elided} constant(s) printed as {{...}}: their stand-in values "
                           "follow the constants' names, which passes change (renaming, cloning), so this "
                           "difference is expected and says nothing about hlo-opt. Use a dump with the "
                           "constants written out (XLA: --xla_dump_large_constants).")
                raise MismatchFound("the optimized module differs from the input on the interpreter, "
                                    f"which {elided} elided {{...}} constant(s) can explain")
            click.echo("hlo-opt's passes changed the result.")
            culprit = None
            if program.hlo_text is not None and program.run_hlo_passes and not program.module.is_scheduled:
                directory = Path(options.mismatch_dir or options.dump_to or DEFAULT_MISMATCH_DIR)
                culprit = blame_pass(program, original, args, options, directory / "passes")
            if culprit is None:
                click.echo("Narrow it down with hlo-opt --passes / --disable-pass.")
                raise MismatchFound("the optimized module differs from the input on the interpreter")
            raise MismatchFound(f"the optimized module differs from the input on the interpreter; "
                                f"hlo-opt pass '{culprit}' changes the result")
    click.echo(f"** Results on {platform} and the interpreter match, thunk by thunk. **")
    return True


def _interpret_manifest_module(tracer: TracingEvaluator, module: HloModule, args: list[Any],
                               groups: dict[int, Group]) -> Any:
    """The traced interpretation of the module the kernels were made from. A module that is not
    valid HLO, or that the interpreter cannot evaluate, is itself the finding: MismatchFound names
    the instruction and the thunk (kernel, gemm, copy) compiled from the call that holds it."""
    from hlo_common.errors import InterpreterError, VerificationError
    from hlo_common.hlo.verifier import verify_module

    try:
        verify_module(module)
        return tracer.evaluate(module, list(args))
    except (VerificationError, InterpreterError) as exc:
        what = "is not valid HLO" if isinstance(exc, VerificationError) else "cannot be interpreted"
        holder = _group_holding(groups, getattr(exc, "computation", None))
        where = "" if holder is None else \
            f" It belongs to %{holder.instr.name} ({_what(holder)}), compiled from it."
        click.echo(f"The manifest's own module (what hlo-codegen compiled) {what}: {exc.one_line()}.{where}")
        raise MismatchFound(f"the manifest's module {what}"
                            + ("" if holder is None else f" at %{holder.instr.name}")) from exc


def _group_holding(groups: dict[int, Group], computation: str | None) -> Group | None:
    """The thunk group whose instruction is, or calls (at any depth), the computation named."""
    if computation is None:
        return None
    for group in groups.values():
        if group.instr.parent is not None and group.instr.parent.name == computation:
            return group
        pending, seen = list(group.instr.called_computations()), set()
        while pending:
            comp = pending.pop()
            if comp.name == computation:
                return group
            if comp.name not in seen:
                seen.add(comp.name)
                pending.extend(c for i in comp.instructions for c in i.called_computations())
    return None


_STEP = re.compile(r"^module_\d{4}\..*\.(\d{4})\.([^.]+)\.after_(.+)\.before_(.+)\.txt$")


def _fresh_directory(directory: Path) -> Path:
    """`directory`, or when something is there already `directory.1`, `.2`, ...: the bisector's
    dumps go into a folder it creates, and it never deletes one it did not create."""
    candidate, n = directory, 0
    while True:
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            n += 1
            candidate = directory.with_name(f"{directory.name}.{n}")
        except OSError as exc:
            raise HloError(f"cannot create the bisector's dump folder '{candidate}': "
                           f"{exc.strerror or exc}") from None


def blame_pass(program, expected: Any, args: list[Any], options, directory: Path) -> str | None:
    """Find a pass of hlo-opt's pipeline after which the interpreter's result leaves `expected`:
    hlo-opt dumps the module after every pass that changed it (`--dump-pass-re .*`), and a binary
    search over those dumps finds two neighbours, the first matching and the second not; the pass
    between them changed the result. Prints what it found; returns the pass name (None if none)."""
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.hlo.parser import parse_module
    from hlo_run.compile_hook import OPT_TOOL, run_tool

    directory = _fresh_directory(directory)
    run_tool(OPT_TOOL, ["--dump-to", str(directory), "--dump-pass-re", ".*", "-o",
                        str(directory / "optimized.hlo")], program.hlo_text.encode("utf-8"), program.name)
    steps = sorted((int(m.group(1)), p) for p in directory.iterdir() if (m := _STEP.match(p.name)))
    dumps = [p for _, p in steps] + sorted(directory.glob("module_*.after_optimizations.txt"))
    click.echo(f"Bisecting hlo-opt's {len(dumps)} dumps between passes ({directory})...", err=True)
    values: dict[int, Any] = {}

    def matches(k: int) -> bool:
        if k not in values:
            values[k] = evaluate(parse_module(dumps[k].read_text(), str(dumps[k])), list(args))
        return compare_values(values[k], expected, options.abs_error_bound, options.rel_error_bound).ok

    lo, hi = -1, len(dumps) - 1  # -1: the input itself, which matches by definition
    if hi < 0 or matches(hi):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if matches(mid):
            lo = mid
        else:
            hi = mid
    m = _STEP.match(dumps[hi].name)
    if m is None:
        return None
    pipeline, name = m.group(2), m.group(3)
    before = dumps[lo] if lo >= 0 else None
    click.echo(f"The pass that changes the result: {name} (pipeline {pipeline}).")
    click.echo(f"  before it: {before if before else program.name}")
    click.echo(f"  after it:  {dumps[hi]}")
    diff = compare_values(values[hi], expected, options.abs_error_bound, options.rel_error_bound)
    click.echo(f"  {diff.one_line()}")
    if before is not None:
        click.echo(f"Reproduce with: hlo-opt --passes {name} {before} -o after.hlo, then hlo-run "
                   "--platform interpreter on both files")
    return name


def _report_found(found: list[Mismatch], final, program, module: HloModule, args: list[Any],
                  options) -> bool:
    """Report the thunks found wrong on their own inputs. When the final results differ, the
    culprit is the first one far over the bounds (else the first); smaller differences, typical of
    a different summation order in long reductions, are listed apart. When the final results match,
    the differences are listed and the run passes."""
    def brief(m: Mismatch) -> str:
        times = "exact comparison" if m.severity == float("inf") else f"{m.severity:.3g}x the bounds"
        return f"thunk {m.label} ({_what(m.group)}), execution {m.execution + 1}: {times}"

    if final is not None and final.ok:
        click.echo(f"The final results match the interpreter, but {len(found)} thunk output(s) differ "
                   "from it on their own inputs (small ones are usual in long f32/bf16 reductions):")
        for m in found:
            click.echo(f"  {brief(m)}")
        click.echo(f"** Results on {options.platform} and the interpreter are close enough. **")
        return True
    culprit = next((m for m in found if m.severity >= SEVERE), found[0])
    click.echo(_report(culprit, program, module, args, options))
    before = [m for m in found if m is not culprit and found.index(m) < found.index(culprit)]
    after = [m for m in found if found.index(m) > found.index(culprit)]
    if before:
        click.echo(f"Smaller differences before it (under {SEVERE:g}x the bounds, as rounding gives):")
        click.echo("\n".join(f"  {brief(m)}" for m in before))
    if after:
        more = " (the run stopped there)" if len(found) >= MAX_FOUND else ""
        click.echo(f"Later thunks also wrong on their own inputs{more}:")
        click.echo("\n".join(f"  {brief(m)}" for m in after))
    raise MismatchFound(f"first mismatch at thunk {culprit.label} ({_what(culprit.group)}), "
                        f"execution {culprit.execution + 1}")


def _device(platform: str):
    if platform == "cuda":
        from hlo_run.backends.cuda import CudaDevice

        return CudaDevice()
    from hlo_run.backends.host import HostDevice

    return HostDevice()


def _unique(items: list[HloInstruction]) -> list[HloInstruction]:
    seen, out = set(), []
    for i in items:
        if id(i) not in seen:
            seen.add(id(i))
            out.append(i)
    return out


def _what(group: Group) -> str:
    kernels = group.kernels
    if kernels:
        return f"kernel{'s' if len(kernels) > 1 else ''} {', '.join(kernels)}"
    return {GemmThunk: "gemm", CopyThunk: "copy", MemsetThunk: "memset"}.get(type(group.thunks[-1]), "thunk")


# -- the report ----------------------------------------------------------------------------------------
def _report(m: Mismatch, program, module: HloModule, args: list[Any], options) -> str:
    g = m.group
    instr = g.instr
    lines = [f"First mismatch: thunk {m.label} ({_what(g)}), instruction %{instr.name} "
             f"in computation {instr.parent.name if instr.parent else '?'}"]
    if g.loops:
        where = " > ".join(f"%{w}" for w in g.loops)
        lines.append(f"  execution {m.execution + 1} (inside while {where}: iteration {m.execution}, "
                     "counting from 0, when it runs once per iteration)")
    else:
        lines.append(f"  execution {m.execution + 1}")
    lines.append(f"  {m.compared} earlier thunk output(s) matched the interpreter")
    lines.append("  against the interpreter's run of the whole module:")
    for leaf in m.leaves:
        lines.extend("    " + line for line in leaf.summary_lines())
    if m.local is not None:
        lines.append("  against the interpreter on the operands this thunk was given (so not inherited):")
        for leaf in m.local:
            lines.extend("    " + line for line in (leaf.summary_lines() if not leaf.ok else
                                                    [f"{leaf.name}: matches"]))
    lines.append("Instruction:")
    lines.append("  " + print_instruction(instr, print_metadata=False))
    if instr.opcode == "fusion":
        lines.append("Fused computation:")
        fused = print_computation(instr.fused_computation(), print_metadata=False)
        lines.extend("  " + line for line in fused.rstrip("\n").splitlines())
    dumps = _dump_paths(options.dump_to, g.kernels)
    if dumps:
        lines.append("Dumps:")
        lines.extend(f"  {p}" for p in dumps)
    directory = Path(options.mismatch_dir or options.dump_to or DEFAULT_MISMATCH_DIR)
    hlo_path, npz_path = write_standalone(instr, module, m.execution, args, directory, m.operands)
    lines.append(f"Standalone module: {hlo_path}")
    origin = ("the operand values this thunk was given" if m.operands is not None
              else "the interpreter's operand values for this execution")
    lines.append(f"  its inputs ({origin}): {npz_path}")
    lines.append("Reproduce just this instruction with:")
    lines.append(f"  hlo-run {hlo_path} --platform {options.platform} --inputs {npz_path} --no-hlo-passes")
    return "\n".join(lines)


def _dump_paths(dump_to: str | None, kernels: list[str]) -> list[str]:
    if not dump_to:
        return []
    directory = Path(dump_to)
    out = []
    for kernel in kernels:
        for suffix in ("kernel_ir.txt", "ll", "ptx"):
            out.extend(str(p) for p in sorted(directory.glob(f"module_*.{kernel}.{suffix}")))
    return out


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")


def standalone_text(instr: HloInstruction) -> str:
    """A scheduled module of just `instr`: its operands as parameters, the computations it calls."""
    called: list[HloComputation] = []
    seen: set[int] = set()

    def collect(comp: HloComputation) -> None:
        if id(comp) in seen:
            return
        seen.add(id(comp))
        for i in comp.instructions:
            for c in i.called_computations():
                collect(c)
        called.append(comp)

    for c in instr.called_computations():
        collect(c)
    params = [f"p{k}" for k in range(len(instr.operands))]
    body = print_instruction(instr, print_metadata=False)
    operands = ", ".join(f"%{o.name}" for o in instr.operands)
    head = f"%{instr.name} = {instr.shape} {instr.opcode}({operands})"
    if not body.startswith(head):
        raise HloError(f"%{instr.name}: cannot write it as a standalone module")
    body = f"%{instr.name} = {instr.shape} {instr.opcode}(" + ", ".join(f"%{p}" for p in params) + ")" \
        + body[len(head):]
    parts = [f"HloModule {instr.name}_standalone, is_scheduled=true\n"]
    parts += [print_computation(c, print_metadata=False) for c in called]
    sig = ", ".join(f"{p}: {o.shape.to_string(False)}" for p, o in zip(params, instr.operands))
    entry = [f"ENTRY %main ({sig}) -> {instr.shape.to_string(False)} {{\n"]
    entry += [f"  %{p} = {o.shape} parameter({k})\n" for k, (p, o) in enumerate(zip(params, instr.operands))]
    entry.append(f"  ROOT {body}\n}}\n")
    parts.append("".join(entry))
    return "\n".join(parts)


def write_standalone(instr: HloInstruction, module: HloModule, execution: int, args: list[Any],
                     directory: Path, operands: list[Any] | None = None) -> tuple[Path, Path]:
    """Write the standalone module of `instr` and its inputs: `operands` when given, else the
    interpreter's operand values of its `execution`-th run."""
    from hlo_common.cli_util import write_file_atomically
    from hlo_run.npz_io import save_arguments

    if operands is None:
        tracer = TracingEvaluator([instr], capture=(instr, execution), max_bytes=0)
        tracer.evaluate(module, list(args))
        operands = tracer.captured
    if operands is None:  # a loop-invariant instruction runs once in the interpreter
        tracer = TracingEvaluator([instr], capture=(instr, 0), max_bytes=0)
        tracer.evaluate(module, list(args))
        operands = tracer.captured or []
    directory.mkdir(parents=True, exist_ok=True)
    stem = _UNSAFE.sub("_", f"{module.name}.{instr.name}")
    hlo_path, npz_path = directory / f"{stem}.hlo", directory / f"{stem}.inputs.npz"
    write_file_atomically(hlo_path, standalone_text(instr))
    save_arguments(npz_path, list(operands))
    return hlo_path, npz_path
