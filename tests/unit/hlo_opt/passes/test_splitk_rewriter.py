"""splitk-rewriter (passes/splitk_rewriter.py): XLA's split-K choice and rewrite. The choice is
XLA's cost model; the rewrite (K padded at its end, split into a batch dim, summed by a reduce,
converted back) must compute what the dot computes, checked on the interpreter."""

from __future__ import annotations

import pytest

from hlo_common.hlo.parser import parse_module
from hlo_opt.passes.splitk_rewriter import DotDimensions, SplitkRewriter, choose_split_k, split_dot
from numerics_testlib import check_same_results

H100_SMS = 132


@pytest.mark.parametrize("dims,split", [
    # the GEMMs of testdata/triton, where XLA:GPU (jaxlib 0.10.2, deviceless, H100) chose these
    # splits in its checked-in *.xla_gpu.hlo (test_gemm_fusion.py compares whole modules)
    (DotDimensions(1, 4, 4096, 4096, 16, 16, 32, 16), 8),       # skinny_bf16
    (DotDimensions(1, 512, 1024, 768, 16, 16, 32, 16), 2),      # bias_gelu_bf16
    (DotDimensions(1, 256, 256, 256, 8, 8, 32, 32), 4),         # matmul_s8
    (DotDimensions(1, 128, 128, 2048, 16, 16, 32, 16), 32),     # attention_bf16
    (DotDimensions(1, 4096, 4096, 4096, 16, 16, 32, 16), 1),    # many tiles: nothing to gain
    # one 64x64 tile, K of a million: 512 splits fill one wave of 4 small tiles per SM; 1024 would
    # save 3 % of compute but double the partials the reduction reads
    (DotDimensions(1, 64, 64, 1 << 20, 16, 16, 32, 16), 512),
])
def test_choice(dims, split):
    assert choose_split_k(dims, H100_SMS) == split


def test_older_gpus_weigh_the_reduction_more():
    dims = DotDimensions(1, 512, 1024, 768, 16, 16, 32, 16)
    assert choose_split_k(dims, H100_SMS) == 2
    # an A100's weights (partials' traffic 467.8 against 193.1 per byte): one split's reduction
    # costs more than the 2x compute it saves on 32 tiles of 108 SMs
    assert choose_split_k(dims, 108, (8, 0)) == 1


def _module(k: int, etype: str = "bf16", layout: str = "{1,0}") -> str:
    return f"""HloModule m
ENTRY e {{
  a = {etype}[24,{k}]{layout} parameter(0)
  b = {etype}[{k},16]{{1,0}} parameter(1)
  ROOT d = {etype}[24,16]{{1,0}} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""


@pytest.mark.parametrize("k,etype,layout", [(96, "bf16", "{1,0}"), (100, "f32", "{1,0}"),
                                            (100, "bf16", "{0,1}")])
def test_split_dot_computes_the_dot(k, etype, layout):
    text = _module(k, etype, layout)
    module = parse_module(text)
    dot = module.entry.root
    comp = module.entry
    out = split_dot(dot, 4, "f32")
    comp.replace_instruction(dot, out)
    ops = sorted(i.opcode for i in comp.instructions)
    align = 4 * 16 // (2 if etype == "bf16" else 4)  # split x 16 bytes of elements: 32 bf16, 16 f32
    padded = -(-k // align) * align
    assert ops.count("reduce") == 1 and ops.count("reshape") == 2
    assert ("convert" in ops) == (etype == "bf16") and ("pad" in ops) == (padded != k)
    (new_dot,) = [i for i in comp.instructions if i.opcode == "dot"]
    assert new_dot.shape.dims == (4, 24, 16) and new_dot.shape.element_type.name == "f32"
    lhs = new_dot.operands[0]
    assert lhs.shape.dims[1:] == (4, padded // 4)
    check_same_results(text, module)


def test_pass_leaves_big_and_s32_dots():
    module = parse_module(_module(4096).replace("[24,", "[4096,").replace("16]", "4096]"))
    assert not SplitkRewriter().run(module)
    s32 = parse_module(_module(64, "s32"))
    assert not SplitkRewriter().run(s32)
