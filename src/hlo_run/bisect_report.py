"""The reports of `hlo-run --find-first-mismatch` (`hlo_run.bisect`): the culprit thunk and the
smaller differences around it, the standalone module of the culprit's instruction with its
inputs, and the bisection over hlo-opt's pass dumps that names a pass changing the result.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.printer import print_computation, print_instruction
from hlo_run.bisect_trace import Mismatch, TracingEvaluator, _what
from hlo_run.compare import compare_values

MAX_FOUND = 10  # thunks found wrong on their own inputs before the run stops
SEVERE = 10.0  # a difference this many times over the bounds is not summation-order rounding
DEFAULT_MISMATCH_DIR = "hlo_run_mismatch"


class MismatchFound(HloError):
    """The first thunk whose output differs (the report is printed before this is raised)."""


def report_found(found: list[Mismatch], final, program, module: HloModule, args: list[Any],
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


# -- the passes ---------------------------------------------------------------------------------------
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
