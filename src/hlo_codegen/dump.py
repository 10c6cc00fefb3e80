"""`hlo-codegen --dump-to DIR`: the compiled module's readable artifacts, named as XLA names them.

Where it sits: after `compiler.compile_module`; every file is written whole or not at all.

    module_0000.<name>.sm_9.0a_gpu_after_optimizations.txt                    the module as compiled
    module_0000.<name>.sm_9.0a_gpu_after_optimizations-buffer-assignment.txt  BufferAssignment::ToString
    module_0000.<name>.thunk_sequence.txt                                     the thunk tree
    module_0000.<name>.<kernel>.<suffix>      per kernel: its kernel IR text, `.ll`, `.ptx` (cuda)
    module_0000.<name>.0000.codegen-prepare.after_<pass>.before_<next>.txt
                                              the module after each prepare pass that changed it
                                              (`PrepareDumps`; hlo-opt's names for pass dumps)

On the host target the prefix is `cpu_after_optimizations` (XLA:CPU's spelling). The GPU
prefix is `sm_<major>.<minor>` of `--arch` plus `a` for the Hopper/Blackwell feature sets XLA
dumps with (`sm_90` -> `sm_9.0a`).
"""

from __future__ import annotations

import re
from pathlib import Path

from hlo_common.cli_util import write_file_atomically
from hlo_common.errors import InputError
from hlo_common.hlo.printer import print_module

from hlo_codegen.compiler import CompileOptions, CompileResult
from hlo_codegen.thunks import thunk_sequence_to_string

MODULE_ID = 0
_UNSAFE = re.compile(r"[/\\\[\] ]")
_ARCH = re.compile(r"sm_(\d+?)(\d)([a-z]?)$")


def after_optimizations_prefix(options: CompileOptions) -> str:
    """`sm_9.0a_gpu_after_optimizations` for `--arch sm_90`; `cpu_after_optimizations` on host."""
    if options.target == "host":
        return "cpu_after_optimizations"
    m = _ARCH.match(options.arch)
    if m is None:
        return f"{options.arch}_gpu_after_optimizations"
    major, minor, suffix = int(m.group(1)), m.group(2), m.group(3)
    if not suffix and major >= 9:
        suffix = "a"
    return f"sm_{major}.{minor}{suffix}_gpu_after_optimizations"


def file_prefix(module_name: str) -> str:
    name = _UNSAFE.sub("_", module_name)
    prefix = f"module_{MODULE_ID:04d}.{name}"
    return prefix if len(prefix) < 200 else f"module_{MODULE_ID:04d}"


def prepare_dump_directory(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot write dumps to '{directory}': {exc.strerror or exc}") from None
    if not directory.is_dir():
        raise InputError(f"cannot write dumps to '{directory}': not a directory")


class PrepareDumps:
    """The module at the start of the prepare pipeline and after each pass that changed it, named
    as `hlo-opt --dump-to DIR --dump-hlo-pass-re '.*'` names its pass dumps; kept in memory until
    `write_dumps` (a `RunOptions.dumper`)."""

    def __init__(self, module_name: str):
        self.prefix = file_prefix(module_name)
        self.step = 0
        self.files: dict[str, str] = {}

    def between_passes(self, module, pipeline: str, after: str, before: str, changed: bool | None) -> None:
        if changed is False:
            return
        name = f"{self.prefix}.{self.step:04d}.{pipeline}.after_{after}.before_{before}.txt"
        self.files[_UNSAFE.sub("_", name)] = print_module(module)
        self.step += 1


def dump_files(result: CompileResult, options: CompileOptions,
               prepare: PrepareDumps | None = None) -> dict[str, str]:
    """File name -> text of every dump of one compilation."""
    prefix = file_prefix(result.module.name)
    stage = after_optimizations_prefix(options)
    files = {
        f"{prefix}.{stage}.txt": print_module(result.module),
        f"{prefix}.{stage}-buffer-assignment.txt": result.assignment.to_string(),
        f"{prefix}.thunk_sequence.txt": thunk_sequence_to_string(result.manifest.thunks),
    }
    for name in sorted(result.kernels):
        for suffix, text in sorted(result.kernels[name].artifacts.items()):
            files[f"{prefix}.{name}.{suffix}"] = text
    if prepare is not None:
        files.update(prepare.files)
    return files


def write_dumps(directory: Path, result: CompileResult, options: CompileOptions,
                prepare: PrepareDumps | None = None) -> list[Path]:
    prepare_dump_directory(directory)
    written = []
    for name, text in dump_files(result, options, prepare).items():
        path = directory / name
        write_file_atomically(path, text)
        written.append(path)
    return written


# -- hlo-codegen --stage: one stage to stdout ------------------------------------------------------------
KERNEL_STAGES = {"kernel-ir": ("kernel_ir.txt", "//"), "llvm": ("ll", ";"), "ptx": ("ptx", "//")}


def stage_text(result: CompileResult, stage: str, fusion: str | None = None) -> str:
    """One stage of a compilation as text (XLA's `hlo-opt --stage=`, for golden-file tests): the
    module as compiled, its buffer assignment, the thunk sequence, or the kernels' kernel IR, LLVM
    IR or PTX. Kernels come in thunk order, each under a comment naming it and its instruction;
    `fusion` keeps only the kernels of that instruction (or that kernel name), printed bare when
    it is one kernel, so the text can go straight to FileCheck, llc or ptxas."""
    if stage == "hlo":
        return print_module(result.module)
    if stage == "buffer-assignment":
        return result.assignment.to_string()
    if stage == "thunks":
        return thunk_sequence_to_string(result.manifest.thunks)
    suffix, comment = KERNEL_STAGES[stage]
    kernels = _kernels_in_thunk_order(result)
    if fusion is not None:
        kernels = [(k, instr) for k, instr in kernels if fusion in (k, instr)]
        if not kernels:
            known = sorted({instr for _, instr in _kernels_in_thunk_order(result)})
            raise InputError(f"no kernel of '{fusion}' (kernels come from: {', '.join(known) or 'nothing'})")
    texts = [(k, instr, result.kernels[k].artifacts.get(suffix)) for k, instr in kernels]
    missing = [k for k, _, text in texts if text is None]
    if missing:
        raise InputError(f"--stage {stage}: the {result.manifest.target} target makes none "
                         f"(kernel {missing[0]})")
    if len(texts) == 1 and fusion is not None:
        return texts[0][2]
    return "\n".join(f"{comment} kernel {k} (%{instr})\n{text}" for k, instr, text in texts)


def _kernels_in_thunk_order(result: CompileResult) -> list[tuple[str, str]]:
    """(kernel name, instruction name) of each kernel once, in the order thunks launch them."""
    from hlo_common.manifest.thunks import KernelThunk, walk

    seen, out = set(), []
    for thunk in walk(result.manifest.thunks):
        if isinstance(thunk, KernelThunk) and thunk.kernel not in seen and thunk.kernel in result.kernels:
            seen.add(thunk.kernel)
            out.append((thunk.kernel, thunk.profile_annotation))
    return out
