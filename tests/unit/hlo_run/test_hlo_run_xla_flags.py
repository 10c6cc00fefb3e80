"""hlo-run takes run_hlo_module's flag spellings (hlo_run.xla_flags): --flag=value and --flag value,
booleans bare or true/false/1/0, platform names in any case, XLA debug options ignored with a warning."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hlo_run.cli import cli
from hlo_run.xla_flags import XlaFlagError, translate

ADD = "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT a = f32[4] add(p, p)\n}\n"


@pytest.mark.parametrize("value, ours", [("CUDA", "cuda"), ("gpu", "cuda"), ("Host", "host"), ("cpu", "host"),
                                         ("Interpreter", "interpreter"), ("INTERPRETER", "interpreter")])
def test_platform_names_any_case_both_forms(value, ours):
    assert translate([f"--platform={value}", "m.hlo"]) == ["--platform", ours, "m.hlo"]
    assert translate(["--platform", value, "m.hlo"]) == ["--platform", ours, "m.hlo"]


@pytest.mark.parametrize("value, ours", [("", "none"), ("default", "interpreter"),
                                         ("Interpreter", "interpreter"), ("CPU", "xla-cpu"),
                                         ("none", "none")])
def test_reference_platform(value, ours):
    assert translate([f"--reference_platform={value}"]) == ["--reference-platform", ours]


def test_values_and_booleans():
    argv = ["--abs_error_bound=0.1", "--rel_error_bound", "0.2", "--iterations=3", "--xla_dump_to", "d",
            "--print_literals", "--use_large_float_range=1", "--run_test_hlo_passes=false",
            "--run_reference_hlo_passes=true", "--input_format=hlo", "--input_module=m.hlo"]
    assert translate(argv) == ["--abs-error-bound", "0.1", "--rel-error-bound", "0.2", "--iterations=3",
                               "--dump-to", "d", "--print-literals", "--large-float-range", "--no-hlo-passes",
                               "--input-format", "hlo", "m.hlo"]


@pytest.mark.parametrize("spelling, on", [(["--print_literals=true"], True), (["--print_literals=0"], False),
                                          (["--print_literals", "false"], False),
                                          (["--print_literals", "1"], True),
                                          (["--print_literals=FALSE"], False)])
def test_boolean_values(spelling, on):
    assert translate(spelling + ["m.hlo"]) == (["--print-literals"] if on else []) + ["m.hlo"]


def test_run_test_hlo_passes_true_keeps_the_passes():
    assert translate(["--run_test_hlo_passes"]) == ["--hlo-passes"]
    assert translate(["--run_test_hlo_passes", "0"]) == ["--no-hlo-passes"]


def test_kebab_flags_pass_through_and_mix():
    argv = ["--platform", "host", "--abs-error-bound", "1", "--rel_error_bound=2", "-"]
    assert translate(argv) == ["--platform", "host", "--abs-error-bound", "1", "--rel-error-bound", "2", "-"]


def test_xla_debug_options_are_ignored_with_a_warning():
    warnings = []
    out = translate(["--xla_gpu_enable_triton_gemm=false", "--xla_cpu_use_thunk_runtime", "m.hlo"],
                    warn=warnings.append)
    assert out == ["m.hlo"]
    assert warnings == ["ignoring XLA debug option --xla_gpu_enable_triton_gemm (hlo-run does not read it)",
                        "ignoring XLA debug option --xla_cpu_use_thunk_runtime (hlo-run does not read it)"]


@pytest.mark.parametrize("argv, message", [
    (["--input_format=unoptimized_snapshot"],
     "--input_format=unoptimized_snapshot: expected hlo, pb, pbtxt, snapshot, stablehlo or mhlo"),
    (["--print_literals=maybe"], "--print_literals=maybe: expected true, false, 1 or 0"),
    (["--abs_error_bound"], "--abs_error_bound needs a value"),
])
def test_bad_xla_flag_values(argv, message):
    with pytest.raises(XlaFlagError, match=message.replace("(", r"\(")):
        translate(argv)


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_cli_hlo_text_read_as_pbtxt_is_one_line_exit_1(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(ADD)
    result = run(["--platform=Interpreter", "--input_format=pbtxt", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"hlo-run: error: {path}:1:")
    assert "not a text HloModuleProto" in result.stderr


def test_input_format_translates_to_hlo_run_s_flag():
    assert translate(["--input_format=snapshot", "s.pb"]) == ["--input-format", "snapshot", "s.pb"]


def test_cli_input_module_and_empty_reference(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(ADD)
    result = run(["--platform=Interpreter", f"--input_module={path}", "--reference_platform=",
                  "--print_literals"])
    assert result.exit_code == 0, result.stderr
    assert "** Result **" in result.stdout and "reference runner" not in result.stderr
    result = run(["--platform=Interpreter", "--reference_platform=default", str(path)])
    assert result.exit_code == 0 and "with reference runner interpreter" in result.stderr


def test_cli_gpu_means_cuda(tmp_path):
    from hlo_run.backends.cuda import CudaBackend

    reason = CudaBackend.unavailable_reason()
    if reason is None:
        pytest.skip("a GPU is usable here")
    path = tmp_path / "m.hlo"
    path.write_text(ADD)
    result = run(["--platform=gpu", str(path)])
    assert result.exit_code == 1 and "platform 'cuda' cannot run here" in result.stderr


def test_cli_unknown_platform_is_a_usage_error(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(ADD)
    assert run(["--platform=TPU", str(path)]).exit_code == 2
