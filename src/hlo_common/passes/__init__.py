"""HLO-to-HLO passes that more than one tool runs, one pass per file, registered under their names
(`hlo_common.hlo_pass.pass_base.register_pass`).

Where it sits: beside the pass framework (`hlo_common.hlo_pass`). hlo-opt's pipelines run some of
them under XLA's names (`flatten-call-graph`, `fusion-wrapper`); hlo-codegen runs them all as its
prepare pipeline (`hlo_codegen.compiler.prepare_pipeline`) on the module it is given, so that a
module that never went through hlo-opt still reaches the emitters flat, static and wrapped.
Neither tool imports the other: both import these classes from here.

`load_all_passes()` imports every module of this package (sorted by file name; `_`-prefixed
helpers are skipped), so `hlo-opt --passes` and `--list-passes` see the passes too.
"""

from __future__ import annotations

import importlib
import pkgutil


def load_all_passes() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
