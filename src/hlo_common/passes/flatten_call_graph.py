"""FlattenCallGraph ("flatten-call-graph"): every computation called as control flow gets one caller.

Runs before the call inliner and again at the start of `layout assignment` (whose alias analysis
needs a flat call graph), and in hlo-codegen's prepare pipeline (buffer assignment needs one
context per computation). Shared by both tools, so it lives in `hlo_common.passes`.

    %w1 = while(%a), condition=%cond, body=%body       %w1 = while(%a), condition=%cond, body=%body
    %w2 = while(%b), condition=%cond, body=%body  =>   %w2 = while(%b), condition=%cond.clone,
                                                                          body=%body.clone

Call sites that run a computation as control flow (`call`, `while`, `conditional`, async ops)
each get their own copy, and so do the control-flow callees inside a copy, recursively; the
first such call site keeps the original unless the computation is also called from an embedded
context (fusion, reduce, sort, map, scatter, ...), which keeps it instead. Embedded call sites
are never split: many reduces may share one reducer. Copies are named with XLA's `.clone`
suffix rule and placed right after the original. Changes nothing when every computation already
has at most one control-flow caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloComputation, HloModule
from hlo_common.hlo.hlo_utils import (CallSite, NameUniquer, call_sites_of, clone_computation,
                                       computation_callers)
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


def _clone_subtree(comp: HloComputation, module: HloModule, uniquer: NameUniquer) -> HloComputation:
    """Clone `comp` and, inside the clone, every control-flow callee (recursively)."""
    clone = clone_computation(comp, module, uniquer)
    worklist = [clone]
    while worklist:
        current = worklist.pop()
        for instr in current.instructions:
            for site in call_sites_of(instr):
                if site.is_control_flow:
                    callee_clone = clone_computation(site.computation, module, uniquer)
                    site.replace(callee_clone)
                    worklist.append(callee_clone)
    return clone


def flatten_node(comp: HloComputation, sites: list[CallSite], module: HloModule,
                 uniquer: NameUniquer) -> bool:
    control = [s for s in sites if s.is_control_flow]
    embedded = len(control) != len(sites)
    changed = False
    for i, site in enumerate(control):
        if i == 0 and not embedded:
            continue
        site.replace(_clone_subtree(comp, module, uniquer))
        changed = True
    return changed


@register_pass
@dataclass
class FlattenCallGraph(HloPass):
    """Clones computations so each one called as control flow (call/while/conditional) has one caller."""

    name = "flatten-call-graph"

    def run(self, module: HloModule) -> bool:
        callers = computation_callers(module)
        uniquer = NameUniquer.for_module(module)
        changed = False
        # Callees first, as XLA's CallGraph::VisitNodes: a clone copies its own callees at once.
        for comp in module.computation_post_order():
            changed |= flatten_node(comp, callers.get(id(comp), []), module, uniquer)
        return changed
