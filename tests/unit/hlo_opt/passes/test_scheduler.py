"""HloMemoryScheduler ("hlo-memory-scheduler"): orders worked out by hand, the lowest-peak choice
among list / DFS / post order, while bodies, control dependencies, determinism and the verifier.

Sizes: one "unit" is f32[256] = 1024 bytes. Entry parameters are live throughout, constants
allocate nothing; every peak below is counted by hand from the live buffers after each step.
"""

import os
import subprocess
import sys

import pytest
from pass_testlib import check_numerics, check_pass, run_pass

from hlo_common.errors import VerificationError
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.hlo.verifier import verify_module
from hlo_opt.passes.scheduler import HloMemoryScheduler

UNIT = 1024

# Two independent broadcast+reduce chains written in the worst order: both 16-unit broadcasts
# would be live at once. The good order finishes one chain before starting the other.
TWO_CHAINS = """
HloModule two_chains
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[256] parameter(0)
  z = f32[] constant(0)
  a1 = f32[16,256] broadcast(p), dimensions={1}
  a2 = f32[16,256] broadcast(p), dimensions={1}
  r1 = f32[256] reduce(a1, z), dimensions={0}, to_apply=add
  r2 = f32[256] reduce(a2, z), dimensions={0}, to_apply=add
  ROOT t = (f32[256], f32[256]) tuple(r1, r2)
}
// CHECK: HloModule two_chains, is_scheduled=true
"""


def _order(module, comp_name="e"):
    return [i.name for i in module.computation(comp_name).instructions]


def test_two_chains_run_one_after_the_other():
    module = check_pass("hlo-memory-scheduler", TWO_CHAINS)
    order = _order(module)
    # p(1) a1(+16) r1(+1, a1 dies) a2(+16) r2(+1, a2 dies): peak 1 + 1 + 16 + 1 = 19 units.
    # The written order (a1 a2 r1 r2) peaks at 1 + 16 + 16 + 1 = 34 units.
    first = min(order.index("a1"), order.index("a2"))
    second_reduce = "r1" if order[first] == "a1" else "r2"
    assert order.index(second_reduce) < max(order.index("a1"), order.index("a2"))
    sched = HloMemoryScheduler()
    sched.run(parse_module(TWO_CHAINS))
    report = sched.report["e"]
    assert report.peaks[report.chosen] == 19 * UNIT
    assert min(report.peaks.values()) == 19 * UNIT
    check_numerics(TWO_CHAINS, module)


# A small value that is only needed at the end (U) next to a big temporary (Bg, 10 units) that a
# reduce turns into a small one. Live units after each step (p is a parameter, z a constant):
#   list        z p U Bg Rd root   1 2 12 13->3 5    peak 13 (U looks cheaper than Bg, so it runs
#                                                        first and stays live through the big phase)
#   post order  p U Bg z Rd root   the same order, peak 13 (the root reads U first)
#   DFS         p Bg z Rd U root   1 11 12->2 3 5    peak 12 (Rd's operands are bigger: visited first)
LATE_SMALL_VALUE = """
HloModule late_small_value
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[256] parameter(0)
  U = f32[256] reverse(p), dimensions={0}
  Bg = f32[10,256] broadcast(p), dimensions={1}
  z = f32[] constant(0)
  Rd = f32[256] reduce(Bg, z), dimensions={0}, to_apply=add
  ROOT root = f32[512] concatenate(U, Rd), dimensions={0}
}
"""


def test_keeps_the_lowest_peak_of_the_three_algorithms():
    sched = HloMemoryScheduler()
    module = parse_module(LATE_SMALL_VALUE)
    assert sched.run(module)
    report = sched.report["e"]
    assert report.peaks == {"list": 13 * UNIT, "dfs": 12 * UNIT, "post-order": 13 * UNIT}
    assert report.chosen == "dfs"
    assert _order(module) == ["p", "Bg", "z", "Rd", "U", "root"]
    verify_module(module)
    check_numerics(LATE_SMALL_VALUE, module)


def test_one_algorithm_only_keeps_its_order():
    sched = HloMemoryScheduler(algorithms=("list",))
    module = parse_module(LATE_SMALL_VALUE)
    sched.run(module)
    assert sched.report["e"].chosen == "list"
    assert _order(module) == ["z", "p", "U", "Bg", "Rd", "root"]


def test_unknown_algorithm_is_an_error():
    with pytest.raises(ValueError, match="unknown scheduler algorithms"):
        HloMemoryScheduler(algorithms=("magic",)).run(parse_module(TWO_CHAINS))


WHILE_LOOP = """
HloModule loop
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
body {
  p = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[256] get-tuple-element(p), index=1
  big = f32[8,256] broadcast(x), dimensions={1}
  z = f32[] constant(0)
  s = f32[256] reduce(big, z), dimensions={0}, to_apply=add
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[256]) tuple(i2, s)
}
cond {
  p = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  a = f32[256] parameter(0)
  c = f32[256] copy(a)
  k = s32[] constant(0)
  init = (s32[], f32[256]) tuple(k, c)
  w = (s32[], f32[256]) while(init), condition=cond, body=body
  ROOT r = f32[256] get-tuple-element(w), index=1
}
// CHECK: HloModule loop, is_scheduled=true
"""


def test_while_body_is_scheduled_and_its_peak_counts_at_the_while():
    module = check_pass("hlo-memory-scheduler", WHILE_LOOP)
    sched = HloMemoryScheduler()
    sched.run(parse_module(WHILE_LOOP))
    # Body: the loop state (s lands in it, as do c and the result) and the s32 counter belong to
    # the entry, the constants allocate nothing: only big (8 units) is the body's own.
    assert sched.report["body"].peaks[sched.report["body"].chosen] == 8 * UNIT
    # Entry: a (1, live throughout) + the loop state (1) + the counter (4 bytes) + the body's 8.
    assert sched.report["e"].peaks[sched.report["e"].chosen] == 10 * UNIT + 4
    assert set(sched.report) == {"body", "cond", "e"}  # not the reducer `add`
    body = _order(module, "body")
    assert body.index("big") < body.index("s") < body.index("t")
    check_numerics(WHILE_LOOP, module)


def test_control_dependencies_are_respected():
    text = """
HloModule ctrl
ENTRY e {
  p = f32[256] parameter(0)
  big = f32[64,256] broadcast(p), dimensions={1}
  small = f32[256] negate(p), control-predecessors={big}
  s = f32[1,256] slice(big), slice={[0:1], [0:256]}
  r = f32[256] reshape(s)
  ROOT t = (f32[256], f32[256]) tuple(r, small)
}
"""
    module, _ = run_pass("hlo-memory-scheduler", text)
    order = _order(module)
    assert order.index("big") < order.index("small")
    verify_module(module)


def test_deterministic_in_process_and_across_hash_seeds():
    texts = {print_module(_scheduled(WHILE_LOOP)) for _ in range(3)}
    assert len(texts) == 1
    code = ("import sys; from hlo_common.hlo.parser import parse_module; from hlo_common.hlo.printer import "
            "print_module; from hlo_opt.passes.scheduler import HloMemoryScheduler; "
            "m = parse_module(sys.stdin.read()); HloMemoryScheduler().run(m); print(print_module(m))")
    outs = set()
    for seed in ("0", "1", "98765"):
        proc = subprocess.run([sys.executable, "-c", code], input=WHILE_LOOP, capture_output=True, text=True,
                              env=dict(os.environ, PYTHONHASHSEED=seed), timeout=120)
        assert proc.returncode == 0, proc.stderr
        outs.add(proc.stdout)
    assert len(outs) == 1


def _scheduled(text):
    module = parse_module(text)
    HloMemoryScheduler().run(module)
    return module


def test_verifier_checks_the_schedule():
    module = _scheduled(LATE_SMALL_VALUE)
    assert module.is_scheduled
    text = print_module(module)
    verify_module(parse_module(text))
    entry = module.entry
    g = entry.instruction("root")
    entry.instructions.remove(g)
    entry.instructions.insert(1, g)  # the root before its operands
    with pytest.raises(VerificationError, match="before its definition"):
        verify_module(module)


def test_rescheduling_a_scheduled_module_changes_nothing():
    module = _scheduled(TWO_CHAINS)
    text = print_module(module)
    again = parse_module(text)
    assert HloMemoryScheduler().run(again) is False
    assert print_module(again) == text


def test_an_operand_that_is_also_a_control_predecessor_counts_once_each():
    module, _ = run_pass("hlo-memory-scheduler", """
HloModule both
ENTRY e {
  p = f32[256] parameter(0)
  a = f32[256] exponential(p)
  b = f32[256] negate(a), control-predecessors={a}
  ROOT c = f32[256] add(a, b)
}
""")
    assert _order(module) == ["p", "a", "b", "c"]
