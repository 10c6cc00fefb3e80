"""One HLO pass per file, each registered under XLA's pass name (see `hlo_common.hlo_pass.pass_base`).

`load_all_passes()` imports every module of this package (sorted by file name), so a new file
`passes/<name>.py` with an `@register_pass` class is picked up by `--passes`, `--list-passes` and
the pipelines in `hlo_opt.pipelines` without touching any other file.
"""

from __future__ import annotations

import importlib
import pkgutil


def load_all_passes() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
