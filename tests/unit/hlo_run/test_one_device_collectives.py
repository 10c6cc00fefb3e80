"""One device through the multi-device path (issue 16 item 4: "with one GPU, N = 1 runs through the
same path"). `hlo-codegen --keep-collectives` compiles a one-device module's collectives to
collective thunks over one-device groups instead of copies; hlo-run then runs it as an MPI job of
one rank, through MPI on the host and NCCL on cuda, so a machine with one GPU exercises the NCCL
calls several GPUs make. Checked here without a GPU: the thunks, the NCCL calls they become, the
cuda backend's choice of the rank launch, and the host run against the interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from codegen_testlib import FakeKernelBackend, compile_module

from hlo_common.hlo.parser import parse_module
from hlo_common.manifest.collective_thunks import CollectiveDoneThunk, CollectiveThunk
from hlo_common.manifest.thunks import CopyThunk, walk
from hlo_run import mpi_launch
from hlo_run.backends import Program
from hlo_run.cli import cli
from hlo_run.nccl_calls import Fold, nccl_calls

MODULE = """HloModule one
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
sub { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] subtract(a, b) }
ENTRY main {
  p = f32[8,4] parameter(0)
  ar = f32[8,4] all-reduce(p), replica_groups={}, to_apply=add
  rr = f32[8,4] all-reduce(p), replica_groups={{0}}, to_apply=sub
  ag = f32[8,4] all-gather(ar), replica_groups={}, dimensions={0}
  rs = f32[8,4] reduce-scatter(rr), replica_groups={}, dimensions={0}, to_apply=add
  aa = f32[8,4] all-to-all(ag), replica_groups={{0}}, dimensions={0}
  cp = f32[8,4] collective-permute(rs), source_target_pairs={{0,0}}
  cb = f32[8,4] collective-broadcast(aa), replica_groups={{0}}
  st = f32[8,4] all-reduce-start(cp), replica_groups={}, to_apply=add
  dn = f32[8,4] all-reduce-done(st)
  ROOT t = (f32[8,4], f32[8,4], f32[8,4], f32[8,4]) tuple(cb, dn, ag, rs)
}
"""
KINDS = ["all-reduce", "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
         "collective-broadcast", "all-reduce"]
BIN = Path(sys.executable).parent


def _compile(keep: bool, target: str = "host"):
    from hlo_codegen.compiler import CompileOptions

    options = CompileOptions(target=target, keep_collectives=keep)
    return compile_module(parse_module(MODULE), options, FakeKernelBackend()).manifest


def test_kept_collectives_are_thunks_over_one_device_groups_not_copies():
    kept = list(walk(_compile(True).thunks))
    collectives = [t for t in kept if isinstance(t, CollectiveThunk)]
    assert sorted(t.collective for t in collectives) == sorted(KINDS)
    assert {t.groups for t in collectives if t.collective != "collective-permute"} == {((0,),)}
    assert [t.pairs for t in collectives if t.collective == "collective-permute"] == [((0, 0),)]
    assert sum(isinstance(t, CollectiveDoneThunk) for t in kept) == 1
    assert sum(t.is_async for t in collectives) == 1
    plain = list(walk(_compile(False).thunks))  # the default: what one device does, as copies
    assert not any(isinstance(t, (CollectiveThunk, CollectiveDoneThunk)) for t in plain)
    assert sum(isinstance(t, CopyThunk) for t in plain) >= 7


def test_each_kept_collective_becomes_nccl_calls_on_a_one_rank_communicator():
    functions = []
    for thunk in (t for t in walk(_compile(True, "cuda").thunks) if isinstance(t, CollectiveThunk)):
        for step in nccl_calls(thunk, 0, 1):
            assert {c.comm for c in step.calls} == {(0,)}
            assert all(c.count == 32 or c.datatype == "ncclUint8" for c in step.calls)
            functions += [c.function for c in step.calls]
            functions += ["fold" for after in step.after if isinstance(after, Fold)]
    # the region (subtract) is gathered and folded in group order; all-to-all and the permute are
    # a send and a receive to the device itself
    assert sorted(set(functions)) == ["fold", "ncclAllGather", "ncclAllReduce", "ncclBroadcast",
                                      "ncclRecv", "ncclReduceScatter", "ncclSend"]
    assert functions.count("ncclAllReduce") == 2 and functions.count("ncclSend") == 2


def test_the_cuda_backend_runs_a_one_device_program_with_kept_collectives_on_ranks(monkeypatch):
    from hlo_run.backends import cuda

    seen = []
    monkeypatch.setattr(mpi_launch, "host_executable", lambda program, platform: seen.append(platform))
    monkeypatch.setattr("hlo_run.nccl_runtime.check_nccl", lambda: None)
    program = Program("one.hlo", parse_module(MODULE), MODULE, keep_collectives=True)
    assert program.devices == 1 and program.on_ranks
    cuda.CudaBackend().load(program)
    assert seen == ["cuda"]
    manifest = Program("one.json", manifest=_compile(True, "cuda"))  # from hlo-codegen --keep-collectives
    assert manifest.on_ranks and not Program("plain.json", manifest=_compile(False, "cuda")).on_ranks


@pytest.mark.skipif(not (BIN / "mpiexec").is_file(), reason="needs the mpi extra (mpiexec)")
def test_the_host_runs_kept_collectives_on_one_mpi_rank_and_matches_the_interpreter(tmp_path):
    path = tmp_path / "one.hlo"
    path.write_text(MODULE)
    result = CliRunner().invoke(cli, [str(path), "--platform", "host", "--keep-collectives", "--verbose"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "MPI rank 0 of 1" in result.output
    assert "Results on host and interpreter are close enough" in result.output
