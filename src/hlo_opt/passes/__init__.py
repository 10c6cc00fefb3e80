"""One HLO pass per file, each registered under XLA's pass name (see `hlo_common.hlo_pass.pass_base`).

`load_all_passes()` imports every module of this package (sorted by file name), so a new file
`passes/<name>.py` with an `@register_pass` class is picked up by `--passes`, `--list-passes` and
the pipelines in `hlo_opt.pipelines` without touching any other file. It loads the passes that
hlo-opt shares with hlo-codegen first (`hlo_common.passes`: `flatten-call-graph`, `fusion-wrapper`,
...), which hlo-opt runs under the same names.
"""

from __future__ import annotations

import importlib
import pkgutil


def load_all_passes() -> None:
    from hlo_common.passes import load_all_passes as load_shared_passes

    load_shared_passes()
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
