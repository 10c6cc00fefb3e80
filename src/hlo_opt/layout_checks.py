"""Layout consistency checks (XLA's `LayoutAssignment::CheckLayouts`), for tests and sweeps after
layout-assignment and the passes that follow it: layout-preserving ops agree with their operands,
control flow and fusions with their computations, the entry with its computation layout.

    problems = check_layouts(module)      # [] when consistent, else one line per disagreement
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.layout_constraints import CANNOT_CHANGE_LAYOUT
from hlo_opt.layout_util import filter_layout_to_dims, same_m2m


def check_layouts(module: HloModule) -> list[str]:
    """XLA's LayoutAssignment::CheckLayouts, for tests and sweeps: the places where layouts disagree
    (empty when every layout-preserving op, broadcast, get-tuple-element, call, while, conditional
    and fusion agrees with its operands and callees, and the entry matches its layout)."""
    problems: list[str] = []

    def expect(ok: bool, instr: HloInstruction, what: str) -> None:
        if not ok:
            problems.append(f"%{instr.name} ({instr.opcode}): {what}")

    for comp in non_fusion_computations(module):
        for instr in comp.instructions:
            for what, ok in _layout_checks(instr):
                expect(ok, instr, what)
    entry, layout = module.entry, module.entry_computation_layout
    if layout is not None:
        for p in entry.parameters:
            expect(same_m2m(p.shape, layout[0][p.parameter_number]), p,
                   "differs from entry_computation_layout")
        expect(same_m2m(entry.root.shape, layout[1]), entry.root, "differs from the entry's result layout")
    return problems


def _layout_checks(instr: HloInstruction) -> list[tuple[str, bool]]:
    s, op = instr.shape, instr.opcode
    checks: list[tuple[str, bool]] = []
    if op in CANNOT_CHANGE_LAYOUT and s.is_array and s.rank >= 2:
        checks += [(f"operand {k} layout differs from the result's",
                    o.shape.minor_to_major == s.minor_to_major)
                   for k, o in enumerate(instr.operands) if o.shape.is_array and o.shape.rank == s.rank]
    elif op == "broadcast":
        want = filter_layout_to_dims(s, tuple(instr.attrs.get("dimensions", ())))
        checks.append(("operand layout is not the result's on the broadcast dims",
                       instr.operands[0].shape.minor_to_major == want))
    elif op == "get-tuple-element":
        checks.append(("differs from the tuple element", same_m2m(s, instr.operands[0].shape.tuple_shapes[
            instr.attrs["index"]])))
    elif op == "while":
        body, cond = instr.attrs["body"], instr.attrs["condition"]
        parts = (("operand", instr.operands[0].shape), ("body parameter", body.parameters[0].shape),
                 ("body root", body.root.shape), ("condition parameter", cond.parameters[0].shape))
        for what, shape in parts:
            checks.append((f"{what} layout differs from the loop's", same_m2m(s, shape)))
    elif op in ("call", "fusion"):
        callee = instr.attrs["to_apply" if op == "call" else "calls"]
        checks.append(("result differs from the callee's root", same_m2m(s, callee.root.shape)))
        checks += [(f"operand {k} differs from the callee parameter",
                    same_m2m(o.shape, callee.parameter(k).shape)) for k, o in enumerate(instr.operands)]
    elif op == "conditional":
        for j, branch in enumerate(instr.called_computations()):
            checks.append((f"branch {j} root differs from the result", same_m2m(s, branch.root.shape)))
            checks.append((f"operand {j + 1} differs from branch {j}'s parameter",
                           same_m2m(instr.operands[j + 1].shape, branch.parameters[0].shape)))
    return checks
