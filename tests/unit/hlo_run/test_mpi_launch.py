"""The host platform's MPI plumbing that needs no MPI job: when hlo-run counts as one rank, where
it finds mpiexec, when a layout lets buffers go to MPI as they are, and the collective watchdog."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from hlo_common.manifest.manifest import parse_shape_text
from hlo_run import mpi_launch
from hlo_run.mpi_collectives import direct
from hlo_run.mpi_runtime import Watchdog

LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                 "SLURM_PROCID", "SLURM_NTASKS")


@pytest.mark.parametrize("env, expected", [
    ({}, False),
    ({"PMI_RANK": "3", "PMI_SIZE": "8"}, True),  # mpiexec (hydra)
    ({"PMI_RANK": "0", "PMI_SIZE": "1"}, False),  # a job of one: hlo-run launches its own ranks
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}, True),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, True),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, False),  # a one-task allocation: not a job of ranks
])
def test_under_mpi_reads_the_launchers_variables(monkeypatch, env, expected):
    for var in LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert mpi_launch.under_mpi() is expected


def test_mpiexec_is_the_one_beside_this_python(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    with pytest.raises(mpi_launch.MpiUnavailable, match=r"install the `mpi` extra"):
        mpi_launch.find_mpiexec()
    exe = bin_dir / "mpiexec"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert mpi_launch.find_mpiexec() == str(exe)


@pytest.mark.parametrize("src, dst, d, expected", [
    ("f32[2,8]{1,0}", "f32[8,8]{1,0}", 0, True),  # gather along the major dimension
    ("f32[8,2]{1,0}", "f32[8,8]{1,0}", 1, False),  # along the minor one: pieces interleave
    ("f32[8,2]{0,1}", "f32[8,8]{0,1}", 1, True),  # ... unless the layout makes it major
    ("f32[1,2,8]{2,1,0}", "f32[1,8,8]{2,1,0}", 1, True),  # a size-1 dimension above does not count
    ("f32[2,8]{0,1}", "f32[8,8]{1,0}", 0, False),  # layouts that differ
])
def test_direct_when_pieces_are_contiguous_in_both_layouts(src, dst, d, expected):
    assert direct(parse_shape_text(src, "s"), parse_shape_text(dst, "d"), d) is expected


def test_the_watchdog_fires_once_for_a_wait_past_its_deadline_and_never_when_disarmed():
    fired = []
    done = threading.Event()

    def expire(what):
        fired.append(what)
        done.set()

    dog = Watchdog(0.2, expire)
    dog.arm("quick")
    dog.disarm()
    time.sleep(0.4)
    assert fired == []
    start = time.monotonic()
    dog.arm("slow")
    assert done.wait(5)
    assert fired == ["slow"] and 0.2 <= time.monotonic() - start < 2
