"""The cuda platform's NCCL path without a GPU (issue 16 item 4): each collective thunk hlo-codegen
makes becomes the NCCL calls XLA:GPU's thunks make, with counts, ncclDataType_t, ncclRedOp_t,
peers and communicators worked out by hand from the module below and NCCL's API."""

from __future__ import annotations

import pytest
from codegen_testlib import compile_text

from hlo_common.errors import HloError
from hlo_common.manifest.collective_thunks import CollectiveThunk
from hlo_common.manifest.thunks import walk
from hlo_run.nccl_calls import (NCCL_OPS, NCCL_TYPES, Fold, Memset, communicators, groupings,
                                nccl_calls)

REGIONS = """add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
mx { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] maximum(a, b) }
andp { a = pred[] parameter(0) b = pred[] parameter(1) ROOT s = pred[] and(a, b) }
bor { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] or(a, b) }
addh { a = bf16[] parameter(0) b = bf16[] parameter(1) ROOT s = bf16[] add(a, b) }
"""


def _thunks(body: str, params: str, header: str = "num_partitions=4"):
    result, _ = compile_text(f"HloModule m, {header}\n{REGIONS}ENTRY e {{ {params}\n {body} }}")
    return [t for t in walk(result.manifest.thunks) if isinstance(t, CollectiveThunk)]


def _calls(body, params="p = f32[4,8]{1,0} parameter(0)", device=1, header="num_partitions=4"):
    (thunk,) = _thunks(body, params, header)
    return thunk, nccl_calls(thunk, device, 4)


def test_all_reduce_sum_of_f32_is_one_ncclallreduce_on_the_group():
    t, (step,) = _calls("ROOT r = f32[4,8] all-reduce(p), channel_id=1, replica_groups={{0,1},{2,3}}, "
                        "use_global_device_ids=true, to_apply=add")
    (call,) = step.calls
    b = t.buffers[0]
    assert (call.function, call.comm, call.count, call.datatype, call.op) == \
        ("ncclAllReduce", (0, 1), 32, "ncclFloat32", "ncclSum")
    assert (call.send, call.recv) == (b.source, b.destination) and not step.grouped
    assert (NCCL_TYPES[call.datatype], NCCL_OPS[call.op]) == (7, 0)  # nccl.h's numbering


@pytest.mark.parametrize("region, ty, datatype, op", [
    ("mx", "s32", "ncclInt32", "ncclMax"),
    ("andp", "pred", "ncclUint8", "ncclMin"),  # and on 0/1 bytes is their minimum
    ("addh", "bf16", "ncclBfloat16", "ncclSum"),
])
def test_reductions_map_to_nccl_types_and_ops(region, ty, datatype, op):
    _, (step,) = _calls(f"ROOT r = {ty}[6] all-reduce(p), channel_id=1, replica_groups={{}}, "
                        f"to_apply={region}", f"p = {ty}[6] parameter(0)")
    (call,) = step.calls
    assert (call.count, call.datatype, call.op, call.comm) == (6, datatype, op, (0, 1, 2, 3))


def test_what_nccl_cannot_reduce_is_gathered_then_folded():
    t, (step,) = _calls("ROOT r = s32[6] all-reduce(p), channel_id=1, replica_groups={{3,2,1,0}}, "
                        "use_global_device_ids=true, to_apply=bor", "p = s32[6] parameter(0)", device=2)
    (call,) = step.calls
    assert (call.function, call.comm, call.count, call.datatype) == ("ncclAllGather", (3, 2, 1, 0), 24,
                                                                     "ncclUint8")
    assert call.recv.size == 96 and step.after == (Fold(t.buffers[0].destination, 4, None),)


def test_all_gather_and_reduce_scatter_counts():
    t, (step,) = _calls("ROOT g = f32[16,8]{1,0} all-gather(p), channel_id=1, replica_groups={{0,1,2,3}}, "
                        "dimensions={0}, use_global_device_ids=true")
    assert step.calls[0].function == "ncclAllGather" and step.calls[0].count == 32  # the send count
    t, (step,) = _calls("ROOT s = f32[1,8]{1,0} reduce-scatter(p), channel_id=1, replica_groups={{0,1,2,3}}, "
                        "dimensions={0}, use_global_device_ids=true, to_apply=add")
    call = step.calls[0]
    assert (call.function, call.count, call.op) == ("ncclReduceScatter", 8, "ncclSum")  # the receive count


def test_all_to_all_is_a_grouped_send_and_recv_per_peer():
    t, (step,) = _calls("ROOT a = f32[4,8]{1,0} all-to-all(p), channel_id=1, replica_groups={{0,1},{2,3}}, "
                        "dimensions={0}", device=3)
    src, dst = t.buffers[0].source, t.buffers[0].destination
    assert step.grouped
    assert [(c.function, c.peer, c.count, c.comm) for c in step.calls] == [
        ("ncclSend", 0, 16, (2, 3)), ("ncclRecv", 0, 16, (2, 3)),
        ("ncclSend", 1, 16, (2, 3)), ("ncclRecv", 1, 16, (2, 3))]
    assert step.calls[2].send.offset == src.offset + 64 and step.calls[3].recv.offset == dst.offset + 64


def test_permute_sends_to_the_target_receives_from_the_source_and_zeros_the_rest():
    body = "ROOT c = f32[4,8]{1,0} collective-permute(p), channel_id=1, source_target_pairs={{0,1},{1,2}}"
    _, (step,) = _calls(body, device=1)
    assert [(c.function, c.peer, c.comm) for c in step.calls] == [("ncclSend", 2, (0, 1, 2, 3)),
                                                                  ("ncclRecv", 0, (0, 1, 2, 3))]
    t, (step,) = _calls(body, device=0)
    assert [(c.function, c.peer) for c in step.calls] == [("ncclSend", 1)]
    assert step.after == (Memset(t.buffers[0].destination),)


def test_broadcast_roots_at_the_groups_first_member_and_communicators_come_in_first_use_order():
    thunks = _thunks("b = f32[4,8]{1,0} collective-broadcast(p), channel_id=1, replica_groups={{1,0},{3,2}}\n"
                     " ROOT r = f32[4,8]{1,0} all-reduce(b), channel_id=2, replica_groups={{0,1,2,3}}, "
                     "use_global_device_ids=true, to_apply=add", "p = f32[4,8]{1,0} parameter(0)")
    (step,) = nccl_calls(thunks[0], 0)
    assert (step.calls[0].function, step.calls[0].root, step.calls[0].comm) == ("ncclBroadcast", 0, (1, 0))
    assert communicators(thunks, 2) == [(3, 2), (0, 1, 2, 3)]
    assert groupings(thunks, 4) == [((1, 0), (3, 2)), ((0, 1, 2, 3),)]


def test_a_minor_split_dimension_is_refused_in_one_line():
    (thunk,) = _thunks("ROOT g = f32[4,32]{1,0} all-gather(p), channel_id=1, replica_groups={{0,1,2,3}}, "
                       "dimensions={1}, use_global_device_ids=true", "p = f32[4,8]{1,0} parameter(0)")
    with pytest.raises(HloError, match="NCCL needs the dimension most major"):
        nccl_calls(thunk, 0)


def test_the_runner_makes_one_communicator_per_group_and_issues_the_calls(monkeypatch):
    """nccl_runner against stand-ins for nccl4py and MPI (no GPU here): communicators come from
    ncclCommInitRank with the group's unique id, the calls get the slices' pointers."""
    import sys
    import types

    from hlo_run.nccl_runner import NcclCollectives

    log = []
    bindings = types.SimpleNamespace(
        all_reduce=lambda *a: log.append(("all_reduce",) + a), group_start=lambda: log.append(("start",)),
        group_end=lambda: log.append(("end",)), send=lambda *a: log.append(("send",) + a),
        recv=lambda *a: log.append(("recv",) + a))

    class Communicator:
        @classmethod
        def init(cls, nranks, rank, uid):
            log.append(("init", nranks, rank, uid.raw))
            comm = cls()
            comm.ptr = 1000 + nranks
            return comm

    class UniqueId:
        def __init__(self, raw):
            self.raw = raw

        def __bytes__(self):
            return self.raw

        @staticmethod
        def from_bytes(b):
            return UniqueId(b)

    core = types.SimpleNamespace(Communicator=Communicator, UniqueId=UniqueId,
                                 get_unique_id=lambda: UniqueId(b"id-of-the-group"))
    nccl = types.ModuleType("nccl")
    nccl.bindings = types.SimpleNamespace(nccl=bindings)
    monkeypatch.setitem(sys.modules, "nccl", nccl)
    monkeypatch.setitem(sys.modules, "nccl.bindings", nccl.bindings)
    monkeypatch.setitem(sys.modules, "nccl.core", core)

    class World:  # device 1's view: it is rank 1 of each group it joins
        def Split(self, color, key):
            log.append(("split", color, key))
            return types.SimpleNamespace(Get_rank=lambda: key, bcast=lambda v, root: b"sent-by-rank-0",
                                         Free=lambda: None)

    result, _ = compile_text(f"HloModule m, num_partitions=4\n{REGIONS}ENTRY e {{ p = f32[8] parameter(0)\n"
                             " a = f32[8] all-reduce(p), channel_id=1, replica_groups={{0,1},{2,3}}, "
                             "use_global_device_ids=true, to_apply=add\n"
                             " ROOT c = f32[8] collective-permute(a), channel_id=2, "
                             "source_target_pairs={{0,1},{1,2}} }")
    manifest = result.manifest
    runner = NcclCollectives(World(), manifest, 1)
    assert [e for e in log if e[0] in ("split", "init")] == [
        ("split", 0, 1), ("init", 2, 1, b"sent-by-rank-0"),
        ("split", 0, 1), ("init", 4, 1, b"sent-by-rank-0")]
    log.clear()
    thunks = [t for t in walk(manifest.thunks) if isinstance(t, CollectiveThunk)]
    for t in thunks:
        runner.run(t, lambda s: 10_000 * (s.allocation + 1) + s.offset, 7, scratch=None, memset=None,
                   fold=None)
    ar, cp = thunks
    src, dst = ar.buffers[0].source, ar.buffers[0].destination
    assert log[0] == ("all_reduce", 10_000 * (src.allocation + 1) + src.offset,
                      10_000 * (dst.allocation + 1) + dst.offset, 8, 7, 0, 1002, 7)
    assert [e[0] for e in log[1:]] == ["start", "send", "recv", "end"]
    assert (log[2][3], log[2][4], log[3][3], log[3][4]) == (7, 2, 7, 0)  # f32 to device 2, from device 0
