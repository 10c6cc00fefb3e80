"""hlo-run on several devices: counts, the leading device axis of --inputs/--output, per-device
random arguments, the xla-cpu comparison, and the one-line refusals (issue 16 items 5 and 8)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from hlo_run.cli import cli

PSUM = """HloModule psum, num_partitions=4
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT c = f32[] add(a, b) }
ENTRY e {
  p = f32[2,3] parameter(0)
  s = f32[2,3] all-reduce(p), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=add
  i = u32[] partition-id()
  ROOT t = (f32[2,3], u32[]) tuple(s, i)
}
"""


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.fixture
def psum(tmp_path):
    path = tmp_path / "psum.hlo"
    path.write_text(PSUM)
    return path


def test_inputs_and_outputs_carry_a_leading_device_axis(tmp_path, psum):
    inputs, output = tmp_path / "in.npz", tmp_path / "out.npz"
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    np.savez(inputs, arg0=x)
    result = run(["--platform", "interpreter", "--inputs", str(inputs), "--output", str(output), str(psum)])
    assert result.exit_code == 0, result.stderr
    with np.load(output) as out:
        np.testing.assert_array_equal(out["out0"], np.stack([x[0] + x[1]] * 2 + [x[2] + x[3]] * 2))
        np.testing.assert_array_equal(out["out1"], np.arange(4, dtype=np.uint32))


def test_random_arguments_differ_per_device_and_repeat_per_seed(tmp_path, psum):
    outs = []
    for k in range(2):
        output = tmp_path / f"out{k}.npz"
        assert run(["--platform", "interpreter", "--seed", "5", "--output", str(output), str(psum)]).exit_code == 0
        with np.load(output) as out:
            outs.append(out["out0"])
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0][0], outs[0][2])  # the two groups summed different values


def test_every_device_is_compared_with_xla_cpu(psum):
    pytest.importorskip("jax")
    result = run(["--platform", "interpreter", "--reference-platform", "xla-cpu", "--print-literals", str(psum)])
    assert result.exit_code == 0, result.stderr
    assert "close enough" in result.stderr
    assert "(f32[4,2,3], u32[4])" in result.stdout


def test_run_hlo_module_spellings_override_the_header(tmp_path):
    path = tmp_path / "r.hlo"
    path.write_text(PSUM.replace("HloModule psum, num_partitions=4", "HloModule psum")
                    .replace("replica_groups={{0,1},{2,3}}", "replica_groups={}"))
    inputs, output = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, arg0=np.arange(18, dtype=np.float32).reshape(3, 2, 3))
    result = run(["--platform", "interpreter", "--num_partitions=3", "--inputs", str(inputs),
                  "--output", str(output), str(path)])
    assert result.exit_code == 0, result.stderr
    with np.load(output) as out:
        np.testing.assert_array_equal(out["out0"][1], np.arange(18).reshape(3, 2, 3).sum(0))


@pytest.mark.parametrize("args, text, message", [
    (["--platform", "host", "--max-devices", "2"], PSUM,
     "asks for 4 devices .* more than --max-devices 2"),
    (["--platform", "host", "--num-partitions", "8"], PSUM, "leave out device 4 of the module's 8"),
    (["--platform", "host", "--num-partitions", "2"], PSUM, "name device 2, but the module has 2"),
    (["--platform", "host"], PSUM.replace("{{0,1},{2,3}}", "{{0,1},{1,3}}"), "name device 1 twice"),
    (["--platform", "host"], PSUM.replace("{{0,1},{2,3}}", "{{0,1},{3}}"), "leave out device 2"),
    (["--platform", "host", "--find-first-mismatch"], PSUM, "--find-first-mismatch runs one device"),
    (["--platform", "interpreter", "--max-devices", "2"], PSUM, "asks for 4 devices .* more than --max-devices 2"),
    (["--platform", "interpreter", "--num-partitions", "128"], PSUM, "more than --max-devices 64"),
    (["--platform", "interpreter", "--num-partitions", "8"], PSUM, "leave out device 4 of the module's 8"),
    (["--platform", "interpreter", "--num-partitions", "2"], PSUM, "name device 2, but the module has 2"),
    (["--platform", "interpreter"], PSUM.replace("{{0,1},{2,3}}", "{{0,1},{1,3}}"), "name device 1 twice"),
    (["--platform", "interpreter"], PSUM.replace("{{0,1},{2,3}}", "{{0,1},{3}}"), "leave out device 2"),
])
def test_bad_device_counts_and_groups_are_one_line_errors_and_write_nothing(tmp_path, args, text, message):
    path, output = tmp_path / "m.hlo", tmp_path / "out.npz"
    path.write_text(text)
    result = run(args + ["--output", str(output), str(path)])
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    import re

    assert re.search(message, errors[0]), errors[0]
    assert not output.exists()


def test_host_on_several_devices_without_mpiexec_says_to_install_the_mpi_extra(tmp_path, psum, monkeypatch):
    import hlo_run.mpi_launch as mpi_launch

    bare = tmp_path / "bare" / "bin"
    bare.mkdir(parents=True)
    monkeypatch.setattr(mpi_launch.sys, "executable", str(bare / "python"))
    monkeypatch.setattr(mpi_launch.sys, "prefix", str(tmp_path / "bare"))
    for var in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    output = tmp_path / "out.npz"
    result = run(["--platform", "host", "--output", str(output), str(psum)])
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "mpiexec is not installed" in errors[0] and "install the `mpi` extra" in errors[0]
    assert not output.exists()
