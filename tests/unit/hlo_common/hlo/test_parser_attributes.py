"""The parser refuses unknown attributes and missing required ones at FILE:LINE:COL, as XLA's
does (`xla/hlo/parser/hlo_parser.cc`; issue 22 item 7). A typo `typ=TOTALORDER` was kept as text
and ignored, so the compare ran with the default order and gave other results, exit 0; a scalar
broadcast without `dimensions=` reached algsimp, which died with KeyError."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from hlo_common.errors import HloParseError
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.parser_attr_rules import COMMON, attribute_rules
from hlo_common.hlo.printer import print_module

COMPARE = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = pred[4] compare(p, p), direction=EQ, ATTR
}
"""


def _error(text: str) -> str:
    with pytest.raises(HloParseError) as info:
        parse_module(text, "m.hlo")
    return str(info.value).splitlines()[0]


def test_typo_in_compare_type_is_refused_with_its_place():
    assert _error(COMPARE.replace("ATTR", "typ=TOTALORDER")) == (
        "m.hlo:4:49: unexpected attribute 'typ' (compare takes direction, type and the common "
        "attributes); did you mean 'type'?")


def test_common_attributes_are_known_to_every_opcode():
    text = COMPARE.replace("ATTR", 'type=TOTALORDER, metadata={op_name="x"}, frontend_attributes={a="b"}, '
                                   'sharding={replicated}, backend_config="{}"')
    assert parse_module(text).entry.root.attrs["type"] is not None


@pytest.mark.parametrize("line, message", [
    ("ROOT b = f32[2,4] broadcast(p)", "4:33: attribute 'dimensions' is expected but not seen"),
    ("ROOT c = pred[2] compare(p, p)", "4:33: attribute 'direction' is expected but not seen"),
    ("ROOT r = f32[2] reverse(p)", "4:29: attribute 'dimensions' is expected but not seen"),
    ("ROOT s = f32[1] slice(p)", "4:27: attribute 'slice' is expected but not seen"),
    ("ROOT t = f32[2] transpose(p)", "4:31: attribute 'dimensions' is expected but not seen"),
    ("ROOT i = f32[2] iota()", "4:25: attribute 'iota_dimension' is expected but not seen"),
    ("ROOT n = f32[2] negate(p), dimensions={0}", "4:30: unexpected attribute 'dimensions' (negate takes "
                                                "only the common attributes)"),
    ("ROOT n = f32[2] exponential(p), result_accuracy={tolerance={atol=0,rtol=0,ulps=1}}, kind=kLoop",
     "4:87: unexpected attribute 'kind' (exponential takes result_accuracy and the common attributes)"),
    ("ROOT n = f32[2] add(p, p), to_apply=x", "4:30: unexpected attribute 'to_apply'"),
])
def test_unknown_and_missing_attributes(line, message):
    text = f"HloModule m\nENTRY e {{\n  p = f32[2] parameter(0)\n  {line}\n}}\n"
    assert _error(text).startswith(f"m.hlo:{message}")


def test_nested_operand_instructions_need_their_attributes_too():
    text = ("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n"
            "  ROOT a = f32[2] add(f32[2] reverse(p), p)\n}\n")
    assert _error(text).startswith("m.hlo:4:40: attribute 'dimensions' is expected but not seen")


def test_scalar_broadcast_may_leave_out_its_dimensions():
    # XLA's parser fills in {} for a scalar operand; hlo-opt used to die in algsimp (KeyError)
    text = "HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT b = f32[4] broadcast(p)\n}\n"
    m = parse_module(text)
    assert m.entry.root.attrs["dimensions"] == ()
    assert "broadcast(%p), dimensions={}" in print_module(m)


def test_conditional_branches_depend_on_the_index_type():
    branches = ("b0 {\n  ROOT x = f32[] parameter(0)\n}\n\n"
                "b1 {\n  ROOT y = f32[] parameter(0)\n}\n\n")
    head = "HloModule m\n\n" + branches + "ENTRY e {\n  x = f32[] parameter(0)\n"
    pred = head + "  i = pred[] parameter(1)\n  ROOT c = f32[] conditional(i, x, x), ATTRS\n}\n"
    assert parse_module(pred.replace("ATTRS", "true_computation=b0, false_computation=b1"))
    assert _error(pred.replace("ATTRS", "branch_computations={b0, b1}")).startswith(
        "m.hlo:14:40: unexpected attribute 'branch_computations' (conditional takes false_computation, "
        "true_computation and the common attributes)")
    s32 = pred.replace("pred[]", "s32[]")
    assert parse_module(s32.replace("ATTRS", "branch_computations={b0, b1}"))
    assert _error(s32.replace("ATTRS", "true_computation=b0, false_computation=b1")).startswith(
        "m.hlo:14:40: unexpected attribute 'true_computation'")
    assert _error(s32.replace(", ATTRS", "")) == (
        "m.hlo:14:38: attribute 'branch_computations' is expected but not seen (conditional requires "
        "branch_computations)")


def test_async_sugar_takes_the_wrapped_ops_attributes():
    text = """HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  s = ((f32[2]), f32[2], s32[]) custom-call-start(p), custom_call_target="foo"
  ROOT d = f32[2] custom-call-done(s)
}
"""
    assert parse_module(text)
    assert _error(text.replace('custom_call_target="foo"', 'custom_call_targe="foo"')).startswith(
        "m.hlo:4:55: unexpected attribute 'custom_call_targe'")
    assert attribute_rules("async-start", "custom-call-start")[0] == {"custom_call_target"}
    done = attribute_rules("async-done", "custom-call-done")
    assert done == (frozenset(), COMMON | {"async_execution_thread"})


def test_hlo_opt_refuses_the_typo_instead_of_changing_results(tmp_path):
    from hlo_opt.cli import hlo_opt_command

    path = tmp_path / "m.hlo"
    path.write_text(COMPARE.replace("ATTR", "typ=TOTALORDER"))
    result = CliRunner().invoke(hlo_opt_command, [str(path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"hlo-opt: error: {path}:4:49: unexpected attribute 'typ'")
    assert "Traceback" not in result.stderr


def test_hlo_run_scalar_broadcast_without_dimensions_runs(tmp_path):
    from hlo_run.cli import cli

    path = tmp_path / "m.hlo"
    path.write_text("HloModule m\nENTRY e {\n  p = f32[] constant(2)\n  ROOT b = f32[3] broadcast(p)\n}\n")
    result = CliRunner().invoke(cli, ["--platform", "host", "--print-literals", str(path)])
    assert result.exit_code == 0, result.stderr
    assert "f32[3] {2, 2, 2}" in result.stdout
    assert np.float32(2) == 2
