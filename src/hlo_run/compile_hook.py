"""Compiling HLO text for `hlo-run --platform host|cuda MODULE.hlo`, through hlo-codegen itself.

Where it sits: the host and cuda backends call `compile_to_manifest` when the program is HLO text
rather than a manifest (XLA's run_hlo_module also compiles before it runs). hlo-run never imports
hlo_codegen: it runs the `hlo-codegen` tool in a subprocess, feeding the HLO text on stdin and
reading the manifest from stdout, exactly as the shell pipe `hlo-codegen | hlo-run` does. So the
two tools keep one interface (the manifest file), hlo-run's start-up stays free of the compiler's
imports, and a compiler failure arrives as hlo-codegen's own one-line message. The tool is found
next to the running Python (the same virtual environment) or on PATH; failing both,
`python -m hlo_codegen.cli` is used.

    >>> manifest = compile_to_manifest(text, "model.hlo", "host")    # doctest: +SKIP
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from hlo_common.errors import HloError
from hlo_common.manifest import Manifest, load_manifest

CODEGEN_TOOL = "hlo-codegen"
TIMEOUT_S = 3600


class CompileError(HloError):
    """hlo-codegen refused the module; the message is its error line."""


def codegen_command() -> list[str]:
    """How to start hlo-codegen: the script beside this Python, on PATH, or `python -m`."""
    beside = Path(sys.executable).with_name(CODEGEN_TOOL)
    if beside.is_file():
        return [str(beside)]
    found = shutil.which(CODEGEN_TOOL)
    if found:
        return [found]
    return [sys.executable, "-m", "hlo_codegen.cli"]


def compile_to_manifest(hlo_text: str, name: str, target: str, arch: str = "sm_90") -> Manifest:
    """Run hlo-codegen on `hlo_text`; the loaded manifest, or CompileError with its message."""
    cmd = codegen_command() + ["--target", target, "--arch", arch, "-"]
    try:
        proc = subprocess.run(cmd, input=hlo_text.encode("utf-8"), capture_output=True, timeout=TIMEOUT_S)
    except OSError as exc:
        raise CompileError(f"{name}: cannot start {CODEGEN_TOOL}: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise CompileError(f"{name}: {CODEGEN_TOOL} did not finish in {TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise CompileError(f"{name}: {_codegen_message(proc.stderr)}")
    return load_manifest(proc.stdout, f"{name} (compiled by {CODEGEN_TOOL})")


def _codegen_message(stderr: bytes) -> str:
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    for line in lines:
        if line.startswith(f"{CODEGEN_TOOL}: error: "):
            return f"{CODEGEN_TOOL} failed: {line[len(CODEGEN_TOOL) + 9:]}"
    return f"{CODEGEN_TOOL} failed: {lines[-1] if lines else 'no message'}"
