"""The SPMD tier's programs with slices, pads, concatenates, loops, gathers, scatters and
convolutions through the tools: `hlo-opt --num-partitions N` runs its whole gpu pipeline on the
partitioned program (a verifier failure is exit 1), and `hlo-run` takes jax's global arguments,
runs the partitioned program on N devices and gives XLA:CPU's global results."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "testdata" / "spmd"
BIN = Path(sys.executable).parent

KINDS = ["roll_rows", "pad_rows", "concat_rows", "dynamic_slice_cols", "random_rows", "scan_carry",
         "embedding_vocab", "scatter_add_rows", "conv_spatial", "cond_rows", "scan_split_inputs",
         "maxpool_rows", "embedding_2d", "kv_cache"]


def _tool(tool: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / tool), *args], capture_output=True, text=True, timeout=300)


def test_hlo_opt_gpu_pipeline_takes_every_partitioned_kind(tmp_path):
    for kind in KINDS:
        out = tmp_path / f"{kind}.hlo"
        proc = _tool("hlo-opt", "--num-partitions", "4", str(DATA / f"{kind}_n4.hlo"), "-o", str(out))
        assert proc.returncode == 0, f"{kind}: {proc.stderr[-2000:]}"
        assert "num_partitions=4" in out.read_text().splitlines()[0]


@pytest.mark.parametrize("name", ["scan_carry_n4", "random_rows_n4", "embedding_vocab_n2", "conv_spatial_n4"])
def test_hlo_run_interpreter_global_arrays(name, tmp_path):
    data = np.load(DATA / f"{name}.npz")
    inputs, output = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **{k: data[k] for k in data.files if k.startswith("arg")})
    n = name.rsplit("_n", 1)[1]
    proc = _tool("hlo-run", str(DATA / f"{name}.hlo"), "--platform", "interpreter", "--num-partitions", n,
                 "--inputs", str(inputs), "--output", str(output))
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(output) as got:
        for k in (k for k in data.files if k.startswith("out")):
            np.testing.assert_allclose(got[k], data[k], rtol=1e-5, atol=1e-5, err_msg=k)


@pytest.mark.skipif(not (BIN / "mpiexec").is_file(), reason="needs the mpi extra (mpiexec)")
@pytest.mark.parametrize("name", ["scan_carry_n4", "roll_rows_n4", "conv_spatial_n4", "embedding_vocab_n4"])
def test_hlo_run_host_over_mpi_global_arrays(name, tmp_path):
    """The partitioned program compiled for the host and run on 4 MPI ranks (hlo-run also checks
    it against its default reference, the interpreter)."""
    data = np.load(DATA / f"{name}.npz")
    inputs, output = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **{k: data[k] for k in data.files if k.startswith("arg")})
    proc = _tool("hlo-run", str(DATA / f"{name}.hlo"), "--platform", "host", "--num-partitions", "4",
                 "--inputs", str(inputs), "--output", str(output))
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(output) as got:
        for k in (k for k in data.files if k.startswith("out")):
            np.testing.assert_allclose(got[k], data[k], rtol=1e-5, atol=1e-5, err_msg=k)
