"""SliceSinker ("slice-sinker"): elementwise ops on slices that together cover their sources run
once on the sources, each replaced by a slice of that result (XLA's slice_sinker.cc rules)."""

import pytest

from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged, run_pass
from hlo_common.hlo.printer import print_module


def _module(ops: str, params: str = "f32[6,5]", outs: str = "") -> str:
    return f"""
HloModule m
ENTRY e {{
  a = {params} parameter(0)
  b = {params} parameter(1)
{ops}
}}
"""


def test_adjacent_slices_of_two_sources_become_one_add():
    text = _module("""
  a0 = f32[2,5] slice(a), slice={[0:2], [0:5]}
  a1 = f32[4,5] slice(a), slice={[2:6], [0:5]}
  b0 = f32[2,5] slice(b), slice={[0:2], [0:5]}
  b1 = f32[4,5] slice(b), slice={[2:6], [0:5]}
  d0 = f32[2,5] add(a0, b0)
  d1 = f32[4,5] add(a1, b1)
  ROOT t = (f32[2,5], f32[4,5]) tuple(d0, d1)
// CHECK:      %[[ALL:.*]] = f32[6,5]{1,0} add(%a, %b)
// CHECK-NEXT: %[[P0:.*]] = f32[2,5]{1,0} slice(%[[ALL]]), slice={[0:2], [0:5]}
// CHECK-NEXT: %[[P1:.*]] = f32[4,5]{1,0} slice(%[[ALL]]), slice={[2:6], [0:5]}
// CHECK:      ROOT %t = (f32[2,5]{1,0}, f32[4,5]{1,0}) tuple(%[[P0]], %[[P1]])""")
    module = check_pass("slice-sinker", text)
    check_same_results(text, module)


def test_a_ternary_select_with_a_pred_source():
    text = """
HloModule m
ENTRY e {
  p = pred[4,3] parameter(0)
  x = f32[4,3] parameter(1)
  y = f32[4,3] parameter(2)
  p0 = pred[1,3] slice(p), slice={[0:1], [0:3]}
  p1 = pred[3,3] slice(p), slice={[1:4], [0:3]}
  x0 = f32[1,3] slice(x), slice={[0:1], [0:3]}
  x1 = f32[3,3] slice(x), slice={[1:4], [0:3]}
  y0 = f32[1,3] slice(y), slice={[0:1], [0:3]}
  y1 = f32[3,3] slice(y), slice={[1:4], [0:3]}
  d0 = f32[1,3] select(p0, x0, y0)
  d1 = f32[3,3] select(p1, x1, y1)
  ROOT t = (f32[1,3], f32[3,3]) tuple(d0, d1)
// CHECK: %[[ALL:.*]] = f32[4,3]{1,0} select(%p, %x, %y)
// CHECK: ROOT %t = {{.*}} tuple(%{{.*}}, %{{.*}})
}
"""
    module = check_pass("slice-sinker", text)
    root = module.entry.root
    assert [op.opcode for op in root.operands] == ["slice", "slice"]
    assert all(op.operands[0].opcode == "select" and op.operands[0].shape.dims == (4, 3)
               for op in root.operands)
    check_same_results(text, module)


def test_overlapping_slices_compute_shared_elements_once():
    """Rows 0-1, 2-4 and 3-5 (7 of 6 rows, overlapping): one multiply of all 6 rows."""
    text = _module("""
  a0 = f32[2,5] slice(a), slice={[0:2], [0:5]}
  a1 = f32[3,5] slice(a), slice={[2:5], [0:5]}
  a2 = f32[3,5] slice(a), slice={[3:6], [0:5]}
  b0 = f32[2,5] slice(b), slice={[0:2], [0:5]}
  b1 = f32[3,5] slice(b), slice={[2:5], [0:5]}
  b2 = f32[3,5] slice(b), slice={[3:6], [0:5]}
  m0 = f32[2,5] multiply(a0, b0)
  m1 = f32[3,5] multiply(a1, b1)
  m2 = f32[3,5] multiply(a2, b2)
  ROOT t = (f32[2,5], f32[3,5], f32[3,5]) tuple(m0, m1, m2)""")
    module = check_pass("slice-sinker", text)
    wholes = [i for i in module.entry.instructions if i.opcode == "multiply" and i.users]
    assert len(wholes) == 1 and wholes[0].shape.dims == (6, 5)
    rows = [op.attrs["slice"].dims[0] for op in module.entry.root.operands]
    assert rows == [(0, 2, 1), (2, 5, 1), (3, 6, 1)]
    check_same_results(text, module)


def test_two_groups_on_the_same_sources():
    """Row slices under add and column slices under multiply: two groups, each covering all."""
    text = _module("""
  ar0 = f32[2,5] slice(a), slice={[0:2], [0:5]}
  ar1 = f32[4,5] slice(a), slice={[2:6], [0:5]}
  ac0 = f32[6,1] slice(a), slice={[0:6], [0:1]}
  ac1 = f32[6,4] slice(a), slice={[0:6], [1:5]}
  br0 = f32[2,5] slice(b), slice={[0:2], [0:5]}
  br1 = f32[4,5] slice(b), slice={[2:6], [0:5]}
  bc0 = f32[6,1] slice(b), slice={[0:6], [0:1]}
  bc1 = f32[6,4] slice(b), slice={[0:6], [1:5]}
  d0 = f32[2,5] add(ar0, br0)
  d1 = f32[4,5] add(ar1, br1)
  m0 = f32[6,1] multiply(ac0, bc0)
  m1 = f32[6,4] multiply(ac1, bc1)
  ROOT t = (f32[2,5], f32[4,5], f32[6,1], f32[6,4]) tuple(d0, d1, m0, m1)""")
    module = check_pass("slice-sinker", text)
    kinds = [op.operands[0].opcode for op in module.entry.root.operands]
    assert kinds == ["add", "add", "multiply", "multiply"]
    check_same_results(text, module)


@pytest.mark.parametrize("ops,why", [
    ("""
  a0 = f32[2,5] slice(a), slice={[0:2], [0:5]}
  a1 = f32[3,5] slice(a), slice={[2:5], [0:5]}
  b0 = f32[2,5] slice(b), slice={[0:2], [0:5]}
  b1 = f32[3,5] slice(b), slice={[2:5], [0:5]}
  d0 = f32[2,5] add(a0, b0)
  d1 = f32[3,5] add(a1, b1)
  ROOT t = (f32[2,5], f32[3,5]) tuple(d0, d1)""", "5 of 6 rows: the whole add would compute more"),
    ("""
  a0 = f32[2,5] slice(a), slice={[0:2], [0:5]}
  a1 = f32[4,5] slice(a), slice={[2:6], [0:5]}
  b0 = f32[2,5] slice(b), slice={[0:2], [0:5]}
  b1 = f32[4,5] slice(b), slice={[2:6], [0:5]}
  d0 = f32[2,5] add(a0, b0)
  d1 = f32[4,5] add(b1, a1)
  ROOT t = (f32[2,5], f32[4,5]) tuple(d0, d1)""", "operands swapped: not the same source in each position"),
    ("""
  a0 = f32[3,5] slice(a), slice={[0:3], [0:5]}
  a1 = f32[3,5] slice(a), slice={[3:6], [0:5]}
  b0 = f32[3,5] slice(b), slice={[0:3], [0:5]}
  b1 = f32[3,5] slice(b), slice={[3:6], [0:5]}
  d0 = f32[3,5] add(a0, b1)
  d1 = f32[3,5] add(a1, b0)
  ROOT t = (f32[3,5], f32[3,5]) tuple(d0, d1)""", "each add's operands sliced at different rows"),
    ("""
  a0 = f32[2,5] slice(a), slice={[0:2], [0:5]}
  a1 = f32[4,5] slice(a), slice={[2:6], [0:5]}
  b0 = f32[2,5] slice(b), slice={[0:2], [0:5]}
  b1 = f32[4,5] slice(b), slice={[2:6], [0:5]}
  d0 = f32[2,5] subtract(a0, b0)
  d1 = f32[4,5] add(a1, b1)
  ROOT t = (f32[2,5], f32[4,5]) tuple(d0, d1)""", "different opcodes"),
    ("""
  a0 = f32[2,5] slice(a), slice={[0:2], [0:5]}
  a1 = f32[4,5] slice(a), slice={[2:6], [0:5]}
  b0 = f32[2,5] slice(b), slice={[0:2], [0:5]}
  b1 = f32[4,5] slice(b), slice={[2:6], [0:5]}
  c0 = pred[2,5] compare(a0, b0), direction=LT
  c1 = pred[4,5] compare(a1, b1), direction=GE
  ROOT t = (pred[2,5], pred[4,5]) tuple(c0, c1)""", "compare directions differ"),
], ids=["not-covering", "swapped", "different-indices", "different-opcode", "different-direction"])
def test_groups_the_rules_refuse(ops: str, why: str):
    check_unchanged("slice-sinker", _module(ops))


def test_slices_read_by_two_kinds_of_op():
    """The slices feed an add and a multiply each: both groups sink."""
    text = _module("""
  a0 = f32[2,5] slice(a), slice={[0:2], [0:5]}
  a1 = f32[4,5] slice(a), slice={[2:6], [0:5]}
  b0 = f32[2,5] slice(b), slice={[0:2], [0:5]}
  b1 = f32[4,5] slice(b), slice={[2:6], [0:5]}
  d0 = f32[2,5] add(a0, b0)
  d1 = f32[4,5] add(a1, b1)
  m0 = f32[2,5] multiply(a0, b0)
  m1 = f32[4,5] multiply(a1, b1)
  ROOT t = (f32[2,5], f32[4,5], f32[2,5], f32[4,5]) tuple(d0, d1, m0, m1)""")
    module = check_pass("slice-sinker", text)
    kinds = [op.operands[0].opcode for op in module.entry.root.operands]
    assert kinds == ["add", "add", "multiply", "multiply"]
    check_same_results(text, module)


def test_a_cosine_of_each_element_becomes_one_cosine():
    """The compile bench's mass matrix after reshape-mover: a cosine of each 1-element slice of a
    vector, one kernel each before the pass (XLA:GPU's output has one cosine)."""
    slices = "\n".join(f"  q{i} = f32[1] slice(q), slice={{[{i}:{i + 1}]}}\n  c{i} = f32[1] cosine(q{i})"
                       for i in range(5))
    text = f"""
HloModule m
ENTRY e {{
  q = f32[5] parameter(0)
{slices}
  ROOT t = (f32[1], f32[1], f32[1], f32[1], f32[1]) tuple(c0, c1, c2, c3, c4)
}}
"""
    module, changed = run_pass("slice-sinker", text)
    assert changed
    live = [i for i in module.entry.post_order() if i.opcode == "cosine"
            and (i.users or i is module.entry.root)]
    assert len(live) == 1 and live[0].operands[0].opcode == "parameter", print_module(module)
    check_same_results(text, module)


def test_the_gpu_pipeline_gives_the_mass_matrix_one_cosine():
    """Through hlo-opt's simplification (reshape-mover moves the squeezes first, as in XLA), the
    scalar cosines of a vector's elements become one fusion's cosine."""
    import subprocess
    import sys

    lines = [f"  e{i} = f32[1] slice(q), slice={{[{i}:{i + 1}]}}\n  r{i} = f32[] reshape(e{i})\n"
             f"  c{i} = f32[] cosine(r{i})" for i in range(6)]
    text = "HloModule m\nENTRY e {\n  q = f32[6] parameter(0)\n" + "\n".join(lines) + \
        "\n  ROOT t = (" + ", ".join(["f32[]"] * 6) + ") tuple(" + \
        ", ".join(f"c{i}" for i in range(6)) + ")\n}\n"
    out = subprocess.run([sys.executable, "-m", "hlo_opt.cli", "-"], input=text, capture_output=True,
                         text=True, check=True).stdout
    assert out.count("cosine(") == 1, out
