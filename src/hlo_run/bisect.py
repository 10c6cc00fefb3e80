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

The report goes to stdout; exit status 1 when a mismatch was found. The interpreter's side and the
thunk groups are in `bisect_trace.py`, the reports, the standalone module and the pass bisection
in `bisect_report.py`; this file runs the comparison.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import numpy as np

from hlo_common.interpreter.evaluator import Evaluator
from hlo_common.hlo.ir import HloModule
from hlo_common.manifest.thunks import Thunk
from hlo_run.bisect_report import (
    DEFAULT_MISMATCH_DIR, MAX_FOUND, MismatchFound, blame_pass, report_found,
)
from hlo_run.bisect_trace import (
    MAX_TRACE_BYTES, Group, Mismatch, TracingEvaluator, _leaf_value, _unique, _what, thunk_groups,
)
from hlo_run.compare import LeafComparison, compare_arrays, compare_values


# -- the run -----------------------------------------------------------------------------------------
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
    observer, result = _run_observed(manifest, program.name, platform, groups, tracer, options, args)
    final = None if result is None else compare_values(result, expected, options.abs_error_bound,
                                                        options.rel_error_bound)
    if observer.found:
        return report_found(observer.found, final, program, module, args, options)
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
        _check_the_passes(program, expected, args, options)
    click.echo(f"** Results on {platform} and the interpreter match, thunk by thunk. **")
    return True


def _run_observed(manifest, name: str, platform: str, groups: dict[int, Group], tracer: TracingEvaluator,
                  options, args: list[Any]) -> tuple[_Observer, Any]:
    """Run the manifest on `platform` with the observer comparing each thunk group's outputs; the
    run's result, None when the observer stopped it (MAX_FOUND differences)."""
    from hlo_run.manifest_runtime import ManifestExecutable

    executable = ManifestExecutable(manifest, _device(platform), name)
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
    return observer, result


def _check_the_passes(program, expected: Any, args: list[Any], options) -> None:
    """Every thunk matched: compare the optimized module's interpretation with the input's, and
    when they differ name the hlo-opt pass that changed the result (MismatchFound)."""
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


def _device(platform: str):
    if platform == "cuda":
        from hlo_run.backends.cuda import CudaDevice

        return CudaDevice()
    from hlo_run.backends.host import HostDevice

    return HostDevice()
