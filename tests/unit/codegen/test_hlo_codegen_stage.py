"""`hlo-codegen --stage`: one stage of the compilation on stdout (XLA's `hlo-opt --stage=`), the same
text `--dump-to` writes for it, a fusion's kernels alone with `--fusion`, and clean usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hlo_codegen.cli import cli

SOFTMAX = Path(__file__).resolve().parents[3] / "testdata" / "softmax.hlo"
TWO_KERNELS = """HloModule two
ENTRY e { p = f32[64,32] parameter(0) t = f32[32,64] transpose(p), dimensions={1,0}
  ROOT n = f32[32,64] negate(t) }"""


def run(args, stdin=None):
    return CliRunner().invoke(cli, ["--no-cache"] + args, input=stdin, catch_exceptions=False)


def _dumps(tmp_path: Path, target: str, text: str) -> dict[str, str]:
    src = tmp_path / "m.hlo"
    src.write_text(text)
    result = run(["--target", target, "--dump-to", str(tmp_path / "d"), "-o", str(tmp_path / "m.json"),
                  str(src)])
    assert result.exit_code == 0, result.stderr
    return {p.name: p.read_text() for p in (tmp_path / "d").iterdir()}


@pytest.mark.parametrize("stage,suffix", [("hlo", "gpu_after_optimizations.txt"),
                                          ("buffer-assignment", "-buffer-assignment.txt"),
                                          ("thunks", "thunk_sequence.txt")])
def test_module_stages_print_what_the_dumps_hold(tmp_path, stage, suffix):
    dumps = _dumps(tmp_path, "cuda", SOFTMAX.read_text())
    want = next(text for name, text in dumps.items()
                if name.endswith(suffix) and ".codegen-prepare." not in name)
    result = run(["--stage", stage, str(SOFTMAX)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == want


@pytest.mark.parametrize("target,stage,suffix", [
    ("cuda", "ptx", "ptx"), ("cuda", "llvm", "ll"), ("host", "llvm", "ll"),
    ("host", "kernel-ir", "kernel_ir.txt")])
def test_one_fusion_prints_bare_as_its_dump(tmp_path, target, stage, suffix):
    dumps = _dumps(tmp_path, target, TWO_KERNELS)
    kernels = sorted(name.split(".")[2] for name in dumps if name.endswith("." + suffix))
    assert len(kernels) == 2
    for kernel in kernels:
        result = run(["--target", target, "--stage", stage, "--fusion", kernel], stdin=TWO_KERNELS)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumps[f"module_0000.two.{kernel}.{suffix}"]
    whole = run(["--target", target, "--stage", stage], stdin=TWO_KERNELS).stdout
    comment = ";" if stage == "llvm" else "//"
    headers = [line.split()[2] for line in whole.splitlines() if line.startswith(f"{comment} kernel ")]
    thunks = run(["--target", target, "--stage", "thunks"], stdin=TWO_KERNELS).stdout
    launched = [line.split("kernel=")[1].split(",")[0] for line in thunks.splitlines()]
    assert headers == launched  # each kernel once, in launch order
    assert all(dumps[f"module_0000.two.{k}.{suffix}"] in whole for k in kernels)


def test_stage_errors(tmp_path):
    out = tmp_path / "out.txt"
    result = run(["--stage", "ptx", "--fusion", "nothing_here", "-o", str(out)], stdin=TWO_KERNELS)
    assert result.exit_code == 1 and not out.exists()
    assert result.stderr.count("\n") == 1 and "no kernel of 'nothing_here'" in result.stderr
    result = run(["--fusion", "x"], stdin=TWO_KERNELS)
    assert result.exit_code == 2 and "--fusion selects kernels" in result.stderr
    result = run(["--target", "host", "--stage", "ptx"], stdin=TWO_KERNELS)
    assert result.exit_code == 2 and "no PTX" in result.stderr
