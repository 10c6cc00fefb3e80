"""SanitizeConstantNames ("sanitize-constant-names"): '.' and '-' leave constant names, which
become unique across the module; other instructions keep their names."""

from pass_testlib import check_numerics, check_pass, check_unchanged

TWO_COMPUTATIONS = """
HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  constant_1 = f32[] constant(0)
  s = f32[] add(x, y)
  ROOT t = f32[] add(s, constant_1)
}
ENTRY e {
  p = f32[4] parameter(0)
  constant.1 = f32[] constant(0)
  c-2 = f32[] constant(2)
  b = f32[4] broadcast(c-2), dimensions={}
  m = f32[4] multiply(p, b)
  ROOT r = f32[] reduce(m, constant.1), dimensions={0}, to_apply=add
}
// `constant_1` (in %add) keeps its name; the entry's `constant.1` would become the same name,
// so it gets the next number; `c-2` becomes `c_2`. Non-constants (p, b, m, r, ...) keep theirs.
// CHECK:      %add
// CHECK:      %constant_1 = f32[] constant(0)
// CHECK:      ENTRY %e
// CHECK-DAG:  %constant_2 = f32[] constant(0)
// CHECK-DAG:  %c_2 = f32[] constant(2)
// CHECK-DAG:  %b = f32[4]{0} broadcast(%c_2)
// CHECK:      ROOT %r = f32[] reduce(%m, %constant_2)
"""


def test_sanitizes_and_uniquifies_across_the_module():
    module = check_pass("sanitize-constant-names", TWO_COMPUTATIONS)
    names = [i.name for c in module.computations for i in c.instructions if i.opcode == "constant"]
    assert len(set(names)) == len(names) and not any("." in n or "-" in n for n in names)
    check_numerics(TWO_COMPUTATIONS, module)


def test_a_constant_never_takes_a_non_constant_name():
    module = check_pass("sanitize-constant-names", """
HloModule m
ENTRY e {
  a_b = f32[] parameter(0)
  a.b = f32[] constant(1)
  ROOT s = f32[] add(a_b, a.b)
}
// CHECK: %a_b_1 = f32[] constant(1)
// CHECK: ROOT %s = f32[] add(%a_b, %a_b_1)
""")
    assert module.entry.instruction("a_b").opcode == "parameter"


def test_clean_names_change_nothing():
    check_unchanged("sanitize-constant-names", """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[] constant(2)
  b = f32[4] broadcast(c), dimensions={}
  ROOT m = f32[4] multiply(p, b)
}
""")
