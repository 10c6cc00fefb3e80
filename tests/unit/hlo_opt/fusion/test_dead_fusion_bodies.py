"""What priority fusion drops is freed as it goes, not left as cycles for the collector: after the
pass on a chain (collector off), the only instructions alive are the module's. And a
computation whose removals are swept mid-loop does not disturb a loop over its old list."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.parser import parse_module
from hlo_opt.passes.priority_fusion import PriorityFusion

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "bench"))
from adversarial_shapes import elementwise_chain  # noqa: E402


def _live_instructions() -> set[int]:
    return {id(o) for o in gc.get_objects() if isinstance(o, HloInstruction)}


def test_priority_fusion_leaves_no_dead_instruction_behind():
    gc.collect()
    gc.disable()
    try:
        before = _live_instructions()  # other tests' leftovers in this process
        m = parse_module(elementwise_chain(600, width=64))
        PriorityFusion().run(m)
        in_module = {id(i) for c in m.computations for i in c.instructions}
        assert len(m.entry.instructions) < 10  # the chain became one fusion
        dead = _live_instructions() - before - in_module
        assert len(dead) < 50  # before: ~1,750 dead fused instructions
    finally:
        gc.enable()


def test_removing_while_looping_over_a_large_computation():
    m = parse_module(elementwise_chain(9000, width=8))
    comp = m.entry
    comp.root = comp.parameter(0)  # the whole chain is now dead, users before operands
    seen = 0
    for instr in reversed(comp.instructions):
        seen += 1
        if instr.opcode != "parameter":
            comp.remove_instruction(instr)
    assert seen == 9003  # the sweeps (after 4096+ removals) did not shorten the list being read
    assert [i.name for i in comp.instructions] == ["p0", "p1"]
