"""`hlo-codegen [OPTIONS] [INPUT]`: HLO text in, a manifest out (design/cli.md).

The middle tool of `hlo-opt | hlo-codegen | hlo-run`. It reads HLO text from a file or stdin
(normally hlo-opt's output; an unfused, unscheduled module compiles too), compiles it for
`--target cuda|host` (`hlo_codegen.compiler`) and writes the manifest to stdout or `-o` (whole
or not at all). `--dump-to DIR` writes the module as compiled, the buffer assignment,
`thunk_sequence.txt`, per kernel its kernel IR, `.ll` and `.ptx`, and the module after each
pass of its prepare pipeline that changed it (`hlo_codegen.dump`). Kernels compiled before come
from the kernel cache (`hlo_codegen.kernel_cache`): `--cache-dir DIR` (default
`$HLO_TOOLCHAIN_CACHE_DIR`, else `$XDG_CACHE_HOME/hlo-toolchain` or `~/.cache/hlo-toolchain`),
`--no-cache` to compile every kernel. `--stage hlo|buffer-assignment|thunks|kernel-ir|llvm|ptx`
prints that stage instead of the manifest (`--fusion NAME`: one instruction's kernels), as XLA's
`hlo-opt --stage=` does for golden-file tests. GEMM fusions take their tile configs from the
module (hlo-opt's defaults), from XLA's autotune results (`--xla_gpu_load_autotune_results_from`,
`hlo_codegen.triton_gemm.autotune`) or, on a machine with a GPU, from timing candidates on it
(`--autotune FILE`, Triton configs and cuBLAS, `hlo_codegen.triton_gemm.autotuner`; it also writes
them for later compiles without a GPU).

    hlo-opt model.hlo | hlo-codegen --target host -o model.manifest.json

A user error (bad HLO, an instruction nothing can run, a kernel that fails to lower or link) is
one line `hlo-codegen: error: ...` and exit status 1; a usage error exits 2; `--debug` shows
the traceback.
"""

from __future__ import annotations

from pathlib import Path

import click

from hlo_common.cli_util import click_main, pass_notes, run_command, write_output
from hlo_common.source import INPUT_FORMATS, place_in_input, read_input

TOOL = "hlo-codegen"
STAGES = ("hlo", "buffer-assignment", "thunks", "kernel-ir", "llvm", "ptx")  # hlo_codegen.dump.stage_text


def _check_arch(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A usage error (exit 2) for an architecture the lowering cannot compile for: LLVM aborted
    the process on some (`Cannot select: intrinsic llvm.nvvm.shfl.sync.down.i32`, exit 134)."""
    from hlo_codegen.ptx import arch_problem

    problem = arch_problem(value)
    if problem is not None:
        raise click.BadParameter(problem, ctx, param)
    return value


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("input_path", metavar="[INPUT]", required=False)
@click.option("-o", "--output", "output_path", metavar="PATH", help="The manifest (default: stdout).")
@click.option("--target", type=click.Choice(["cuda", "host"]), default="cuda", show_default=True,
              help="cuda: PTX kernels and cuBLAS gemms; host: LLVM IR kernels run on the CPU.")
@click.option("--arch", default="sm_90", show_default=True, callback=_check_arch,
              help="GPU architecture for PTX and cubin, and the device launches are sized for "
                   "(sm_90: H100, sm_80: A100).")
@click.option("--dump-to", "dump_to", metavar="DIR",
              help="Write the buffer assignment, thunk_sequence.txt and per-kernel IR, .ll, .ptx here.")
@click.option("--stage", type=click.Choice(STAGES),
              help="Print this stage (to stdout or -o) instead of the manifest, as XLA's hlo-opt --stage.")
@click.option("--fusion", "fusion", metavar="NAME",
              help="With --stage kernel-ir|llvm|ptx: only the kernels of this instruction (or kernel).")
@click.option("--dump-module-id", "dump_module_id", type=click.IntRange(0, 9999), default=0,
              show_default=True, metavar="N", help="The number in the dump files' names (module_NNNN.*).")
@click.option("--cache-dir", "cache_dir", metavar="DIR",
              help="The kernel cache (default: $HLO_TOOLCHAIN_CACHE_DIR, else ~/.cache/hlo-toolchain).")
@click.option("--no-cache", "no_cache", is_flag=True, help="Compile every kernel; leave the cache alone.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), metavar="N",
              help="Threads compiling PTX (default: one per CPU, at most 8).")
@click.option("--input-format", "--input_format", "input_format", type=click.Choice(INPUT_FORMATS),
              help="hlo text, HloModuleProto (pb, pbtxt) or HloSnapshot; default: from the name and bytes")
@click.option("--num-replicas", "--num_replicas", "num_replicas", type=click.IntRange(min=1), metavar="N",
              help="Compile for N replicas (default: the module's replica_count).")
@click.option("--num-partitions", "--num_partitions", "num_partitions", type=click.IntRange(min=1),
              metavar="N", help="Compile for N partitions (default: the module's num_partitions).")
@click.option("--keep-collectives", "keep_collectives", is_flag=True,
              help="On one device, compile collectives to collective thunks (run through MPI on the host, "
                   "NCCL on cuda, as on several devices) instead of copies.")
@click.option("--xla_gpu_load_autotune_results_from", "--xla-gpu-load-autotune-results-from", "autotune_from",
              metavar="FILE", help="Tile configs of the GEMM fusions from XLA's AutotuneResults text proto.")
@click.option("--autotune", "autotune_to", metavar="FILE",
              help="Time candidate tile configs and cuBLAS for every GEMM fusion on the GPU (cuda target; needs "
                   "a GPU), use the fastest, and write them to FILE as XLA's AutotuneResults text proto.")
@click.option("--verbose", is_flag=True,
              help="Say more: the passes' notes on stderr (a call cuDNN cannot take becomes our kernel).")
@click.option("--debug", is_flag=True, help="Show Python tracebacks.")
def cli(input_path, output_path, target, arch, dump_to, stage, fusion, dump_module_id, cache_dir,
        no_cache, jobs, debug, input_format=None, num_replicas=None, num_partitions=None,
        verbose=False, autotune_from=None, autotune_to=None, keep_collectives=False) -> None:
    """Compile an HLO module (file or stdin) into a manifest for hlo-run."""
    if fusion is not None and stage not in ("kernel-ir", "llvm", "ptx"):
        raise click.UsageError("--fusion selects kernels: use it with --stage kernel-ir, llvm or ptx")
    if stage == "ptx" and target == "host":
        raise click.UsageError("--stage ptx: the host target makes LLVM IR, no PTX (use --stage llvm)")
    if (autotune_from or autotune_to) and target != "cuda":
        raise click.UsageError("tile configs and --autotune are for the cuda target's GEMM fusions")
    def body() -> None:
        with pass_notes(TOOL, verbose):
            _compile(input_path, output_path, target, arch, dump_to, _cache_dir(cache_dir, no_cache), jobs,
                     stage, fusion, dump_module_id, input_format, (num_replicas, num_partitions),
                     (autotune_from, autotune_to), keep_collectives)

    run_command(TOOL, body, debug)


def _cache_dir(given: str | None, disabled: bool) -> str | None:
    if disabled:
        return None
    if given is not None:
        return given
    from hlo_codegen.kernel_cache import default_cache_dir

    return str(default_cache_dir())


def _compile(input_path: str | None, output_path: str | None, target: str, arch: str,
             dump_to: str | None, cache_dir: str | None = None, jobs: int | None = None,
             stage: str | None = None, fusion: str | None = None, dump_module_id: int = 0,
             input_format: str | None = None, devices: tuple = (None, None),
             autotune: tuple = (None, None), keep_collectives: bool = False) -> None:
    # The compiler is imported before the input is read: behind `hlo-opt |`, that import
    # happens while hlo-opt is still optimizing instead of after it.
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo_pass.pipeline import verify

    from hlo_codegen.compiler import CompileOptions, compile_module, preload

    options = CompileOptions(target=target, arch=arch, cache_dir=cache_dir, jobs=jobs,
                             num_replicas=devices[0], num_partitions=devices[1],
                             keep_collectives=keep_collectives)
    preload(options)
    if dump_to is not None:
        from hlo_codegen.dump import prepare_dump_directory

        prepare_dump_directory(Path(dump_to))
    source = read_input(input_path, input_format)
    module = place_in_input(parse_module(source.text, source.name), source)
    for key, count in (("replica_count", devices[0]), ("num_partitions", devices[1])):
        if count is not None:  # the verifier checks replica groups against these counts
            module.set_header_attr(key, str(count))
    verify(module, "verification failed in the input")  # else a bad input reads as a bug of the passes
    _tile_configs(module, arch, *autotune)
    prepare = None
    if dump_to is not None:
        from hlo_codegen.dump import PrepareDumps

        prepare = PrepareDumps(module.name, dump_module_id)
    result = compile_module(module, options, dumper=prepare)
    if dump_to is not None:
        from hlo_codegen.dump import write_dumps

        write_dumps(Path(dump_to), result, options, prepare)
    if stage is not None:
        from hlo_codegen.dump import stage_text

        write_output(output_path, stage_text(result, stage, fusion).encode())
        return
    write_output(output_path, result.manifest.to_bytes())


def _tile_configs(module, arch: str, load_from: str | None, autotune_to: str | None) -> None:
    """The GEMM fusions' tile configs from an autotune results file, or timed on the GPU."""
    if load_from is not None:
        from hlo_codegen.triton_gemm.autotune import apply_autotune_results

        apply_autotune_results(module, load_from, arch)
    if autotune_to is not None:
        from hlo_codegen.triton_gemm.autotuner import autotune_module

        autotune_module(module, arch, autotune_to)  # timed on the GPU: autotune_gpu.GpuTimer


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (`hlo-codegen`): usage errors are one line, exit status 2."""
    click_main(cli, TOOL, argv)


if __name__ == "__main__":
    main()
