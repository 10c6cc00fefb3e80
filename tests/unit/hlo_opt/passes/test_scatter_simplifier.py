"""ScatterSimplifier ("scatter_simplifier"): scatters in canonical form."""

import numpy as np
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged, random_arguments

from hlo_common.hlo.parser import parse_module

ADD = """
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def _args_in_range(text: str, seed: int, bound: int) -> list[np.ndarray]:
    args = random_arguments(parse_module(text), seed)
    return [np.abs(a) % bound if a.dtype.kind == "i" else a for a in args]


def test_row_scatter_with_inserted_dim():
    text = ADD + """
ENTRY e {
  x = f32[8,3] parameter(0)
  i = s32[5] parameter(1)
  u = f32[5,3] parameter(2)
  ROOT s = f32[8,3] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
// CHECK-DAG:  %[[I:.*]] = s32[5,1]{1,0} reshape(%i)
// CHECK-DAG:  %[[U:.*]] = f32[5,1,3]{2,1,0} reshape(%u)
// CHECK:      ROOT %{{.*}} = f32[8,3]{1,0} scatter(%x, %[[I]], %[[U]]), update_window_dims={1,2},
// CHECK-SAME: inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
"""
    module = check_pass("scatter_simplifier", text)
    for seed in range(2):
        check_same_results(text, module, args=_args_in_range(text, seed, 8))


def test_two_scatter_dims_window_first_in_updates():
    text = ADD + """
ENTRY e {
  x = f32[6,5,4] parameter(0)
  i = s32[2,2,3] parameter(1)
  u = f32[4,2,3] parameter(2)
  ROOT s = f32[6,5,4] scatter(x, i, u), update_window_dims={0}, inserted_window_dims={0,1},
      scatter_dims_to_operand_dims={1,0}, index_vector_dim=0, to_apply=add
}
// CHECK:      transpose(%u), dimensions={1,2,0}
// CHECK:      f32[6,1,1,4]{3,2,1,0} reshape(
// CHECK:      ROOT %{{.*}} = f32[6,5,4]{2,1,0} scatter(
"""
    module = check_pass("scatter_simplifier", text)
    for seed in range(2):
        check_same_results(text, module, args=_args_in_range(text, seed, 5))


def test_scalar_scatter_becomes_its_combiner():
    text = ADD + """
ENTRY e {
  x = f32[] parameter(0)
  i = s32[0] constant({})
  u = f32[] parameter(1)
  ROOT s = f32[] scatter(x, i, u), update_window_dims={}, inserted_window_dims={},
      scatter_dims_to_operand_dims={}, index_vector_dim=0, to_apply=add
}
// CHECK:      ROOT %{{.*}} = f32[] add(%x, %u)
"""
    module = check_pass("scatter_simplifier", text)
    from hlo_common.interpreter import evaluate

    # (The interpreter cannot run the scalar scatter itself; the combiner's result is x + u.)
    x, u = np.float32(1.25), np.float32(-3.5)
    assert evaluate(module, [x, u]) == x + u


def test_canonical_scatter_stays():
    check_unchanged("scatter_simplifier", ADD + """
ENTRY e {
  x = f32[8,3] parameter(0)
  i = s32[5,1] parameter(1)
  u = f32[5,1,3] parameter(2)
  ROOT s = f32[8,3] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
""")
