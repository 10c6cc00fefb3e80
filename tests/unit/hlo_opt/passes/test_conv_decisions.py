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
    assert len(MODULES) >= 22
    for path in MODULES:
        assert path.with_name(path.name[:-4] + ".xla_gpu.hlo").exists(), path.name


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_decisions_equal_xla(path):
    ours, theirs = compare_decisions.compare(path)
    assert theirs, "XLA wrote no cuDNN call"
    assert ours == theirs


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
