"""DotDimensionSorter ("dot_dimension_sorter"): contracting dimensions sorted, pairs kept."""

from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

SORTABLE = """
HloModule m
ENTRY e {
  a = f32[2,3,4] parameter(0)
  b = f32[4,5,3] parameter(1)
  ROOT d = f32[2,5] dot(a, b), lhs_contracting_dims={2,1}, rhs_contracting_dims={0,2}
}
"""


def test_sorter_sorts_the_consecutive_side_keeping_pairs():
    module = check_pass("dot_dimension_sorter", SORTABLE + """
// CHECK: dot(%a, %b), lhs_contracting_dims={1,2}, rhs_contracting_dims={2,0}
""")
    check_same_results(SORTABLE, module)


def test_sorter_leaves_sorted_and_non_default_layout_dots():
    check_unchanged("dot_dimension_sorter", """
HloModule m
ENTRY e {
  a = f32[2,3,4] parameter(0)
  b = f32[4,3,5] parameter(1)
  d = f32[2,5] dot(a, b), lhs_contracting_dims={1,2}, rhs_contracting_dims={1,0}
  worse = f32[2,5] dot(a, b), lhs_contracting_dims={2,1}, rhs_contracting_dims={0,1}
  c = f32[2,3,4]{0,1,2} parameter(2)
  dl = f32[2,5] dot(c, b), lhs_contracting_dims={2,1}, rhs_contracting_dims={0,1}
  ROOT t = (f32[2,5], f32[2,5], f32[2,5]) tuple(d, worse, dl)
}
""")
