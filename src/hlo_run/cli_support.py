"""Reading the CLI's input and reporting errors the way cli.md asks (hlo-run's local helpers).

`read_input` reads a file argument or stdin (`-` or no argument); `report_error` prints one line
`hlo-run: error: <message>` (plus the excerpt with a caret for parse errors) to stderr, and the
traceback only with `--debug`. These are hlo-run's own minimal versions of the shared helpers
(`hlo_common.source` / `hlo_common.cli_util`) and can give way to them once they exist.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import click

from hlo_common.errors import HloError, InputError

TOOL = "hlo-run"


def read_input(path: str | None) -> tuple[str, str]:
    """(text, display name) of a file argument, or of stdin for `-` / no argument."""
    if path is None or path == "-":
        return sys.stdin.read(), "<stdin>"
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8"), path
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file (HLO text expected)") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def report_error(exc: BaseException, debug: bool) -> None:
    """Print an error for the user: one line (and an excerpt), a traceback only when debugging."""
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    if isinstance(exc, HloError):
        click.echo(f"{TOOL}: error: {exc.one_line()}", err=True)
        excerpt = exc.excerpt()
        if excerpt:
            click.echo(excerpt, err=True)
    else:
        hint = "" if debug else " (run with --debug for the traceback)"
        click.echo(f"{TOOL}: error: internal error: {type(exc).__name__}: {exc}{hint}", err=True)
