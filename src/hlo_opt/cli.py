"""`hlo-opt [OPTIONS] [INPUT]`: HLO in, optimized HLO out (design/cli.md); text by default, an
HloModuleProto with `--emit-proto`, `--output-format` or `-o m.pb|m.pbtxt`.

The first tool of the chain: it parses the input (a file or stdin; `--split-input-file` splits on
`// -----`), runs `--pipeline gpu` (the XLA:GPU pipelines of `hlo_opt.pipelines`) or exactly the
`--passes` given, writes dumps with XLA's names (`hlo_opt.dump`), and prints the result to stdout
or `-o` (written whole or not at all). A user error is one line `hlo-opt: error: ...` and exit
status 1 (2 for a usage error); `--debug` shows the traceback.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hlo_common.cli_util import click_main, pass_notes, run_command, write_output
from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.parser import parse_modules
from hlo_common.hlo.printer import print_module
from hlo_common.source import INPUT_FORMATS, Input, place_in_input, read_input, read_source
from hlo_common.gpu.device import load_device
from hlo_common.hlo_pass.pass_base import PASS_REGISTRY
from hlo_common.hlo_pass.pipeline import PassRunRecord, PipelineSequence, RunOptions, verify

if TYPE_CHECKING:
    from hlo_opt.dump import DumpOptions

TOOL = "hlo-opt"
MODULE_SEPARATOR = "\n// -----\n\n"


class OptionError(HloError):
    """A flag value that names nothing known (a pass, a pipeline): a user error, exit status 1."""


@dataclass
class OptOptions:
    input: str
    output: str | None
    pipeline: str
    passes: str | None
    list_passes: bool
    disable_pass: tuple[str, ...]
    dump_to: str | None
    dump_module_id: int
    dump_pass_re: str | None
    dump_format: tuple[str, ...]
    device: str
    time_passes: bool
    verify_each: bool
    split_input_file: bool
    debug: bool
    input_format: str | None = None
    output_format: str | None = None
    emit_proto: bool = False
    triton_gemm: bool = True
    verbose: bool = False
    num_partitions: int | None = None
    num_replicas: int | None = None


# -- passes and pipelines ------------------------------------------------------------------------
def list_passes_text() -> str:
    """`--list-passes`: every registered pass and every planned one, sorted by name."""
    from hlo_opt.passes import load_all_passes
    from hlo_opt.pipelines import PLANNED_PASSES

    load_all_passes()
    rows = {name: cls.description() for name, cls in PASS_REGISTRY.items()}
    rows.update({name: f"(planned) {desc}" for name, desc in PLANNED_PASSES.items() if name not in rows})
    width = max(len(n) for n in rows)
    return "".join(f"{name:<{width}}  {rows[name]}\n" for name in sorted(rows))


def _unknown_name_error(kind: str, name: str, candidates: list[str]) -> OptionError:
    import difflib

    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else \
        " (see --list-passes)"
    return OptionError(f"unknown {kind} '{name}'{hint}")


def resolve_pass_names(text: str) -> list[str]:
    from hlo_opt.pipelines import PLANNED_PASSES

    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise OptionError("--passes needs at least one pass name")
    for name in names:
        if name in PASS_REGISTRY:
            continue
        if name in PLANNED_PASSES:
            raise OptionError(f"pass '{name}' is planned but not implemented yet (see --list-passes)")
        raise _unknown_name_error("pass", name, sorted(PASS_REGISTRY))
    return names


def check_disabled_names(names: tuple[str, ...]) -> frozenset[str]:
    from hlo_opt.pipelines import GPU_PIPELINES, PLANNED_PASSES, PipelineSpec

    known = set(PASS_REGISTRY) | set(PLANNED_PASSES)
    stack = list(GPU_PIPELINES)
    while stack:
        spec = stack.pop()
        known.add(spec.name)
        stack.extend(i for i in spec.items if isinstance(i, PipelineSpec))
    for name in names:
        if name not in known:
            raise _unknown_name_error("pass or pipeline", name, sorted(known))
    return frozenset(names)


def build_sequence(opts: OptOptions) -> PipelineSequence:
    from hlo_opt.pipelines import build_gpu_pipeline, build_pass_list

    if opts.passes is not None:
        return build_pass_list(resolve_pass_names(opts.passes))
    if opts.pipeline == "none":
        return PipelineSequence("none")
    return build_gpu_pipeline()


# -- the run -------------------------------------------------------------------------------------
def optimize_module(module: HloModule, index: int, sequence: PipelineSequence, opts: OptOptions,
                    dump: DumpOptions | None, run_options: RunOptions) -> HloModule:
    """Dump, verify, run the passes on and verify one module of the input."""
    _set_device_counts(module, opts)
    dumper = None
    if dump is not None:  # the dump module (and what it imports) only when dumping
        from hlo_opt.dump import ModuleDumper

        dumper = ModuleDumper(dump, opts.dump_module_id + index, module.name)
    if dumper is not None:
        dumper.dump(module, "before_optimizations")
    skip = module.is_scheduled and opts.passes is None
    if skip or not opts.verify_each or not sequence.pipelines:  # else the first pipeline verifies
        where = "in the input"
        if sequence.pipelines:
            first = sequence.pipelines[0]
            where = f"before pass '{first.pass_names()[0]}' (pipeline '{first.name}')"
        verify(module, f"verification failed {where}")
    if skip and sequence.pipelines:
        print(f"{TOOL}: note: module '{module.name}' is already scheduled; HLO passes skipped",
              file=sys.stderr)
    if not skip:
        sequence.run_with(module, replace(run_options, dumper=dumper))
        hint = "" if opts.verify_each else " (rerun with --verify-each to find the pass)"
        verify(module, f"verification failed after pipeline '{sequence.name}'{hint}")
    if dumper is not None:
        dumper.dump(module, "after_optimizations")
    return module


def _set_device_counts(module: HloModule, opts: OptOptions) -> None:
    """--num-partitions / --num-replicas into the header, where XLA's HloModuleConfig keeps them
    (jax passes them in compile options, so its HLO text lacks them; docs/spmd.md)."""
    if opts.num_partitions is not None:
        module.set_header_attr("num_partitions", str(opts.num_partitions))
    if opts.num_replicas is not None:
        module.set_header_attr("replica_count", str(opts.num_replicas))


def run(opts: OptOptions) -> None:
    with pass_notes(TOOL, opts.verbose):
        return _run(opts)


def _run(opts: OptOptions) -> None:
    from hlo_opt.passes import load_all_passes

    load_all_passes()
    if opts.list_passes:
        write_output(None, list_passes_text())
        return
    device = load_device(opts.device)  # validated now; the fusion passes' cost model uses it
    sequence = build_sequence(opts)
    records: list[PassRunRecord] | None = [] if opts.time_passes else None
    disabled = check_disabled_names(opts.disable_pass)
    run_options = RunOptions(verify_each=opts.verify_each, disabled_passes=disabled, records=records,
                             device=device, triton_gemm=opts.triton_gemm)
    dump = None
    if opts.dump_to is not None:
        from hlo_opt.dump import DumpOptions, prepare_dump_directory

        dump = DumpOptions(Path(opts.dump_to), opts.dump_pass_re, opts.dump_format or ("text",))
        prepare_dump_directory(dump.directory)
    source = read_input(opts.input, opts.input_format) if opts.input_format != "hlo" else \
        Input(*read_source(opts.input), "hlo")
    out_format = output_format(opts)
    modules = [place_in_input(m, source) for m in parse_modules(source.text, source.name,
                                                                 split=opts.split_input_file)]
    if out_format != "hlo" and len(modules) != 1:
        raise OptionError(f"--output-format={out_format} writes one module; the input holds {len(modules)}")
    outputs = [optimize_module(m, i, sequence, opts, dump, run_options) for i, m in enumerate(modules)]
    if records is not None:
        from hlo_opt.timing import print_timing_table

        print_timing_table(records)
    if out_format == "hlo":
        write_output(opts.output, MODULE_SEPARATOR.join(print_module(m) for m in outputs))
        return
    from hlo_common.proto.hlo_to_proto import serialize

    write_output(opts.output, serialize(outputs[0], out_format))


_PROTO_SUFFIXES = {".pb": "pb", ".pbtxt": "pbtxt", ".textproto": "pbtxt"}


def output_format(opts: OptOptions) -> str:
    """hlo, pb or pbtxt: --output-format, else --emit-proto (binary), else the -o file's extension."""
    by_name = None
    if opts.output not in (None, "-"):
        by_name = _PROTO_SUFFIXES.get(Path(opts.output).suffix.lower())
    chosen = opts.output_format or ("pb" if opts.emit_proto else None)
    if opts.emit_proto and opts.output_format not in (None, "pb", "pbtxt"):
        raise OptionError(f"--emit-proto writes an HloModuleProto, not --output-format={opts.output_format}")
    if opts.emit_proto and by_name is not None:
        chosen = by_name  # `--emit-proto -o m.pbtxt`: the text form
    return chosen or by_name or "hlo"


@click.command(name=TOOL, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("input", required=False, default="-", metavar="[INPUT]")
@click.option("-o", "--output", metavar="PATH",
              help="the optimized module (default: stdout); `.pb` / `.pbtxt` write an HloModuleProto")
@click.option("--output-format", "--output_format", "output_format",
              type=click.Choice(["hlo", "pb", "pbtxt"]),
              help="HLO text or HloModuleProto (binary, text); default: from -o's extension, else hlo")
@click.option("--emit-proto", is_flag=True,
              help="write a binary HloModuleProto (pbtxt when -o ends in .pbtxt)")
@click.option("--pipeline", type=click.Choice(["gpu", "none"]), default="gpu", show_default=True,
              help="the full XLA:GPU-style pipeline or nothing")
@click.option("--passes", metavar="A,B,...", help="run exactly these passes, in this order (XLA: --passes)")
@click.option("--list-passes", is_flag=True, help="every registered pass with a one-line description")
@click.option("--disable-pass", multiple=True, metavar="NAME",
              help="repeatable (XLA: --xla_disable_hlo_passes)")
@click.option("--dump-to", metavar="DIR", help="(XLA: --xla_dump_to)")
@click.option("--dump-module-id", type=click.IntRange(0, 9999), default=0, show_default=True, metavar="N",
              help="the number in the first module's dump names (module_NNNN.*); the next count up")
@click.option("--dump-pass-re", metavar="REGEX", help="dump between passes (XLA: --xla_dump_hlo_pass_re)")
@click.option("--dump-format", multiple=True, type=click.Choice(["text", "dot", "html"]),
              help="repeatable; default text (XLA: --xla_dump_hlo_as_*)")
@click.option("--device", default="h100", show_default=True, metavar="NAME|FILE",
              help="h100, h200, a100, or a JSON device description")
@click.option("--xla-gpu-enable-triton-gemm", "--xla_gpu_enable_triton_gemm", "triton_gemm", type=click.BOOL,
              default=True, show_default=True, metavar="BOOL",
              help="dots Triton takes become GEMM fusions; false keeps them on cuBLAS (XLA's flag)")
@click.option("--time-passes", is_flag=True, help="per-pass wall time and change flags on stderr")
@click.option("--verify-each", is_flag=True, help="run the verifier after every pass")
@click.option("--split-input-file", is_flag=True, help="treat `// -----` as a separator between modules")
@click.option("--input-format", "--input_format", "input_format", type=click.Choice(INPUT_FORMATS),
              help="hlo text, HloModuleProto (pb, pbtxt) or HloSnapshot; default: from the name and bytes")
@click.option("--verbose", is_flag=True,
              help="the passes' notes on stderr (e.g. a convolution cuDNN cannot take stays ours)")
@click.option("--num-partitions", "--num_partitions", "num_partitions", type=click.IntRange(min=1),
              metavar="N", help="partitions to compile for (default: the module's num_partitions); "
              "N > 1 runs sharding propagation and the SPMD partitioner")
@click.option("--num-replicas", "--num_replicas", "num_replicas", type=click.IntRange(min=1), metavar="N",
              help="replicas (default: the module's replica_count)")
@click.option("--debug", is_flag=True, help="show Python tracebacks")
def hlo_opt_command(**kwargs) -> None:
    """Optimize HLO text with XLA:GPU-style passes."""
    opts = OptOptions(**kwargs)
    run_command(TOOL, lambda: run(opts), opts.debug)  # every failure is one line unless --debug


def main(argv: list[str] | None = None) -> None:
    """Console entry point: click's usage errors become one line and exit status 2."""
    click_main(hlo_opt_command, TOOL, argv)


if __name__ == "__main__":
    main()
