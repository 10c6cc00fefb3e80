"""Module dumps named as XLA names them (`xla/service/dump.cc`), written by `hlo-opt --dump-to`.

    module_0000.jit_f.before_optimizations.txt
    module_0000.jit_f.0003.simplification.after_algsimp.before_tuple-simplifier.txt
    module_0000.jit_f.after_optimizations.txt

Module ids count the modules of one input in order (`--split-input-file` gives several); the
four-digit step counts the between-pass dumps of one module. Between passes, as in XLA's
`HloPassPipeline`: the start of every pipeline is dumped when the pass regex matches
`pipeline-start` or the first pass; after a pass, a dump is written when the regex matches the
pass or the next one and, if the regex is `.*`, only when the pass changed the module. Each
format (`text`, `dot`, `html`) gives one file per dump point, written whole (temporary file, then
rename) or not at all.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hlo_common.cli_util import write_file_atomically
from hlo_common.errors import InputError
from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.printer import print_module

MAX_FILENAME = 255  # XLA drops the module name from longer file names
FORMATS = ("text", "dot", "html")
_EXTENSIONS = {"text": "txt", "dot": "dot", "html": "html"}
_UNSAFE = re.compile(r"[/\\\[\] ]")


def _renderers() -> dict[str, Callable[[HloModule], str]]:
    from hlo_opt.dump_dot import module_to_dot
    from hlo_opt.dump_html import module_to_html

    return {"text": print_module, "dot": module_to_dot, "html": module_to_html}


@dataclass(frozen=True)
class DumpOptions:
    """`--dump-to`, `--dump-pass-re`, `--dump-format` (XLA: xla_dump_to, xla_dump_hlo_pass_re,
    xla_dump_hlo_as_text/dot/html)."""

    directory: Path
    pass_re: str | None = None
    formats: tuple[str, ...] = ("text",)

    def __post_init__(self) -> None:
        for f in self.formats:
            if f not in FORMATS:
                raise InputError(f"unknown dump format '{f}' (expected one of {', '.join(FORMATS)})")
        if self.pass_re is not None:
            try:
                re.compile(self.pass_re)
            except re.error as exc:
                raise InputError(f"invalid --dump-pass-re '{self.pass_re}': {exc}") from None

    def should_dump_pass(self, name: str) -> bool:
        return self.pass_re is not None and re.search(self.pass_re, name) is not None


def prepare_dump_directory(directory: Path) -> None:
    """Create the directory and prove it is writable, so a bad path fails before any pass runs."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InputError(f"cannot write dumps to '{directory}': {reason}") from None


def sanitize_file_name(name: str) -> str:
    """XLA's SanitizeFileName: `/`, `\\`, `[`, `]` and spaces become `_` ("layout assignment")."""
    return _UNSAFE.sub("_", name)


class ModuleDumper:
    """Writes the dumps of one module; `between_passes` is called by every HloPassPipeline."""

    def __init__(self, options: DumpOptions, module_id: int, module_name: str):
        self.options = options
        self.module_id = module_id
        self.module_name = module_name
        self.step = 0
        self.written: list[Path] = []

    def file_name(self, suffix: str, fmt: str) -> str:
        ext = _EXTENSIONS[fmt]
        name = f"module_{self.module_id:04d}.{self.module_name}.{suffix}.{ext}"
        if len(name) > MAX_FILENAME:
            name = f"module_{self.module_id:04d}.{suffix}.{ext}"
        return sanitize_file_name(name)

    def dump(self, module: HloModule, suffix: str) -> list[Path]:
        """Write `module` once per format under `suffix` (e.g. `before_optimizations`)."""
        renderers = _renderers()
        out = []
        for fmt in self.options.formats:
            path = self.options.directory / self.file_name(suffix, fmt)
            write_file_atomically(path, renderers[fmt](module))  # an OutputError names the file
            out.append(path)
        self.written.extend(out)
        return out

    def between_passes(self, module: HloModule, pipeline: str, after: str, before: str,
                       changed: bool | None) -> None:
        """Dump after pass `after` (or `pipeline-start`) and before `before` when the regex asks."""
        opts = self.options
        if opts.pass_re is None:
            return
        if not (opts.should_dump_pass(after) or opts.should_dump_pass(before)):
            return
        if changed is False and opts.pass_re == ".*":
            return
        suffix = f"{self.step:04d}.{pipeline}.after_{after}.before_{before}"
        self.step += 1
        self.dump(module, suffix)
