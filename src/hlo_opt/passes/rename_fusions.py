"""RenameFusions ("rename_fusions"): fusions named after their kind and heroes.

Runs first in the `post-fusion optimization` pipeline (xla-facts.md section e, step 11), after
priority fusion and multi-output fusion, so that dumps, profiles and hlo-codegen's kernel names
say what each kernel does (XLA's `xla/service/gpu/transforms/rename_fusions.cc`):

    %fusion.3 = f32[8] fusion(...), kind=kLoop, calls=%fused_computation.3    (roots add, exp)
      =>  %loop_add_exp_fusion = f32[8] fusion(...), kind=kLoop, calls=%fused_add_exp

The fusion becomes `<loop|input|output>_<heroes>_fusion` and its computation `fused_<heroes>`,
where `<heroes>` are the opcodes of the non-trivial heroes of the fusion's roots (the hero
analysis of `hlo_common.gpu.hlo_fusion_analysis`, which looks through elementwise and bitcast chains to
a reduce, a tiled transpose or a concatenate), each once, sorted as strings and joined by `_`,
with `-` turned into `_` (`dynamic-update-slice` -> `dynamic_update_slice`). kCustom fusions
(library and Triton calls) keep their names. Names are made unique module-wide as XLA's name
uniquer does (`loop_add_fusion`, `loop_add_fusion.1`, ...; instruction names and computation
names are separate name spaces). Only fusions outside fusion computations are renamed, visiting
the computations callees first and each computation's instructions in order.

One deliberate difference: XLA's uniquer still holds the old names when it picks the new ones, so
a second run renames `loop_add_fusion` to `loop_add_fusion.1`. Here the names being replaced are
free, so the pass is idempotent (a second run changes nothing and reports no change).
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.gpu.ir_emission_utils import find_non_trivial_hero, fusion_roots
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.hlo.hlo_utils import NameUniquer
from hlo_common.hlo.ir import HloInstruction, HloModule

_KIND_WORDS = {"kLoop": "loop", "kInput": "input", "kOutput": "output", "kCustom": "custom"}


def hero_names(fusion: HloInstruction) -> str:
    """`add_exponential` for a fusion whose roots' heroes are an exponential and an add."""
    heroes = {find_non_trivial_hero(root).opcode for root in fusion_roots(fusion)}
    return "_".join(sorted(heroes)).replace("-", "_")


def _fused_computations(module: HloModule) -> set[int]:
    return {id(c) for comp in module.computations for i in comp.instructions
            if i.opcode == "fusion" for c in i.called_computations()}


@register_pass
@dataclass
class RenameFusions(HloPass):
    """Fusions become <kind>_<hero opcodes>_fusion, their computations fused_<hero opcodes>."""

    name = "rename_fusions"

    def run(self, module: HloModule) -> bool:
        fused = _fused_computations(module)
        targets: list[HloInstruction] = []
        for comp in module.computation_post_order():
            if id(comp) in fused:
                continue
            targets.extend(i for i in comp.instructions
                           if i.opcode == "fusion" and i.attrs.get("kind") != "kCustom")
        if not targets:
            return False
        # The names being replaced are free; every other name in the module stays taken.
        renamed = {id(i) for i in targets}
        renamed_comps = {id(i.fused_computation()) for i in targets}
        instr_names = NameUniquer(i.name for c in module.computations for i in c.instructions
                                  if id(i) not in renamed)
        comp_names = NameUniquer(c.name for c in module.computations if id(c) not in renamed_comps)
        changed = False
        done: set[int] = set()
        for fusion in targets:
            heroes = hero_names(fusion)
            kind = _KIND_WORDS.get(fusion.attrs.get("kind"), "loop")
            new_name = instr_names.unique(f"{kind}_{heroes}_fusion")
            if new_name != fusion.name:
                fusion.name = new_name
                changed = True
            comp = fusion.fused_computation()
            if id(comp) in done:  # one computation called by two fusions: renamed once
                continue
            done.add(id(comp))
            new_comp_name = comp_names.unique(f"fused_{heroes}")
            if new_comp_name != comp.name:
                comp.name = new_comp_name
                changed = True
        return changed
