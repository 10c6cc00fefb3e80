"""RngBitGeneratorExpander ("rng-bit-generator-expander"): bit-exact with the interpreter's
rng-bit-generator (XLA's Philox / ThreeFry, themselves checked against XLA:CPU)."""

import numpy as np
import pytest
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged


def rbg(state: str, data: str, algorithm: str) -> str:
    return f"""
HloModule m
ENTRY e {{
  s = {state} parameter(0)
  ROOT r = ({state}, {data}) rng-bit-generator(s), algorithm={algorithm}
}}
"""


STATES = {"u64[2]": [np.array([0x123456789ABCDEF0, 0xFFFFFFFFFFFFFFFE], np.uint64),
                     np.array([42, 7], np.uint64)],
          "u64[3]": [np.array([1, 0xFFFFFFFFFFFFFFFF, 5], np.uint64), np.array([99, 3, 0], np.uint64)],
          "u64[4]": [np.array([9, 10, 11, 12], np.uint64),
                     np.array([5, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 3], np.uint64)],
          "u64[6]": [np.array([0, 1, 8, 9, 4, 1], np.uint64),
                     np.array([7, 0xFFFFFFFFFFFFFFFF, 2, 0xAB, 0xCD, 0xEF], np.uint64)]}


@pytest.mark.parametrize("algorithm,state,data", [
    ("rng_philox", "u64[2]", "u32[7]"),
    ("rng_philox", "u64[3]", "u64[3,5]"),
    ("rng_default", "u64[3]", "f32[2,3]"),
    ("rng_philox", "u64[2]", "s16[5]"),
    ("rng_three_fry", "u64[2]", "u32[3,5]"),
    ("rng_three_fry", "u64[2]", "u32[]"),
    ("rng_three_fry", "u64[2]", "s64[4]"),
    ("rng_three_fry", "u64[2]", "u8[3,3]"),
    # Longer states (XLA's own expander test): the words past the ones read come back unchanged.
    ("rng_three_fry", "u64[4]", "u32[]"),
    ("rng_three_fry", "u64[4]", "u64[]"),
    ("rng_three_fry", "u64[4]", "u8[]"),
    ("rng_three_fry", "u64[3]", "s32[5,2]"),
    ("rng_philox", "u64[6]", "u32[]"),
    ("rng_philox", "u64[6]", "u64[]"),
    ("rng_philox", "u64[6]", "u8[]"),
    ("rng_philox", "u64[4]", "f16[9]"),
])
def test_bits_and_new_state_match_the_interpreter(algorithm, state, data):
    text = rbg(state, data, algorithm)
    module = check_pass("rng-bit-generator-expander", text + """
// CHECK:      %rng_
// CHECK:      ENTRY
// CHECK:      call(%s), to_apply=%rng_
// CHECK-NOT:  rng-bit-generator
""")
    for value in STATES[state]:
        check_same_results(text, module, args=[value])


def test_one_generator_computation_per_shape_and_algorithm():
    text = """
HloModule m
ENTRY e {
  s = u64[2] parameter(0)
  a = (u64[2], u32[4]) rng-bit-generator(s), algorithm=rng_philox
  sa = u64[2] get-tuple-element(a), index=0
  b = (u64[2], u32[4]) rng-bit-generator(sa), algorithm=rng_philox
  ROOT t = ((u64[2], u32[4]), (u64[2], u32[4])) tuple(a, b)
}
"""
    module = check_pass("rng-bit-generator-expander", text)
    assert [c.name for c in module.computations] == ["rng_philox_u32_4", "e"]
    check_same_results(text, module, args=[STATES["u64[2]"][0]])


def test_longer_state_keeps_its_tail_words():
    module = check_pass("rng-bit-generator-expander", rbg("u64[6]", "u32[]", "rng_philox") + """
// CHECK:      %rng_philox_u32_
// CHECK:      %[[TAIL:[^ ]+]] = u64[3]{0} slice(%state), slice={[3:6]}
// CHECK:      %[[NEW:[^ ]+]] = u64[6]{0} concatenate({{.*}}, %[[TAIL]]), dimensions={0}
// CHECK:      ROOT {{.*}} = (u64[6]{0}, u32[]) tuple(%[[NEW]],
""")
    check_same_results(rbg("u64[6]", "u32[]", "rng_philox"), module, args=[STATES["u64[6]"][1]])


def test_declines_unsupported_states_and_pred_data():
    check_unchanged("rng-bit-generator-expander", rbg("u64[1]", "u32[4]", "rng_three_fry"))
    # XLA's extractor test has such a (dead) state
    check_unchanged("rng-bit-generator-expander", rbg("f32[4]", "f32[4]", "rng_default"))
    check_unchanged("rng-bit-generator-expander", rbg("u64[2]", "pred[4]", "rng_philox"))
