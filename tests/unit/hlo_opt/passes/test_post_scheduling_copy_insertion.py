"""Post-scheduling copy insertion ("post-scheduling-copy-insertion", XLA's
RunPostSchedulingCopyInsertion in gpu_compiler.cc): with the schedule fixed, copy removal under
the sequential ordering takes out the loop-state copies that only guarded against other orders.

Every case runs copy-insertion and the scheduler first, as the GPU pipeline does; the result is
then executed inside hlo-codegen's buffer assignment (tests/helpers/
ba_memory_sim.py), which shows any copy removed that was still needed: a live value overwritten
makes the result differ from the interpreter's."""


from pass_testlib import check_unchanged, run_pass
from test_copy_insertion import NEGATE_LOOP, SWAP_LOOP, copies

from ba_memory_sim import run_and_compare  # noqa: E402

from hlo_codegen.buffer_assignment import assign_buffers, check_buffer_assignment, insert_copies  # noqa: E402
from hlo_common.hlo.parser import parse_module  # noqa: E402
from hlo_common.hlo.printer import print_module  # noqa: E402
from hlo_opt.passes.copy_insertion import CopyInsertion  # noqa: E402
from hlo_opt.passes.scheduler import HloMemoryScheduler  # noqa: E402

# The state of jax's threefry loop, in small: each round rotates three key words (k0, k1, k2) and
# swaps two arrays of rotation counts (r0, r1) while the counter and a mixed array advance.
ROTATE_LOOP = """
HloModule threefry_like
body {
  p = (s32[], u32[64], u32[], u32[], u32[], u32[4], u32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = u32[64] get-tuple-element(p), index=1
  k0 = u32[] get-tuple-element(p), index=2
  k1 = u32[] get-tuple-element(p), index=3
  k2 = u32[] get-tuple-element(p), index=4
  r0 = u32[4] get-tuple-element(p), index=5
  r1 = u32[4] get-tuple-element(p), index=6
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  s = u32[1] slice(r0), slice={[1:2]}
  sr = u32[] reshape(s)
  k = u32[] add(k0, sr)
  kb = u32[64] broadcast(k), dimensions={}
  x2 = u32[64] xor(x, kb)
  ROOT t = (s32[], u32[64], u32[], u32[], u32[], u32[4], u32[4]) tuple(i2, x2, k1, k2, k0, r1, r0)
}
cond {
  p = (s32[], u32[64], u32[], u32[], u32[], u32[4], u32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = u32[64] parameter(0)
  key = u32[3] parameter(1)
  r = u32[8] parameter(2)
  z = s32[] constant(0)
  w0 = u32[1] slice(key), slice={[0:1]}
  k0 = u32[] reshape(w0)
  w1 = u32[1] slice(key), slice={[1:2]}
  k1 = u32[] reshape(w1)
  w2 = u32[1] slice(key), slice={[2:3]}
  k2 = u32[] reshape(w2)
  r0 = u32[4] slice(r), slice={[0:4]}
  r1 = u32[4] slice(r), slice={[4:8]}
  init = (s32[], u32[64], u32[], u32[], u32[], u32[4], u32[4]) tuple(z, x, k0, k1, k2, r0, r1)
  w = (s32[], u32[64], u32[], u32[], u32[], u32[4], u32[4]) while(init), condition=cond, body=body
  out = u32[64] get-tuple-element(w), index=1
  e0 = u32[] get-tuple-element(w), index=2
  f0 = u32[4] get-tuple-element(w), index=5
  ROOT t = (u32[64], u32[], u32[4]) tuple(out, e0, f0)
}
"""


def scheduled(text: str):
    """What the post-scheduling pass sees in the GPU pipeline: copies inserted, then scheduled."""
    module = parse_module(text)
    CopyInsertion().run(module)
    HloMemoryScheduler().run(module)
    return module


def runs_in_its_schedule(module, seeds=(0, 1)) -> None:
    """hlo-codegen keeps the printed order: it asks for no copy of its own, its buffer assignment
    checks out and the module computes the interpreter's values inside it."""
    assert insert_copies(module) == 0
    ba = assign_buffers(module)
    assert check_buffer_assignment(ba) == []
    for seed in seeds:
        assert run_and_compare(module, ba, seed)


def test_rotating_loop_state_keeps_only_the_copies_its_schedule_needs():
    module = scheduled(ROTATE_LOOP)
    # before: every permuted leaf copied at the body's start and end (3 words + 2 arrays)
    assert copies(module, "body") == 10
    after, changed = run_pass("post-scheduling-copy-insertion", print_module(module))
    assert changed
    # as XLA's dropout loop: 4 copies for the three-word rotation, 3 for the swap
    assert copies(after, "body") == 7
    runs_in_its_schedule(after)


def test_swap_loop_needs_three_copies_once_scheduled():
    module = scheduled(SWAP_LOOP)
    assert copies(module, "body") == 4
    after, changed = run_pass("post-scheduling-copy-insertion", print_module(module))
    assert changed and copies(after, "body") == 3
    runs_in_its_schedule(after)


def test_loop_updated_in_place_keeps_its_init_copies():
    # copy-insertion left only the copies of the loop's read-only inits (a constant and an entry
    # parameter); the special cases put back what the sequential removal takes: no change
    text = print_module(scheduled(NEGATE_LOOP))
    check_unchanged("post-scheduling-copy-insertion", text)
    runs_in_its_schedule(parse_module(text))


def test_unscheduled_module_keeps_the_dependency_ordering():
    # without a schedule the pass can only remove what copy-insertion already could
    module = parse_module(ROTATE_LOOP)
    CopyInsertion().run(module)
    assert not module.is_scheduled
    check_unchanged("post-scheduling-copy-insertion", print_module(module))


def test_module_without_copies_is_left_alone():
    check_unchanged("post-scheduling-copy-insertion", """
HloModule m, is_scheduled=true
ENTRY e {
  p = f32[8] parameter(0)
  ROOT n = f32[8] negate(p)
}
""")
