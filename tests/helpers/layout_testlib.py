"""Helpers for the layout, reduction and GEMM pass tests: run a pass with the verifier after it, match
FileCheck patterns, require consistent layouts (XLA's CheckLayouts) and unchanged numbers.

    module = run_layout_pass("layout-assignment", TEXT)          # patterns in TEXT are checked
    module = run_layout_pass("layout_normalization", TEXT, changed=False)
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_opt.layout_checks import check_layouts
from numerics_testlib import check_same_results
from pass_testlib import check_pass


def run_layout_pass(name: str, text: str, changed: bool = True, numerics: bool = True,
                    **options) -> HloModule:
    """check_pass + layout consistency + the interpreter's results before and after (same inputs)."""
    module = check_pass(name, text, changed=changed, **options)
    problems = check_layouts(module)
    assert not problems, "\n".join(problems) + "\n" + print_module(module)
    if numerics:
        check_same_results(text, module)
    return module


def run_passes(names: list[str], text: str) -> HloModule:
    """Several passes in a row (verifier after each), for inputs another pass prepares."""
    from pass_testlib import run_pass

    module = parse_module(text, "<test>")
    for name in names:
        module, _ = run_pass(name, print_module(module))
    return module


def opcodes(module: HloModule) -> list[str]:
    return [i.opcode for i in module.entry.post_order()]
