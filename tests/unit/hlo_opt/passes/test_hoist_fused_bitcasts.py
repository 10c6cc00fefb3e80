"""hoist-fused-bitcasts (XLA's HoistFusedBitcasts): bitcasts and reshapes leave GEMM fusions.
Cases after xla/backends/gpu/transforms/hoist_fused_bitcasts_test.cc, each run with a bitcast and
with a reshape, checked as XLA's test checks them and numerically against the interpreter."""

from __future__ import annotations

import pytest
from pass_testlib import check_numerics, check_pass, check_unchanged

CONFIG = ('backend_config={"fusion_backend_config":{"kind":"__triton_gemm","triton_gemm_config":'
          '{"block_m":"32","block_n":"64","block_k":"16","split_k":"1","num_stages":"1","num_warps":"1"}}}')
OPS = ["bitcast", "reshape"]


def _module(body: str, params: str, result: str) -> str:
    """A module whose entry calls `body` (computation `dot`) as a Triton GEMM fusion."""
    args = ", ".join(f"p{i}" for i in range(params.count(";") + 1))
    entry = "\n".join(f"  p{i} = {s.strip()} parameter({i})" for i, s in enumerate(params.split(";")))
    return (f"HloModule t\n\ndot {{\n{body}\n}}\n\nENTRY e {{\n{entry}\n"
            f"  ROOT f = {result} fusion({args}), kind=kCustom, calls=dot, {CONFIG}\n}}\n")


def _run(text: str, checks: str, changed: bool = True):
    module = check_pass("hoist-fused-bitcasts", text + checks, changed=changed)
    check_numerics(text, module)
    return module


@pytest.mark.parametrize("op", ["bitcast"])
def test_a_bitcast_of_a_parameter_moves_to_the_caller(op):
    _run(_module(f"""  lhs = f32[21]{{0}} parameter(0)
  b = f32[3,7]{{0,1}} {op}(lhs)
  rhs = f32[7,11]{{1,0}} parameter(1)
  ROOT d = f32[3,11]{{1,0}} dot(b, rhs), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}""",
                 "f32[21]{0}; f32[7,11]{1,0}", "f32[3,11]{1,0}"), """
// CHECK: %dot
// CHECK-NEXT: %lhs = f32[3,7]{0,1} parameter(0)
// CHECK-NEXT: %rhs = f32[7,11]{1,0} parameter(1)
// CHECK-NEXT: ROOT %d = f32[3,11]{1,0} dot(%lhs, %rhs)
// CHECK: ENTRY
// CHECK: f32[3,7]{0,1} bitcast(%p0)
""")


@pytest.mark.parametrize("op", OPS)
def test_bitcasts_pass_other_bitcasts(op):
    _run(_module(f"""  lhs = f32[3,7]{{1,0}} parameter(0)
  b0 = f32[21]{{0}} {op}(lhs)
  b1 = f32[3,7]{{1,0}} {op}(b0)
  rhs = f32[7,11]{{1,0}} parameter(1)
  ROOT d = f32[3,11]{{1,0}} dot(b1, rhs), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}""",
                 "f32[3,7]{1,0}; f32[7,11]{1,0}", "f32[3,11]{1,0}"), f"""
// CHECK: %dot
// CHECK-NOT: {op}(
// CHECK: ENTRY
""")


@pytest.mark.parametrize("op", OPS)
def test_a_bitcast_after_the_dot_passes_a_convert_epilogue(op):
    _run(_module(f"""  lhs = f32[3,7]{{1,0}} parameter(0)
  rhs = f32[7,11]{{1,0}} parameter(1)
  d = f32[3,11]{{1,0}} dot(lhs, rhs), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  b = f32[33]{{0}} {op}(d)
  ROOT c = f16[33]{{0}} convert(b)""", "f32[3,7]{1,0}; f32[7,11]{1,0}", "f16[33]{0}"), """
// CHECK: f16[3,11]{1,0} convert(
// CHECK: ENTRY
// CHECK: f16[3,11]{1,0} fusion(
// CHECK: ROOT {{.*}} = f16[33]{0} bitcast(
""")


@pytest.mark.parametrize("op", OPS)
def test_a_bitcast_after_an_elementwise_epilogue(op):
    _run(_module(f"""  lhs = f32[3,7]{{1,0}} parameter(0)
  rhs = f32[7,11]{{1,0}} parameter(1)
  d = f32[3,11]{{1,0}} dot(lhs, rhs), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  b = f32[33]{{0}} {op}(d)
  ROOT a = f32[33]{{0}} add(b, b)""", "f32[3,7]{1,0}; f32[7,11]{1,0}", "f32[33]{0}"), """
// CHECK: f32[3,11]{1,0} add(
// CHECK: ENTRY
// CHECK: ROOT {{.*}} = f32[33]{0} bitcast(
""")


@pytest.mark.parametrize("op", OPS)
def test_sinking_stops_at_a_transpose_and_the_root_bitcast_still_goes(op):
    _run(_module(f"""  p0 = f32[2,32]{{1,0}} parameter(0)
  p1 = f32[64,32]{{1,0}} parameter(1)
  d = f32[2,64]{{1,0}} dot(p0, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}
  b1 = f32[2,32,2]{{2,1,0}} {op}(d)
  t = f32[2,2,32]{{2,1,0}} transpose(b1), dimensions={{0,2,1}}
  ROOT b2 = f32[1,2,1,2,32]{{4,3,2,1,0}} {op}(t)""", "f32[2,32]{1,0}; f32[64,32]{1,0}",
                 "f32[1,2,1,2,32]{4,3,2,1,0}"), """
// CHECK: ROOT {{.*}} = f32[2,2,32]{2,1,0} transpose
// CHECK: ENTRY
// CHECK: ROOT {{.*}} = f32[1,2,1,2,32]{4,3,2,1,0} bitcast
""")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("source,dims", [("f32[11,1,24,1]{3,2,1,0}", "0,1,2,3"),
                                         ("f32[11,24,1]{2,1,0}", "0,2,3")])
def test_bitcasts_go_up_through_broadcasts(op, source, dims):
    _run(_module(f"""  p0 = {source} parameter(0)
  bc = f32[11,1,24,1,128]{{4,3,2,1,0}} broadcast(p0), dimensions={{{dims}}}
  r = f32[264,128]{{1,0}} {op}(bc)
  p1 = f32[128,8]{{1,0}} parameter(1)
  ROOT d = f32[264,8]{{1,0}} dot(r, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}""",
                 f"{source}; f32[128,8]{{1,0}}", "f32[264,8]{1,0}"), """
// CHECK: %dot
// CHECK-NEXT: %p0{{.*}} = f32[264]{0} parameter(0)
// CHECK-NEXT: {{.*}} = f32[264,128]{1,0} broadcast(%p0{{.*}}), dimensions={0}
// CHECK: ENTRY
// CHECK: f32[264]{0} bitcast(%p0)
""")


@pytest.mark.parametrize("op", OPS)
def test_bitcasts_go_over_a_broadcast_dim_of_size_one(op):
    _run(_module(f"""  p0 = f32[11,1,24,1]{{3,2,1,0}} parameter(0)
  bc = f32[11,1,24,1,128,1]{{5,4,3,2,1,0}} broadcast(p0), dimensions={{0,1,2,5}}
  r = f32[264,128]{{1,0}} {op}(bc)
  p1 = f32[128,8]{{1,0}} parameter(1)
  ROOT d = f32[264,8]{{1,0}} dot(r, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}""",
                 "f32[11,1,24,1]{3,2,1,0}; f32[128,8]{1,0}", "f32[264,8]{1,0}"), """
// CHECK: f32[264]{0} parameter(0)
// CHECK-NEXT: {{.*}} = f32[264,128]{1,0} broadcast({{.*}}), dimensions={0}
""")


@pytest.mark.parametrize("op", OPS)
def test_a_bitcast_mixing_operand_and_broadcast_dims_stays(op):
    check_unchanged("hoist-fused-bitcasts", _module(f"""  p0 = f32[3,4]{{1,0}} parameter(0)
  p1 = f32[64,7]{{1,0}} parameter(1)
  bc = f32[3,4,16]{{2,1,0}} broadcast(p0), dimensions={{0,1}}
  r = f32[3,64]{{1,0}} {op}(bc)
  ROOT d = f32[3,7]{{1,0}} dot(r, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}""",
                                                    "f32[3,4]{1,0}; f32[64,7]{1,0}", "f32[3,7]{1,0}"))


@pytest.mark.parametrize("op", OPS)
def test_bitcasts_go_up_through_broadcast_diamonds(op):
    _run(_module(f"""  p0 = f32[3,5]{{1,0}} parameter(0)
  b0 = f32[3,5,77,1]{{3,2,1,0}} broadcast(p0), dimensions={{0,1}}
  b1 = f32[3,5,1]{{2,1,0}} broadcast(p0), dimensions={{0,1}}
  b2 = f32[3,5,77,1]{{3,2,1,0}} broadcast(b1), dimensions={{0,1,3}}
  s = f32[3,5,77,1]{{3,2,1,0}} add(b0, b2)
  r = f32[15,77]{{1,0}} {op}(s)
  p1 = f32[77,8]{{1,0}} parameter(1)
  ROOT d = f32[15,8]{{1,0}} dot(r, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}""",
                 "f32[3,5]{1,0}; f32[77,8]{1,0}", "f32[15,8]{1,0}"), """
// CHECK: %p0{{.*}} = f32[15]{0} parameter(0)
// CHECK-DAG: f32[15,77]{1,0} broadcast(%p0{{.*}}), dimensions={0}
// CHECK-DAG: f32[15]{0} broadcast(%p0{{.*}}), dimensions={0}
""")


@pytest.mark.parametrize("op", ["bitcast"])  # its [5,122] -> [122,5]{0,1} as a reshape moves data
def test_a_transpose_keeps_its_layout_and_bitcasts_pass_converts(op):
    _run(_module(f"""  p0 = pred[3,122,96,12]{{3,2,1,0}} parameter(0)
  b0 = pred[3,122,1152]{{2,1,0}} {op}(p0)
  t0 = pred[3,1152,122]{{2,1,0}} transpose(b0), dimensions={{0,2,1}}
  b2 = pred[3456,122]{{1,0}} {op}(t0)
  c0 = f16[3456,122]{{1,0}} convert(b2)
  p1 = pred[1,5,122]{{2,1,0}} parameter(1)
  b3 = pred[5,122]{{1,0}} {op}(p1)
  c1 = f16[5,122]{{1,0}} convert(b3)
  b4 = f16[122,5]{{0,1}} {op}(c1)
  d0 = f16[3456,5]{{1,0}} dot(c0, b4), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT b5 = f16[3,96,12,1,5]{{4,3,2,1,0}} {op}(d0)""", "pred[3,122,96,12]{3,2,1,0}; pred[1,5,122]{2,1,0}",
                 "f16[3,96,12,1,5]{4,3,2,1,0}"), """
// CHECK: %dot
// CHECK: [[re:[^ ]+]] = pred[3456,122]{1,0} OP(
// CHECK: f16[3456,122]{1,0} convert([[re]])
// CHECK-NOT: OP(
// CHECK: f16[122,5]{0,1} convert(
// CHECK: ENTRY
// CHECK: pred[122,5]{0,1} bitcast(
""".replace("OP", op))


def test_a_reshape_that_is_no_bitcast_stays():
    """A reshape into a transposed layout moves data (XLA's pass sees only reshapes that are
    bitcasts, after layout normalization; ours checks)."""
    check_unchanged("hoist-fused-bitcasts", _module("""  lhs = f32[21]{0} parameter(0)
  b = f32[3,7]{0,1} reshape(lhs)
  rhs = f32[7,11]{1,0} parameter(1)
  ROOT d = f32[3,11]{1,0} dot(b, rhs), lhs_contracting_dims={1}, rhs_contracting_dims={0}""",
                                                    "f32[21]{0}; f32[7,11]{1,0}", "f32[3,11]{1,0}"))


def test_cudnn_fusions_are_left_alone():
    text = _module("""  lhs = f32[21]{0} parameter(0)
  b = f32[3,7]{1,0} bitcast(lhs)
  rhs = f32[7,11]{1,0} parameter(1)
  ROOT d = f32[3,11]{1,0} dot(b, rhs), lhs_contracting_dims={1}, rhs_contracting_dims={0}""",
                   "f32[21]{0}; f32[7,11]{1,0}", "f32[3,11]{1,0}")
    check_unchanged("hoist-fused-bitcasts", text.replace(CONFIG, 'backend_config={"fusion_backend_config":'
                                                                 '{"kind":"__cudnn$fusion"}}'))
