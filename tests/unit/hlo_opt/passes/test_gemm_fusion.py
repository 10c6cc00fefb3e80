"""hlo-opt's Triton GEMM fusions (passes/gemm_fusion.py, "triton-gemm-rewriter") against XLA:GPU's
on the testdata/triton modules: which dots become `__triton_nested_gemm_fusion` fusions and which
stay cuBLAS calls or loop fusions, and which ops each fusion takes, as the checked-in
`*.xla_gpu.hlo` files (jaxlib 0.10's deviceless XLA:GPU for an H100, testdata/triton/
make_modules.py) have them. The comparison is testdata/triton/compare_decisions.py."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from hlo_common.gpu.device import A100, H100
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo_pass.pipeline import RunOptions
from hlo_opt.pipelines import build_gpu_pipeline

TRITON = Path(__file__).resolve().parents[4] / "testdata" / "triton"


def _compare_module():
    spec = importlib.util.spec_from_file_location("triton_compare_decisions", TRITON / "compare_decisions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


compare_decisions = _compare_module()
MODULES = sorted(p for p in TRITON.glob("*.hlo") if not p.name.endswith(".xla_gpu.hlo"))
# dot-strength-reduction (XLA's and ours) makes this matrix-vector dot a reduce: no GEMM left.
NOT_A_GEMM_IN_XLA = {"matvec_bf16"}


def optimized(name: str, **options):
    path = TRITON / f"{name}.hlo"
    module = parse_module(path.read_text(), path.name)
    build_gpu_pipeline().run_with(module, RunOptions(**options))
    return module


def gemm_fusions(module):
    return [i for i in module.entry.instructions if i.opcode == "fusion"
            and compare_decisions._kind(i) == "__triton_nested_gemm_fusion"]


def test_every_module_has_xla_output():
    assert len(MODULES) >= 24
    for path in MODULES:
        assert path.with_name(path.name[:-4] + ".xla_gpu.hlo").exists(), path.name


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_decisions_equal_xla(path):
    """Backend, M, N, K, the ops fused with the dot and the split-k factor, as XLA's."""
    ours, theirs = compare_decisions.compare(path, compare_decisions._xla_path(path, None), True)
    if path.stem in NOT_A_GEMM_IN_XLA:
        assert theirs == [] and ours == []
        return
    assert theirs, "XLA wrote no dot"
    assert ours == theirs


def test_int8_weight_convert_is_fused_with_xlas_deviceless_config():
    (fusion,) = gemm_fusions(optimized("int8_bf16"))
    body = fusion.fused_computation()
    converts = [i for i in body.instructions if i.opcode == "convert"]
    assert [(c.operands[0].shape.element_type.name, c.shape.element_type.name) for c in converts] == \
        [("s8", "bf16")]
    assert [o.shape.element_type.name for o in fusion.operands] == ["bf16", "s8"]
    cfg = fusion.backend_config_data["fusion_backend_config"]["block_level_fusion_config"]
    (theirs,) = gemm_fusions(parse_module((TRITON / "int8_bf16.xla_gpu.hlo").read_text(), "int8_bf16.xla_gpu"))
    xla_tile = theirs.backend_config_data["fusion_backend_config"]["block_level_fusion_config"][
        "output_tiles"][0]["sizes"]
    # split-k makes the result [split, M, N]: a tile of 1 on the split dim, XLA's default 16 x 8 on
    # the dot's M x N; gemm-fusion-swap-operands swapped the dot's operands (as XLA's
    # GemmFusionSwapOperands), so the root's M x N is tiled 8 x 16.
    assert xla_tile == ["1", "8", "16"]
    assert cfg["output_tiles"] == [{"sizes": xla_tile}]
    assert [o.shape.dims for o in fusion.operands] == [(256, 8, 128), (8, 128, 512)]  # XLA's parameters
    assert cfg["num_warps"] == "2" and cfg["num_stages"] == 1
    (dot,) = [i for i in body.instructions if i.opcode == "dot"]
    assert dot.backend_config_data == {"sizes": ["16"]}
    assert fusion.name.startswith("gemm_fusion_") and fusion.attrs["kind"] == "kCustom"


def test_bias_add_epilogue_is_fused_and_gelu_is_not():
    first, _ = sorted(gemm_fusions(optimized("mlp_bf16")), key=lambda f: f.shape.dims[-1], reverse=True)
    ops = sorted(i.opcode for i in first.fused_computation().instructions if i.opcode != "parameter")
    assert ops == ["add", "broadcast", "dot"]  # the add has several users: GELU stays outside


@pytest.mark.parametrize("options", [{"triton_gemm": False},
                                     {"device": replace(H100, compute_capability_major=7)}],
                         ids=["flag_off", "volta"])
def test_dots_stay_on_cublas(options):
    module = optimized("int8_bf16", **options)
    assert gemm_fusions(module) == []
    targets = [i.attrs.get("custom_call_target") for c in module.computations for i in c.instructions
               if i.opcode == "custom-call"]
    assert targets == ["__cublas$lt$matmul"]


def test_ampere_fuses_too():
    assert len(gemm_fusions(optimized("int8_bf16", device=A100))) == 1


def test_cli_flag_keeps_cublas(tmp_path):
    from click.testing import CliRunner
    from hlo_opt.cli import hlo_opt_command

    out = tmp_path / "o.hlo"
    result = CliRunner().invoke(hlo_opt_command, [str(TRITON / "int8_bf16.hlo"), "-o", str(out),
                                                  "--xla_gpu_enable_triton_gemm=false"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "__cublas$lt$matmul" in text and "__triton" not in text
    result = CliRunner().invoke(hlo_opt_command, [str(TRITON / "int8_bf16.hlo"), "-o", str(out)])
    assert result.exit_code == 0 and "__triton_nested_gemm_fusion" in out.read_text()


# gemm-fusion-swap-operands (XLA's GemmFusionSwapOperands) swaps these dots' operands.
SWAPPED_IN_XLA = {"f8_bf16", "int8_bf16", "skinny_bf16"}


def test_swapped_modules_are_xlas_swaps():
    """The fusions swapped are exactly those XLA swapped (a bitcast root over the dot)."""
    swapped = {p.stem for p in MODULES if p.stem not in NOT_A_GEMM_IN_XLA and any(
        f.fused_computation().root.opcode == "bitcast" for f in gemm_fusions(optimized(p.stem)))}
    assert swapped == SWAPPED_IN_XLA


@pytest.mark.parametrize("path", [p for p in MODULES if p.stem not in NOT_A_GEMM_IN_XLA],
                         ids=lambda p: p.stem)
def test_fusion_computations_print_as_xlas(path):
    """Each GEMM fusion's computation in XLA's canonical print (its autotune key: instruction
    order, parameter numbers, shapes, layouts, attributes) equals the one in XLA's output."""
    from hlo_codegen.triton_gemm.autotune import canonical_text

    ours = [canonical_text(f.fused_computation()) for f in gemm_fusions(optimized(path.stem))]
    xla_path = compare_decisions._xla_path(path, None)
    theirs = [canonical_text(f.fused_computation())
              for f in gemm_fusions(parse_module(xla_path.read_text(), xla_path.name))]
    assert theirs and ours == theirs
