"""The cuda platform's NCCL path on a real GPU (issue 16 item 4): with one GPU a module runs on one
device through the path several GPUs take (`--keep-collectives`: collective thunks, one MPI rank,
a one-rank NCCL communicator), every collective kind against the interpreter. Marked `gpu`: skipped
(with the reason) where no GPU, NCCL's bindings or mpiexec are usable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlo_run.cli import cli
from test_one_device_collectives import MODULE

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def gpu_and_nccl():
    from hlo_common.errors import HloError
    from hlo_run.backends.cuda import CudaBackend
    from hlo_run.nccl_runtime import check_nccl

    reason = CudaBackend.unavailable_reason()
    if reason is not None:
        pytest.skip(f"no usable GPU: {reason}")
    try:
        check_nccl()
    except HloError as exc:
        pytest.skip(exc.one_line())
    if not (Path(sys.executable).parent / "mpiexec").is_file():
        pytest.skip("needs the mpi extra (mpiexec)")


def test_every_collective_runs_through_nccl_on_one_gpu(tmp_path):
    path = tmp_path / "one.hlo"
    path.write_text(MODULE)
    result = CliRunner().invoke(cli, [str(path), "--platform", "cuda", "--keep-collectives", "--verbose"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "MPI rank 0 of 1" in result.output
    assert "Results on cuda and interpreter are close enough" in result.output
