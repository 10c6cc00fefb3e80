"""hlo-opt's cuDNN convolution decisions equal XLA:GPU's on every testdata/cudnn module: the same
`__cudnn$conv*` calls (target, window, dim_labels, groups, operand and result shapes with layouts,
activation and scales) as the checked-in `*.xla_gpu.hlo` files, which XLA:GPU wrote
(testdata/cudnn/make_modules.py). The comparison itself is testdata/cudnn/compare_decisions.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

CUDNN = Path(__file__).resolve().parents[4] / "testdata" / "cudnn"


def _compare_module():
    spec = importlib.util.spec_from_file_location("compare_decisions", CUDNN / "compare_decisions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


compare_decisions = _compare_module()
MODULES = compare_decisions.modules([])


def test_every_module_has_xla_output():
    assert len(MODULES) >= 32
    for path in MODULES:
        written = path.with_name(path.name[:-4] + ".xla_gpu.hlo").exists()
        assert written or compare_decisions.xla_refuses(path), path.name


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_decisions_equal_xla(path):
    ours, theirs = compare_decisions.compare(path)
    assert theirs or compare_decisions.xla_refuses(path), "XLA wrote no cuDNN call"
    assert ours == theirs


def test_a_convolution_xla_refuses_stays_ours():
    """int8_s32 (s8 x s8 -> s32): XLA:GPU fails the compile ("Can't lower one or more integer
    convolutions"); hlo-opt keeps the convolution as one of ours instead."""
    path = CUDNN / "int8_s32.hlo"
    assert "integer convolutions" in compare_decisions.xla_refuses(path)
    module = compare_decisions.ours(path.read_text(), str(path))
    assert compare_decisions.call_records(module) == []
    assert compare_decisions.kept_convolutions(module) == 1


def test_padding_and_int8_decisions():
    """What the padding and int8 modules decide (the records XLA's output agreed with above)."""
    def operands(name):
        (record,) = compare_decisions.compare(CUDNN / f"{name}.hlo")[0]
        return record[0], [s.split("{")[0] for s in record[4]], record[5].split("{")[0]

    assert operands("pad_f16_c3_32")[1] == ["f16[4,16,16,4]", "f16[32,3,3,4]"]  # 3 -> 4 for 32 outputs
    assert operands("pad_f16_c6_12_declined")[1] == ["f16[4,16,16,6]", "f16[12,3,3,6]"]  # filter 1.78x
    assert operands("pad_bf16_c6_12")[1] == ["bf16[4,16,16,6]", "bf16[12,3,3,6]"]  # bf16: never
    assert operands("int8_c6_s8")[1] == ["s8[4,16,16,8]", "s8[12,3,3,8]"]  # x32 would be 5.3x: x4
    target, ops, result = operands("int8_c24_side_s8")
    assert (target, ops[2], ops[3], result) == (
        "__cudnn$convBiasActivationForward", "f32[32]", "s8[4,16,16,32]", "(s8[4,16,16,32]")


def test_records_see_differences():
    """The comparison is not blind: a module without the rewrite has no records, and XLA's own
    calls carry the forward dim_labels and layouts they were compared on."""
    from hlo_common.hlo.parser import parse_module

    path = CUDNN / "grad_strided.hlo"
    plain = compare_decisions.call_records(parse_module(path.read_text(), str(path)))
    assert plain == []
    _, theirs = compare_decisions.compare(path)
    assert sorted(r[0] for r in theirs) == ["__cudnn$convBackwardFilter", "__cudnn$convBackwardInput",
                                            "__cudnn$convBiasActivationForward"]
    assert {r[2] for r in theirs} == {"b01f_o01i->b01f"}


# XLA:GPU refuses these corpus modules ("Can't lower one or more integer convolutions": s16
# convolutions); hlo-opt keeps their convolutions as its own and the numbers stay the original's.
REFUSED_CORPUS = ("tests_fuzz__rand_000060.hlo", "tests_fuzz__rand_000067.hlo")


@pytest.mark.parametrize("name", REFUSED_CORPUS)
def test_corpus_convolutions_xla_refuses_stay_ours(name):
    import corpus_lib

    from hlo_common.hlo.parser import parse_module
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_run.compare import compare_values
    from hlo_run.inputs import make_fake_arguments

    corpus_lib.require_corpus()
    text = (corpus_lib.CORPUS_DIR / name).read_text()
    module = compare_decisions.ours(text, name)
    assert compare_decisions.call_records(module) == []
    assert compare_decisions.kept_convolutions(module) == compare_decisions.kept_convolutions(
        parse_module(text, name)) >= 1
    args = make_fake_arguments(parse_module(text, name), 0)
    result = compare_values(evaluate(module, args), evaluate(parse_module(text, name), args))
    assert result.ok, result.one_line()  # integer results: exactly equal
