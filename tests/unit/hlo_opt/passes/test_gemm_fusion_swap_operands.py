"""GemmFusionSwapOperands ("gemm-fusion-swap-operands"): the decisions and rewrites of XLA's
gemm_fusion_swap_operands_test.cc, and the numbers of the swapped fusions against the interpreter
on the module as written."""

import pytest
from numerics_testlib import check_same_results
from pass_testlib import check_pass, check_unchanged

from hlo_opt.passes.gemm_fusion_swap_operands import has_code
from hlo_common.hlo.parser import parse_module


def _module(params: str, body: str, out: str) -> str:
    """A __triton_gemm fusion of `body` (its root last) over parameters `params` ("p0 = ...")."""
    names = [line.split("=")[0].strip() for line in params.strip().splitlines()]
    entry_params = "\n".join(f"  {line.strip()}" for line in params.strip().splitlines())
    return f"""HloModule m

fcomp {{
{entry_params}
{body}
}}

ENTRY main {{
{entry_params}
  ROOT fusion = {out} fusion({", ".join(names)}), kind=kCustom, calls=fcomp,
    backend_config={{"fusion_backend_config":{{"kind":"__triton_gemm"}}}}
}}
"""


def _batched(lhs: str, rhs: str, out: str, lhs_code: bool, rhs_code: bool) -> str:
    p0 = f"p0 = {lhs.replace('bf16', 's4') if lhs_code else lhs} parameter(0)"
    p1 = f"p1 = {rhs.replace('bf16', 's4') if rhs_code else rhs} parameter(1)"
    body = (f"  p0.c = {lhs} convert(p0)\n" if lhs_code else "") + \
        (f"  p1.c = {rhs} convert(p1)\n" if rhs_code else "") + \
        f"  ROOT dot = {out} dot({'p0.c' if lhs_code else 'p0'}, {'p1.c' if rhs_code else 'p1'}), " \
        "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}"
    return _module(f"{p0}\n{p1}", body, out)


SWAPPED = {
    # XLA: CodeGeneratingMovesToLhs
    "code_moves_to_lhs": _batched("bf16[64,768,320]{2,1,0}", "bf16[64,448,320]{2,1,0}",
                                  "bf16[64,768,448]{2,1,0}", False, True) + """
// CHECK: bf16[64,448,768]{1,2,0} dot(%p1.c, %p0), lhs_batch_dims={0}, lhs_contracting_dims={2},
// CHECK-SAME: rhs_batch_dims={0}, rhs_contracting_dims={2}
// CHECK-NEXT: ROOT {{.*}} bf16[64,768,448]{2,1,0} bitcast(
""",
    # XLA: CodeGeneratingMovesToLhsMultipleNoncontracting
    "multiple_noncontracting_root_bitcast": _module(
        "p0 = bf16[768,96,320]{2,1,0} parameter(0)\np1 = s4[448,320]{1,0} parameter(1)",
        "  p0.r = bf16[73728,320]{1,0} reshape(p0)\n  p1.c = bf16[448,320]{1,0} convert(p1)\n"
        "  dot = bf16[73728,448]{1,0} dot(p0.r, p1.c), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
        "  ROOT res = bf16[768,96,448]{2,1,0} bitcast(dot)", "bf16[768,96,448]{2,1,0}") + """
// CHECK: bf16[448,73728]{0,1} dot(
// CHECK-NEXT: bf16[73728,448]{1,0} bitcast(
""",
    # XLA: MultipleNoncontractingIsSwapped
    "multiple_noncontracting": _module(
        "p0 = bf16[768,96,320]{2,1,0} parameter(0)\np1 = s4[448,320]{1,0} parameter(1)",
        "  p1.c = bf16[448,320]{1,0} convert(p1)\n"
        "  ROOT dot = bf16[768,96,448]{2,1,0} dot(p0, p1.c), lhs_contracting_dims={2}, "
        "rhs_contracting_dims={1}",
        "bf16[768,96,448]{2,1,0}") + """
// CHECK: bf16[448,768,96]{0,2,1} dot(%p1.c, %p0)
""",
    # XLA: BothNonCodeGeneratingSwapSmallLhs
    "small_lhs": _batched("bf16[64,32,320]{2,1,0}", "bf16[64,448,320]{2,1,0}", "bf16[64,32,448]{2,1,0}",
                          False, False) + """
// CHECK: bf16[64,448,32]{1,2,0} dot(%p1, %p0)
// CHECK-NEXT: bf16[64,32,448]{2,1,0} bitcast(
""",
    # XLA: BothCodeGeneratingSwapSmallLhs
    "both_code_small_lhs": _batched("bf16[64,32,320]{2,1,0}", "bf16[64,448,320]{2,1,0}",
                                    "bf16[64,32,448]{2,1,0}", True, True) + """
// CHECK: bf16[64,448,32]{1,2,0} dot(%p1.c, %p0.c)
""",
    # XLA: MultipleParameterIsFine (a concatenate of two s8 weights, then a convert)
    "concatenated_weights": _module(
        "p0 = bf16[8,1536]{1,0} parameter(0)\np1 = s8[1536,1536]{1,0} parameter(1)\n"
        "p2 = s8[1536,1536]{1,0} parameter(2)",
        "  c1 = s8[1536,3072]{1,0} concatenate(p1, p2), dimensions={1}\n"
        "  c2 = bf16[1536,3072]{1,0} convert(c1)\n"
        "  ROOT dot = bf16[8,3072]{1,0} dot(p0, c2), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        "bf16[8,3072]{1,0}") + """
// CHECK: bf16[3072,8]{0,1} dot(%c2, %p0), lhs_contracting_dims={0}, rhs_contracting_dims={1}
""",
    # XLA: MultipleLhsNonContractingDims
    "degenerate_lhs_dims": _module(
        "p0 = bf16[4,8,2048,1,1]{4,3,2,1,0} parameter(0)\np1 = s8[2048,12288]{1,0} parameter(1)\n"
        "p2 = s8[2048,12288]{1,0} parameter(2)",
        "  c = s8[2048,24576]{1,0} concatenate(p1, p2), dimensions={1}\n"
        "  b = s8[24576,2048]{0,1} bitcast(c)\n  cv = bf16[24576,2048]{0,1} convert(b)\n"
        "  ROOT dot = bf16[4,8,1,1,24576]{4,3,2,1,0} dot(p0, cv), lhs_contracting_dims={2}, "
        "rhs_contracting_dims={1}", "bf16[4,8,1,1,24576]{4,3,2,1,0}") + """
// CHECK: bf16[24576,4,8,1,1]{0,4,3,2,1} dot(%cv, %p0), lhs_contracting_dims={1}, rhs_contracting_dims={2}
""",
}

UNCHANGED = {
    # XLA: DoNotSwapSmallRhsNoncontracting (the rhs computes but has only 32 free elements)
    "small_rhs": _batched("bf16[64,768,320]{2,1,0}", "bf16[64,32,320]{2,1,0}", "bf16[64,768,32]{2,1,0}",
                          False, True),
    # XLA: BothNonCodeGeneratingDoNotSwapIfBothSmall
    "both_small": _batched("bf16[64,32,320]{2,1,0}", "bf16[64,48,320]{2,1,0}", "bf16[64,32,48]{2,1,0}",
                           False, False),
    # the lhs computes: it is where wgmma wants the computing side already
    "code_on_lhs": _batched("bf16[64,768,320]{2,1,0}", "bf16[64,448,320]{2,1,0}", "bf16[64,768,448]{2,1,0}",
                            True, False),
}


@pytest.mark.parametrize("name", sorted(SWAPPED))
def test_xla_cases_are_swapped(name):
    module = check_pass("gemm-fusion-swap-operands", SWAPPED[name])
    (dot,) = [i for i in module.entry.root.fused_computation().instructions if i.opcode == "dot"]
    assert [u.opcode for u in dot.users] == ["bitcast"]
    assert module.entry.root.shape == parse_module(SWAPPED[name], "before").entry.root.shape


@pytest.mark.parametrize("name", sorted(UNCHANGED))
def test_xla_cases_stay(name):
    check_unchanged("gemm-fusion-swap-operands", UNCHANGED[name])


@pytest.mark.parametrize("name", ["code_moves_to_lhs", "multiple_noncontracting_root_bitcast",
                                  "multiple_noncontracting", "small_lhs"])
def test_swapped_fusions_compute_the_same(name):
    """The interpreter on the swapped fusion (the dot's bytes read through the bitcast) gives the
    unswapped fusion's numbers. Shapes are cut down from XLA's cases to keep the test quick."""
    small = SWAPPED[name].replace("768", "96").replace("448", "72").replace("320", "40").replace(
        "73728", "9216").replace("[64,", "[2,")
    module = check_pass("gemm-fusion-swap-operands", small.split("// CHECK")[0])
    check_same_results(small.split("// CHECK")[0], module)


def test_indexing_ops_generate_no_code():
    text = _module("p0 = bf16[4,8]{1,0} parameter(0)\np1 = f32[8,16]{1,0} parameter(1)",
                   "  t = bf16[8,4]{1,0} transpose(p0), dimensions={1,0}\n"
                   "  b = bf16[4,8]{1,0} bitcast(t)\n  c = bf16[8,16]{1,0} convert(p1)\n"
                   "  ROOT dot = bf16[4,16]{1,0} dot(b, c), lhs_contracting_dims={1}, "
                   "rhs_contracting_dims={0}",
                   "bf16[4,16]{1,0}")
    body = parse_module(text, "m").computations[0]
    dot = body.root
    assert not has_code(dot.operands[0]) and has_code(dot.operands[1])
