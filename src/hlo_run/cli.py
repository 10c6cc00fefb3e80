# size: the command, its options and one run's steps, read in order
"""`hlo-run`: run an HLO module or a manifest and compare it with a reference (run_hlo_module).

The last tool of the pipeline (`hlo-opt | hlo-codegen | hlo-run`), modelled on XLA's
run_hlo_module, whose flag spellings it also takes (`hlo_run.xla_flags`): it reads HLO text or a
manifest from a file or stdin, verifies HLO text (the verifier's one-line error, exit 1), makes
arguments (random from `--seed` by the rule in `hlo_run.inputs`, or read from `--inputs
FILE.npz`), runs the module on a platform, optionally runs it again on a reference platform and
compares the two with run_hlo_module's both-bounds rule, bounds fitted to each output's type
unless given (`hlo_run.compare`). HLO text run on cuda or host is first optimized by hlo-opt's
`gpu` pipeline and compiled by hlo-codegen, both as subprocesses (`hlo_run.compile_hook`),
unless it is already scheduled or `--no-hlo-passes` is given. `--find-first-mismatch` names the
first kernel whose output differs from the interpreter's (`hlo_run.bisect`).

    hlo-run --platform interpreter --reference-platform xla-cpu --print-literals model.hlo
    hlo-run --platform=CUDA --reference_platform=default --print_literals model.hlo

stdout holds only `--print-literals` text (`** Argument i **`, `** Result **`, `** Result with
reference runner NAME **`, each followed by `<shape> <literal>`) and `--find-first-mismatch`'s
report; progress, timings, warnings and errors go to stderr. Exit codes: 0 success, 1 user error
(bad input, a failed comparison), 2 usage error.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

import click
import numpy as np

from hlo_common.cli_util import click_main, report_error, run_command
from hlo_common.errors import HloError, HloParseError, InputError
from hlo_common.interpreter.registry import TOKEN
from hlo_common.hlo.literal import format_literal
from hlo_common.hlo.shape import Shape
from hlo_common.source import INPUT_FORMATS, place_in_input, read_input
from hlo_run.backends import Program, default_platform, get_backend
from hlo_run.compare import compare_values

TOOL = "hlo-run"

PLATFORMS = ("cuda", "host", "interpreter")
MAX_ITERATIONS = 1_000_000  # --iterations: beyond this a typo, not a measurement
MAX_WHILE_LIMIT = 1 << 62
MAX_SEED = (1 << 64) - 1


class FiniteBound(click.ParamType):
    """A finite error bound >= 0: NaN would disable the comparison, infinity accept anything."""

    name = "float"

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            number = value
        else:
            try:
                number = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number) or number < 0:
            self.fail(f"{value} is not a finite number >= 0", param, ctx)
        return number


FINITE_BOUND = FiniteBound()
REFERENCE_PLATFORMS = ("interpreter", "xla-cpu", "host", "cuda", "none")


class ProgramError(HloError):
    """A failure while running one program, prefixed with the program's name."""


class ComparisonFailed(HloError):
    """The results differ from the reference beyond the error bounds."""

    def __init__(self, message: str, details: list[str]):
        super().__init__(message)
        self.details = details

    def excerpt(self) -> str | None:
        return "\n".join("  " + line for line in self.details) or None


@dataclass
class RunOptions:
    platform: str
    reference: str  # "none" for no comparison
    inputs: str | None = None
    seed: int = 0
    output: str | None = None
    print_literals: bool = False
    abs_error_bound: float | None = None  # None: fitted to each output's type
    rel_error_bound: float | None = None
    iterations: int = 1
    hlo_passes: bool = True
    dump_to: str | None = None
    large_float_range: bool = False
    find_first_mismatch: bool = False
    mismatch_dir: str | None = None
    max_while_iterations: int | None = None
    num_replicas: int | None = None  # None: the module's header (hlo_run.devices)
    num_partitions: int | None = None
    max_devices: int = 64
    collective_timeout: float = 60.0
    verbose: bool = False
    snapshot: Any = None  # hlo_common.proto.loader.ProtoInput of an HloSnapshot input (set later)
    save_snapshot: str | None = None  # --save-snapshot: where the run is written as an HloSnapshot
    keep_collectives: bool = False  # --keep-collectives: one device's collectives through MPI / NCCL


class XlaFlagsCommand(click.Command):
    """A click command that first rewrites run_hlo_module's flag spellings (`hlo_run.xla_flags`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from hlo_run.xla_flags import XlaFlagError, translate

        try:
            args = translate(list(args))
        except XlaFlagError as exc:
            click.echo(f"{TOOL}: error: {exc.one_line()}", err=True)
            ctx.exit(1)
        return super().parse_args(ctx, args)


@click.command(cls=XlaFlagsCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("input_path", metavar="[INPUT]", required=False)
@click.option("--platform", type=click.Choice(PLATFORMS, case_sensitive=False),
              help="Where to run (default: cuda when a GPU is usable, else host). "
                   "XLA: --platform=CUDA|gpu|Host|cpu|Interpreter.")
@click.option("--inputs", "inputs_path", metavar="FILE.npz",
              help="Arguments named arg0..argN-1 in entry-parameter order.")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True,
              help="Seed of the random arguments when --inputs is not given (rule: see docs/tools.md).")
@click.option("--output", "output_path", metavar="FILE.npz",
              help="Write the results as out0..outM-1 (the leaves of a tuple result, in order).")
@click.option("--print-literals", is_flag=True, help="Print arguments and results in XLA literal syntax.")
@click.option("--reference-platform", type=click.Choice(REFERENCE_PLATFORMS, case_sensitive=False),
              help="Compare with this platform (default: interpreter, or none when running on it). "
                   "XLA: --reference_platform= (empty: none, default: interpreter).")
@click.option("--abs-error-bound", type=FINITE_BOUND, default=None,
              help="Default: fitted to each output's type (f32 1e-3, bf16/f16 2e-2, f8 2 eps, ints exact).")
@click.option("--rel-error-bound", type=FINITE_BOUND, default=None,
              help="Default: fitted to each output's type, as --abs-error-bound.")
@click.option("--iterations", type=click.IntRange(min=1, max=MAX_ITERATIONS), default=1, show_default=True,
              help="Run N times and report the times.")
@click.option("--max-while-iterations", type=click.IntRange(min=0, max=MAX_WHILE_LIMIT), default=None,
              metavar="N", help="End the run with an error naming the loop when a while loop's condition "
                                "still holds after N iterations, on every platform (default: no limit; "
                                "XLA:CPU as reference has none).")
@click.option("--hlo-passes/--no-hlo-passes", default=True, show_default=True,
              help="Optimize HLO text with hlo-opt's gpu pipeline before compiling it for cuda or "
                   "host (XLA: --run_test_hlo_passes); already scheduled modules are never optimized.")
@click.option("--dump-to", metavar="DIR",
              help="hlo-opt's and hlo-codegen's dumps when HLO text is compiled for --platform host or "
                   "cuda (XLA: --xla_dump_to); refused where nothing is compiled. With "
                   "--find-first-mismatch and a manifest: where its compilation's dumps are.")
@click.option("--large-float-range", is_flag=True,
              help="Random floats log-uniform over the type's whole range (XLA: --use_large_float_range).")
@click.option("--find-first-mismatch", is_flag=True,
              help="Compare every kernel's output with the interpreter, in execution order, and "
                   "report the first one that differs.")
@click.option("--mismatch-dir", metavar="DIR",
              help="Where --find-first-mismatch writes the standalone module of the bad kernel "
                   "(default: --dump-to, else ./hlo_run_mismatch).")
@click.option("--num-replicas", type=click.IntRange(min=1), default=None, metavar="N",
              help="Replicas to run on (default: the module's replica_count). XLA: --num_replicas.")
@click.option("--num-partitions", type=click.IntRange(min=1), default=None, metavar="N",
              help="Partitions to run on (default: the module's num_partitions). XLA: --num_partitions.")
@click.option("--max-devices", type=click.IntRange(min=1), default=64, show_default=True,
              help="Refuse modules that need more devices (replicas x partitions) than this.")
@click.option("--collective-timeout", type=click.FloatRange(min=0, min_open=True, max=1e6), default=60.0,
              show_default=True, metavar="SECONDS",
              help="How long a collective waits for the other devices of its group.")
@click.option("--keep-collectives", is_flag=True,
              help="On one device, run the collectives as collective thunks through the multi-device path "
                   "(one MPI rank; NCCL on cuda) instead of the copies they compile to (hlo-codegen "
                   "--keep-collectives).")
@click.option("--verbose", is_flag=True,
              help="Say more: the notes of hlo-opt and hlo-codegen (e.g. a convolution cuDNN cannot take "
                   "stays a kernel of ours) and the device-to-MPI-rank mapping of --platform host on "
                   "several devices.")
@click.option("--split-input-file", is_flag=True,
              help="Treat `// -----` lines as separators between modules.")
@click.option("--input-format", "input_format", type=click.Choice(INPUT_FORMATS),
              help="hlo text, HloModuleProto (pb, pbtxt) or HloSnapshot (runs on its arguments and "
                   "checks its result); default: from the name and first bytes")
@click.option("--save-snapshot", metavar="FILE.pb",
              help="Write the run as an HloSnapshot: the module, its arguments and its result "
                   "(XLA: --xla_dump_hlo_snapshots); `hlo-run FILE.pb` runs it again.")
@click.option("--debug", is_flag=True, help="Show Python tracebacks.")
def cli(input_path, platform, inputs_path, seed, output_path, print_literals, reference_platform,
        abs_error_bound, rel_error_bound, iterations, max_while_iterations, hlo_passes, dump_to,
        large_float_range, find_first_mismatch, mismatch_dir, num_replicas, num_partitions, max_devices,
        collective_timeout, split_input_file, debug, input_format=None, verbose=False,
        save_snapshot=None, keep_collectives=False) -> None:
    """Run an HLO module (file or stdin) and compare it with a reference, like run_hlo_module.

    A manifest is executable code, like a shared library: run only manifests you trust. Its
    sha256 guards against corruption, not tampering. Before any kernel runs, each one is checked
    against what hlo-codegen emits (host LLVM IR may call only LLVM intrinsics, PTX only its own
    functions; argument counts and launch limits must match its signature and the device).
    """
    platform = (platform or default_platform()).lower()
    reference = (reference_platform or ("none" if platform == "interpreter" else "interpreter")).lower()
    options = RunOptions(platform, reference, inputs_path, seed, output_path, print_literals,
                         abs_error_bound, rel_error_bound, iterations, hlo_passes, dump_to,
                         large_float_range, find_first_mismatch, mismatch_dir, max_while_iterations,
                         num_replicas, num_partitions, max_devices, collective_timeout, verbose,
                         save_snapshot=save_snapshot, keep_collectives=keep_collectives)
    if find_first_mismatch and platform == "interpreter":
        raise click.UsageError("--find-first-mismatch compares the kernels of --platform cuda or host "
                               "with the interpreter; choose one of those platforms")
    _check_dump_to(dump_to, platform)
    run_command(TOOL, lambda: _run_input(input_path, options, split_input_file, debug, input_format),
                debug)


def _check_dump_to(dump_to: str | None, platform: str) -> None:
    """--dump-to is hlo-opt's and hlo-codegen's; where neither runs it would do nothing, silently."""
    if dump_to is None:
        return
    if platform == "interpreter":
        raise click.UsageError("--dump-to: --platform interpreter compiles nothing, so there is nothing to "
                               "dump (hlo-opt and hlo-codegen run for --platform host or cuda)")
    if os.path.exists(dump_to) and not os.path.isdir(dump_to):
        raise click.UsageError(f"--dump-to '{dump_to}': not a directory")


def _run_input(input_path: str | None, options: RunOptions, split: bool, debug: bool,
               input_format: str | None = None) -> None:
    source = read_input(input_path, input_format)
    programs = load_programs(source.text, source.name, split, source)
    options.snapshot = source.snapshot
    if options.dump_to is not None and not options.find_first_mismatch \
            and any(p.manifest is not None for p in programs):
        raise click.UsageError("--dump-to: the input is a manifest, compiled already, so there is nothing "
                               "to dump (hlo-codegen --dump-to dumps its compilation; with "
                               "--find-first-mismatch, --dump-to names where those dumps are)")
    if len(programs) > 1 and (options.inputs or options.output or options.save_snapshot):
        raise click.UsageError("--inputs, --output and --save-snapshot take a single module; the input holds "
                               f"{len(programs)} (drop --split-input-file or split the file)")
    failures = sum(not _run_reporting(p, options, debug, multiple=len(programs) > 1) for p in programs)
    if failures:
        if len(programs) > 1:
            click.echo(f"{failures}/{len(programs)} runs failed.", err=True)
        sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (`hlo-run`): usage errors are one line, exit status 2."""
    click_main(cli, TOOL, argv)


def load_programs(text: str, name: str, split: bool, source=None) -> list[Program]:
    """Parse the input into programs: one module, or one per `// -----` chunk with --split-input-file
    (`source`, the hlo_common.source.Input the text came from, places errors in its file)."""
    from hlo_common.manifest.manifest import looks_like_manifest
    from hlo_common.hlo.parser import parse_module, parse_modules, split_module_texts

    if looks_like_manifest(text):
        from hlo_run.manifest_runtime import manifest_program

        return [manifest_program(text, name)]
    if not split:
        programs = [Program(name, parse_module(text, name), text)]
    else:
        modules = parse_modules(text, name)
        chunks = split_module_texts(text)
        if len(modules) == 1:
            programs = [Program(name, modules[0], chunks[0])]
        else:
            programs = [Program(f"{name}#{k}", m, chunk, module_id=k)
                        for k, (m, chunk) in enumerate(zip(modules, chunks))]
    for program in programs:
        if source is not None:
            place_in_input(program.module, source)
        verify_input(program)
        elided = elided_constants(program.module)
        if elided:
            click.echo(f"{TOOL}: warning: {program.name}: {elided} constant(s) printed as {{...}} (their "
                       "values are not in the text) get stand-in values chosen by the constant's name; "
                       "passes that rename or clone them change those values, so results may differ from "
                       "the reference for that reason alone", err=True)
    return programs


def elided_constants(module) -> int:
    """How many constants of `module` were written `{...}` (XLA's dumps elide large literals)."""
    return sum(1 for comp in module.computations for i in comp.instructions
               if i.opcode == "constant" and i.literal_unknown)


def verify_input(program: Program) -> None:
    """The verifier on HLO text as given, before any platform touches it (hlo-opt's message)."""
    from hlo_common.hlo_pass.pipeline import verify

    verify(program.module, "verification failed in the input")


def _run_reporting(program: Program, options: RunOptions, debug: bool, multiple: bool) -> bool:
    """Run one program; with several programs an error is reported and the next one still runs."""
    if multiple and options.print_literals:
        click.echo(f"** Running {program.name} **")
    if not multiple:
        return run_program(program, options)
    try:
        return run_program(program, options)
    except Exception as exc:  # noqa: BLE001 - report it and go on with the next module
        report_error(TOOL, exc, debug)
        return False


def run_program(program: Program, options: RunOptions) -> bool:
    """Run `program` as the options say; True when it ran (and matched its reference)."""
    program.run_hlo_passes = options.hlo_passes
    program.dump_to = options.dump_to
    program.verbose = options.verbose
    program.keep_collectives = options.keep_collectives
    try:
        _set_devices(program, options)
        spmd, args = _prepare_arguments(program, options)
        snapshot = None
        if options.save_snapshot:
            from hlo_run.snapshot_io import SnapshotWriter

            snapshot = SnapshotWriter(options.save_snapshot, program, args, options.platform)
        if options.find_first_mismatch:
            from hlo_run.bisect import find_first_mismatch

            matched = find_first_mismatch(program, options, args)
            if snapshot is not None:  # the arguments that show the mismatch, without a result
                snapshot.finish()
            return matched
        result = _run_on(options.platform, program, args if spmd is None else spmd.split(args),
                         options.iterations, options.max_while_iterations, options.collective_timeout)
        if result is None:  # one MPI rank other than 0 (hlo_run.mpi_launch): rank 0 reports
            return True
        checked = False
        if spmd is not None:  # the global results (hlo_run.spmd_run says what the reference runs)
            result, program, checked = spmd.finish(result, program, args, options, _check_against_reference)
        if snapshot is not None:  # written before any comparison, so that a wrong answer is kept too
            snapshot.finish(result)
        if options.print_literals:
            echo_literal("** Result **", result, _result_shape(program))
        if options.output:
            from hlo_run.npz_io import save_outputs

            save_outputs(options.output, result)
        if options.snapshot is not None and options.snapshot.result is not None and not options.inputs:
            _check_against_snapshot(program, options, result)
        if options.reference != "none" and not checked:
            _check_against_reference(program, options, args, result)
    except (HloParseError, ProgramError, ComparisonFailed, InputError):
        raise
    except HloError as exc:
        line = exc.one_line()
        named = line.startswith(program.name) and line[len(program.name):len(program.name) + 1] in (":", " ")
        prefix = "" if named else f"{program.name}: "  # `name: ...`, `name:12:3: ...`, `name (module m)...`
        raise ProgramError(prefix + line) from exc
    return True


def _prepare_arguments(program: Program, options: RunOptions):
    """The arguments (printed with --print-literals); a sharded program over global arrays is
    partitioned first and takes global ones (hlo_run.spmd_run)."""
    from hlo_run.spmd_run import prepare

    spmd = prepare(program)
    shown = spmd.original if spmd is not None else program
    args = make_arguments(shown, options)
    if options.print_literals:
        for i, (arg, shape) in enumerate(zip(args, _device_shapes(shown))):
            echo_literal(f"** Argument {i} **", arg, shape)
    return spmd, args


def _set_devices(program: Program, options: RunOptions) -> None:
    """The program's replica and partition counts (several devices: host, cuda over NCCL, interpreter)."""
    if program.module is None:
        return
    from hlo_run.devices import DeviceCountError, check_device_groups, device_counts

    program.replicas, program.partitions = device_counts(
        program.module, options.num_replicas, options.num_partitions, options.max_devices)
    check_device_groups(program.module, program.replicas, program.partitions)
    if program.devices > 1:
        if options.find_first_mismatch:
            raise DeviceCountError(f"--find-first-mismatch runs one device; module {program.module.name} "
                                   f"runs on {program.devices}")


def _device_shapes(program: Program) -> list[Shape]:
    from hlo_run.devices import device_shape

    shapes = program.parameter_shapes
    return shapes if program.devices == 1 else [device_shape(s, program.devices) for s in shapes]


def _result_shape(program: Program) -> Shape:
    from hlo_run.devices import device_shape

    shape = program.result_shape
    return shape if program.devices == 1 else device_shape(shape, program.devices)


def make_arguments(program: Program, options: RunOptions) -> list[Any]:
    """The arguments from --inputs, a snapshot's, or random ones from --seed (on several devices:
    each device's own, stacked along a leading device axis)."""
    if options.snapshot is not None and not options.inputs:
        args = options.snapshot.arguments
        if len(args) != len(program.parameter_shapes):
            raise InputError(f"{program.name}: the snapshot holds {len(args)} arguments for "
                             f"{len(program.parameter_shapes)} entry parameters")
        return list(args)
    if options.inputs:
        from hlo_run.npz_io import load_inputs

        return load_inputs(options.inputs, _device_shapes(program))
    from hlo_run.inputs import make_fake_arguments

    if program.devices == 1:
        return make_fake_arguments(program.module, options.seed, large_float_range=options.large_float_range)
    from hlo_run.devices import stack

    per_device = [make_fake_arguments(program.module, options.seed, large_float_range=options.large_float_range,
                                      device=d) for d in range(program.devices)]
    return [stack([args[k] for args in per_device]) for k in range(len(per_device[0]))]


def _run_on(platform: str, program: Program, args: list[Any], iterations: int,
            max_while_iterations: int | None = None, collective_timeout: float = 60.0) -> Any:
    backend = get_backend(platform)
    click.echo(f"Running HLO module {program.name} with runner {platform}...", err=True)
    start = time.perf_counter()
    executable = backend.load(program)
    executable.max_while_iterations = max_while_iterations
    executable.collective_timeout = collective_timeout
    executable.source_module = program.module
    times = []
    result = None
    for _ in range(iterations):
        t0 = time.perf_counter()
        result = executable.run(args)
        times.append(time.perf_counter() - t0)
    click.echo(f"... compiled and ran in {time.perf_counter() - start:.4f}s.", err=True)
    if iterations > 1:
        _report_times(platform, times, executable.profile())
    return result


def _report_times(platform: str, times: list[float], profile: list[tuple[str, float]]) -> None:
    click.echo(f"{platform}: {len(times)} runs: min {min(times):.6f}s, "
               f"median {statistics.median(times):.6f}s, "
               f"mean {statistics.fmean(times):.6f}s, total {sum(times):.6f}s", err=True)
    if profile:
        width = max(len(name) for name, _ in profile)
        click.echo("last run, per step:", err=True)
        for name, seconds in profile:
            click.echo(f"  {name:<{width}}  {seconds * 1e3:10.3f} ms", err=True)


def _check_against_reference(program: Program, options: RunOptions, args: list[Any], result: Any) -> None:
    reference = get_backend(options.reference)
    click.echo(f"Running HLO module {program.name} with reference runner {options.reference}...", err=True)
    start = time.perf_counter()
    executable = reference.load(program)
    executable.max_while_iterations = options.max_while_iterations
    executable.source_module = program.module
    expected = executable.run(args)
    click.echo(f"... compiled and ran in {time.perf_counter() - start:.4f}s.", err=True)
    if options.print_literals:
        echo_literal(f"** Result with reference runner {options.reference} **", expected,
                     _result_shape(program))
    comparison = compare_values(result, expected, options.abs_error_bound, options.rel_error_bound)
    click.echo(f"bounds ({_bounds_origin(options)}): " + "; ".join(comparison.bounds_lines()), err=True)
    if not comparison.ok:
        raise ComparisonFailed(
            f"{program.name}: results on {options.platform} and {options.reference} differ: "
            f"{comparison.one_line()}", comparison.summary_lines())
    click.echo(f"** Results on {options.platform} and {options.reference} are close enough. **", err=True)


def _check_against_snapshot(program: Program, options: RunOptions, result: Any) -> None:
    """The result against the one the snapshot recorded (run_hlo_module's check of a snapshot)."""
    comparison = compare_values(result, options.snapshot.result, options.abs_error_bound,
                                options.rel_error_bound)
    if not comparison.ok:
        raise ComparisonFailed(f"{program.name}: the result on {options.platform} differs from the "
                               f"snapshot's recorded result: {comparison.one_line()}",
                               comparison.summary_lines())
    click.echo(f"** Result on {options.platform} and the snapshot's recorded result are close enough. **",
               err=True)


def _bounds_origin(options: RunOptions) -> str:
    given = [f"{k} given" for k, v in (("abs", options.abs_error_bound), ("rel", options.rel_error_bound))
             if v is not None]
    return ", ".join(given) + (", others by type" if len(given) == 1 else "") if given else "by output type"


def echo_literal(heading: str, value: Any, shape: Shape) -> None:
    """Print a heading and `<shape> <literal>`, streamed by top-level slices so that big arrays
    need no giant string and `| head` can stop early (the text is exactly `literal_text`'s)."""
    click.echo(heading)
    arr = value if isinstance(value, np.ndarray) else None
    if arr is None or arr.ndim < 2 or 0 in arr.shape or shape.is_tuple:
        click.echo(literal_text(value, shape))
        return
    click.echo(f"{shape.to_string(print_layout=False)} {{ ", nl=False)
    for k in range(arr.shape[0]):
        click.echo((", " if k else "") + format_literal(arr[k], shape.element_type), nl=False)
    click.echo(" }")


def literal_text(value: Any, shape: Shape) -> str:
    """`<shape> <literal>` as XLA prints a literal, e.g. `f32[2] {1, 2}`; tuples nest."""
    return f"{shape.to_string(print_layout=False)} {_value_text(value, shape)}"


def _value_text(value: Any, shape: Shape) -> str:
    if shape.is_tuple:
        return "(" + ", ".join(_value_text(v, s) for v, s in zip(value, shape.tuple_shapes)) + ")"
    if not shape.is_array or value is TOKEN:
        return "token"
    return format_literal(value, shape.element_type)


if __name__ == "__main__":
    main()
