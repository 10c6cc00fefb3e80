"""Compiling HLO text for `hlo-run --platform host|cuda MODULE.hlo`: hlo-opt, then hlo-codegen.

Where it sits: the host and cuda backends and `--find-first-mismatch` ask `manifest_for` for the
program's manifest, which calls `compile_to_manifest` when the program is HLO text rather than a
manifest. Like XLA's run_hlo_module, which runs the test platform's HLO passes
before it compiles, the text first goes through `hlo-opt` (its `gpu` pipeline) unless the module
is already scheduled or the user said `--no-hlo-passes` (XLA: `--run_test_hlo_passes=false`);
then `hlo-codegen --target host|cuda` turns it into a manifest. hlo-run never imports hlo_opt or
hlo_codegen: each tool runs in a subprocess, fed the HLO text on stdin, its result read from
stdout, exactly as the shell pipe `hlo-opt | hlo-codegen | hlo-run` does. So the tools keep one
interface (HLO text, then the manifest file), hlo-run's start-up stays free of the compilers'
imports, and a failure arrives as the tool's own one-line message. With `--dump-to DIR` both
tools write their dumps there, under the names they always use (`module_0000.<name>.
before_optimizations.txt`, `...after_optimizations.txt`, the buffer assignment,
`thunk_sequence.txt`, per kernel its kernel IR, `.ll` and `.ptx`).

hlo-codegen keeps its kernel cache as it does on the command line (`$HLO_TOOLCHAIN_CACHE_DIR`,
else `~/.cache/hlo-toolchain`; the environment passes to it), so running a module again compiles
only the kernels that changed.

A tool is found next to the running Python (the same virtual environment) or on PATH; failing
both, `python -m hlo_opt.cli` / `python -m hlo_codegen.cli` is used.

    >>> manifest = compile_to_manifest(text, "model.hlo", "host")    # doctest: +SKIP
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from hlo_common.errors import HloError
from hlo_common.manifest.manifest import Manifest, load_manifest
from hlo_run.backends import BackendUnavailable, Program

OPT_TOOL = "hlo-opt"
CODEGEN_TOOL = "hlo-codegen"
_MODULES = {OPT_TOOL: "hlo_opt.cli", CODEGEN_TOOL: "hlo_codegen.cli"}
TIMEOUT_S = 3600
STOP_GRACE_S = 5


class CompileError(HloError):
    """hlo-opt or hlo-codegen refused the module; the message is the tool's error line."""


def tool_command(tool: str) -> list[str]:
    """How to start `tool`: the script beside this Python, on PATH, or `python -m`."""
    beside = Path(sys.executable).with_name(tool)
    if beside.is_file():
        return [str(beside)]
    found = shutil.which(tool)
    if found:
        return [found]
    return [sys.executable, "-m", _MODULES[tool]]


def codegen_command() -> list[str]:
    return tool_command(CODEGEN_TOOL)


def run_tool(tool: str, args: list[str], data: bytes, name: str, notes: bool = False) -> bytes:
    """Run `tool args -` on `data`; its stdout, or CompileError with its error line. With
    `notes`, the tool runs with --verbose and its note lines go on to hlo-run's stderr. Whatever
    stops hlo-run meanwhile (^C, SIGTERM) stops the tool with SIGTERM first, so that it removes
    its own temporary files (a dump being written) before it ends."""
    cmd = tool_command(tool) + args + (["--verbose"] if notes else []) + ["-"]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise CompileError(f"{name}: cannot start {tool}: {exc.strerror or exc}") from None
    try:
        out, err = proc.communicate(data, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise CompileError(f"{name}: {tool} did not finish in {TIMEOUT_S} s") from None
    except BaseException:
        _stop(proc)
        raise
    if proc.returncode != 0:
        raise CompileError(f"{name}: {_tool_message(tool, err)}")
    for line in err.decode("utf-8", "replace").splitlines() if notes else ():
        if line.startswith(f"{tool}: note: "):
            print(line, file=sys.stderr)
    return out


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM, a few seconds to clean up, then SIGKILL."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _dump_args(dump_to: str | None, module_id: int) -> list[str]:
    return ["--dump-to", str(dump_to), "--dump-module-id", str(module_id)] if dump_to else []


def optimize_text(hlo_text: str, name: str, dump_to: str | None = None, module_id: int = 0,
                  notes: bool = False) -> str:
    """hlo-opt's `gpu` pipeline on `hlo_text` (dumps to `dump_to` as module `module_id`); the
    optimized HLO text."""
    args = _dump_args(dump_to, module_id)
    return run_tool(OPT_TOOL, args, hlo_text.encode("utf-8"), name, notes).decode("utf-8")


def compile_to_manifest(hlo_text: str, name: str, target: str, arch: str = "sm_90", *,
                        optimize: bool = False, dump_to: str | None = None, module_id: int = 0,
                        devices: tuple[int, int] | None = None, notes: bool = False,
                        keep_collectives: bool = False) -> Manifest:
    """hlo-opt (when `optimize`), then hlo-codegen on `hlo_text`; the loaded manifest. Both dump
    to `dump_to` under the number `module_id` (module_NNNN.*); with `notes` (hlo-run --verbose)
    their notes are printed on stderr."""
    if optimize:
        hlo_text = optimize_text(hlo_text, name, dump_to, module_id, notes)
    args = ["--target", target, "--arch", arch] + _dump_args(dump_to, module_id)
    if devices is not None:  # (replicas, partitions) when they are not the module header's
        args += ["--num-replicas", str(devices[0]), "--num-partitions", str(devices[1])]
    if keep_collectives:
        args.append("--keep-collectives")
    data = run_tool(CODEGEN_TOOL, args, hlo_text.encode("utf-8"), name, notes)
    return load_manifest(data, f"{name} (compiled by {CODEGEN_TOOL})")


def _tool_message(tool: str, stderr: bytes) -> str:
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    prefix = f"{tool}: error: "
    for line in lines:
        if line.startswith(prefix):
            return f"{tool} failed: {line[len(prefix):]}"
    return f"{tool} failed: {lines[-1] if lines else 'no message'}"


def manifest_for(program: Program, target: str) -> Manifest:
    """The program's manifest for `target`: the one given, or HLO text compiled by hlo-codegen."""
    manifest = program.manifest
    if manifest is None:
        if program.hlo_text is None:
            raise BackendUnavailable(f"{program.name}: nothing to compile (no HLO text)")
        scheduled = program.module is not None and program.module.is_scheduled
        optimize = program.run_hlo_passes and not scheduled
        why = "" if optimize else (" (HLO passes skipped: the module is already scheduled)" if scheduled
                                   else " (HLO passes skipped: --no-hlo-passes)")
        steps = f"hlo-opt | hlo-codegen --target {target}" if optimize else f"hlo-codegen --target {target}"
        print(f"Compiling {program.name}: {steps}{why}", file=sys.stderr)
        devices = (program.replicas, program.partitions) if program.devices > 1 else None
        manifest = compile_to_manifest(program.hlo_text, program.name, target, optimize=optimize,
                                       dump_to=program.dump_to, module_id=program.module_id,
                                       devices=devices, notes=getattr(program, "verbose", False),
                                       keep_collectives=program.keep_collectives)
        program.manifest = manifest
    if manifest.devices != program.devices:
        raise BackendUnavailable(f"{program.name}: the manifest was compiled for {manifest.devices} "
                                 f"device(s), the run asks for {program.devices}")
    if manifest.target != target:
        raise BackendUnavailable(f"{program.name}: the manifest was compiled for {manifest.target}; run it "
                                 f"with --platform {manifest.target} or compile with hlo-codegen "
                                 f"--target {target}")
    return manifest
