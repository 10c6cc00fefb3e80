"""The cuda platform on several devices without a GPU (issue 16 item 4): it starts its ranks as
the host platform does (the same mpiexec command; the job names the platform), each rank takes the
GPU of its local rank, a thunk's slices (and chunks of them) resolve to the runtime's addresses,
and a Fold (a reduction NCCL has no operator for) gives the interpreter's values. Without NCCL the
run stops in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from codegen_testlib import compile_text

from hlo_common.errors import HloError
from hlo_common.hlo.parser import parse_module
from hlo_common.interpreter.evaluator import Evaluator
from hlo_common.manifest.collective_thunks import CollectiveThunk
from hlo_common.manifest.thunks import BufferSlice, walk
from hlo_run import mpi_launch, mpi_runtime
from hlo_run.nccl_calls import Fold, nccl_calls
from hlo_run.nccl_runtime import check_nccl, fold_in_group_order, local_gpu, slice_pointers

MODULE = """HloModule m, num_partitions=4
mx { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] maximum(a, b) }
sub { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] subtract(a, b) }
ENTRY e { p = f32[4,6] parameter(0)
 a = f32[4,6] all-reduce(p), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=sub
 ROOT t = f32[4,6] all-to-all(a), channel_id=2, replica_groups={{0,1},{2,3}}, dimensions={0} }
"""


def _thunks():
    result, _ = compile_text(MODULE)
    return result.manifest, [t for t in walk(result.manifest.thunks) if isinstance(t, CollectiveThunk)]


def test_the_cuda_job_is_launched_like_the_hosts(tmp_path, monkeypatch):
    monkeypatch.setattr(mpi_launch, "find_mpiexec", lambda: "/venv/bin/mpiexec")
    monkeypatch.setattr(mpi_launch, "check_mpi4py", lambda: None)
    manifest, _ = _thunks()
    host = mpi_launch.MpiLaunch(manifest, "m", 1, 4, platform="host")
    cuda = mpi_launch.MpiLaunch(manifest, "m", 1, 4, platform="cuda")
    assert cuda.command(tmp_path) == host.command(tmp_path)
    assert cuda.command(tmp_path)[:3] == ["/venv/bin/mpiexec", "-n", "4"]
    cuda._write_job(tmp_path, [[np.zeros((4, 6), np.float32)]] * 4)
    assert json.loads((tmp_path / "job.json").read_text())["platform"] == "cuda"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["args.0.pkl", "args.1.pkl", "args.2.pkl",
                                                           "args.3.pkl", "job.json", "manifest.json"]


def test_ranks_take_the_gpu_of_their_local_rank(monkeypatch):
    for var in ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "PMI_LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert [local_gpu(r, 8) for r in (0, 5, 9)] == [0, 5, 1]  # one machine: the world rank
    monkeypatch.setenv("MPI_LOCALRANKID", "3")  # rank 11 is the 4th process on its machine
    assert local_gpu(11, 8) == 3


def test_a_rank_of_an_unknown_platform_is_a_clean_error():
    with pytest.raises(HloError, match="platform tpu does not run on several devices"):
        mpi_runtime.rank_device("tpu", None, 1.0)


def test_slices_and_their_chunks_resolve_to_the_runtimes_addresses():
    _, (_, all_to_all) = _thunks()
    b = all_to_all.buffers[0]
    pointer = slice_pointers(all_to_all, [(5000, 9000)])
    assert pointer(b.source) == 5000 and pointer(b.destination) == 9000
    for step in nccl_calls(all_to_all, 1, 4):  # chunks: sub-slices of the two buffers
        for call in step.calls:
            for s in (call.send, call.recv):
                if s is not None:
                    base = 5000 - b.source.offset if s.allocation == b.source.allocation else 9000 - \
                        b.destination.offset
                    assert pointer(s) == base + s.offset
    with pytest.raises(HloError, match="not one of the thunk's buffers"):
        pointer(BufferSlice(b.source.allocation + 99, 0, 4))


def test_a_region_fold_is_the_interpreters_left_to_right_fold():
    manifest, (all_reduce, _) = _thunks()
    (step,) = nccl_calls(all_reduce, 2, 4)
    assert isinstance(step.after[0], Fold) and all_reduce.reduction == "region"  # subtract: no NCCL op
    members = [np.random.default_rng(d).standard_normal((4, 6)).astype(np.float32) for d in range(4)]
    module = parse_module(MODULE)
    sub = next(c for c in module.computations if c.name == "sub")
    evaluator = Evaluator(replica_id=0, partition_id=0)
    got = fold_in_group_order(members, "region", lambda a, b: evaluator.map_computation(sub, [a, b])[0])
    np.testing.assert_array_equal(got, ((members[0] - members[1]) - members[2]) - members[3])
    np.testing.assert_array_equal(fold_in_group_order(members, "max"), np.maximum.reduce(members))


def test_without_nccl_the_run_stops_in_one_line(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "nccl.core", None)  # an import of it fails
    with pytest.raises(HloError, match="NCCL, which is not installed: install the `gpu` extra"):
        check_nccl()
