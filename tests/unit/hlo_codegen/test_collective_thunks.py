"""hlo-codegen on several devices (issue 16 item 2): one manifest for the N devices, each collective
one CollectiveThunk with its groups resolved to device ids, its reduction, element type and
buffers; async pairs as Start / Done thunks; replica-id / partition-id as kReplicaId /
kPartitionId; thunk_sequence.txt lists them; manifests round-trip and are checked on load.

Expected groups are worked by hand from XLA's CollectiveOpGroupMode (device d = replica
d // num_partitions, partition d % num_partitions)."""

from __future__ import annotations

import json

import pytest
from codegen_testlib import compile_text

from hlo_codegen.thunks import thunk_sequence_to_string
from hlo_common.manifest.collective_thunks import CollectiveDoneThunk, CollectiveThunk, DeviceIdThunk
from hlo_common.manifest.manifest import ManifestError, body_digest, load_manifest
from hlo_common.manifest.thunks import walk

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"
REGIONS = ADD + (
    "mx { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] maximum(b, a) }\n"
    "sub { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] subtract(a, b) }\n"
    "orp { a = pred[] parameter(0) b = pred[] parameter(1) ROOT s = pred[] or(a, b) }\n")


def _collectives(text: str):
    result, _ = compile_text(text)
    return result, [t for t in walk(result.manifest.thunks)
                     if isinstance(t, (CollectiveThunk, CollectiveDoneThunk, DeviceIdThunk))]


def _one(header: str, body: str, params: str = "p = f32[4,8] parameter(0)"):
    _, thunks = _collectives(f"HloModule m, {header}\n{REGIONS}ENTRY e {{ {params}\n {body} }}")
    (thunk,) = thunks
    return thunk


@pytest.mark.parametrize("header, attrs, groups", [
    # no channel_id: cross-replica, groups of replica ids within each partition
    ("replica_count=2, num_partitions=2", "replica_groups={{0,1}}", ((0, 2), (1, 3))),
    ("replica_count=4", "replica_groups={}", ((0, 1, 2, 3),)),
    # channel_id: cross-replica-and-partition: the replicas' every partition
    ("replica_count=2, num_partitions=2", "channel_id=1, replica_groups={{0},{1}}", ((0, 1), (2, 3))),
    # flattened ids, in the order the group lists them
    ("num_partitions=4", "channel_id=1, replica_groups={{3,1},{0,2}}, use_global_device_ids=true",
     ((0, 2), (3, 1))),
    ("num_partitions=8", "channel_id=1, replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true",
     ((0, 2, 4, 6), (1, 3, 5, 7))),
    ("num_partitions=4", "channel_id=1, replica_groups=mesh['x'=2,'y'=2] {'x'}, use_global_device_ids=true",
     ((0, 2), (1, 3))),
])
def test_all_reduce_groups_are_resolved_to_device_ids(header, attrs, groups):
    t = _one(header, f"ROOT r = f32[4,8] all-reduce(p), {attrs}, to_apply=add")
    assert (t.kind, t.collective, t.groups, t.reduction, t.region) == ("kAllReduce", "all-reduce", groups,
                                                                      "sum", None)
    (b,) = t.buffers
    assert (b.element_type, b.source.size, b.destination.size) == ("f32", 128, 128)


@pytest.mark.parametrize("region, params, reduction", [
    ("mx", "p = s32[4,8] parameter(0)", "max"),  # operands swapped: still max
    ("orp", "p = pred[4,8] parameter(0)", "or"),
    ("sub", "p = f32[4,8] parameter(0)", "region"),  # not one of MPI's / NCCL's operators
])
def test_the_reduction_is_recognized_from_the_region(region, params, reduction):
    ty = params.split()[2]
    t = _one("num_partitions=2", f"ROOT r = {ty} all-reduce(p), channel_id=1, replica_groups={{{{0,1}}}}, "
                                 f"use_global_device_ids=true, to_apply={region}", params)
    assert t.reduction == reduction and t.region == (region if reduction == "region" else None)
    assert t.buffers[0].element_type == ty.split("[")[0]


def test_every_kind_and_the_async_pair_become_thunks_that_thunk_sequence_lists():
    text = ("HloModule m, num_partitions=4\n" + ADD + "ENTRY e { p = f32[4,8]{1,0} parameter(0)\n"
            " ag = f32[16,8]{1,0} all-gather(p), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, "
            "use_global_device_ids=true\n"
            " rs = f32[1,8]{1,0} reduce-scatter(p), channel_id=2, replica_groups={{0,1,2,3}}, "
            "dimensions={0}, use_global_device_ids=true, to_apply=add\n"
            " aa = f32[4,8]{1,0} all-to-all(p), channel_id=3, replica_groups={{0,1},{2,3}}, dimensions={0}\n"
            " cp = f32[4,8]{1,0} collective-permute(p), channel_id=4, source_target_pairs={{0,1},{1,0}}\n"
            " cb = f32[4,8]{1,0} collective-broadcast(p), channel_id=5, replica_groups={{1,0,3,2}}\n"
            " st = f32[4,8]{1,0} all-reduce-start(p), channel_id=6, replica_groups={}, to_apply=add\n"
            " dn = f32[4,8]{1,0} all-reduce-done(st)\n"
            " id = u32[] partition-id()\n"
            " ROOT t = (f32[16,8], f32[1,8], f32[4,8], f32[4,8], f32[4,8], f32[4,8], u32[]) "
            "tuple(ag, rs, aa, cp, cb, dn, id) }")
    result, thunks = _collectives(text)
    kinds = [t.kind for t in thunks]
    assert kinds == ["kAllGather", "kReduceScatter", "kAllToAll", "kCollectivePermute",
                     "kCollectiveBroadcast", "kAllReduceStart", "kAllReduceDone", "kPartitionId"]
    ag, rs, aa, cp, cb, st, dn, pid = thunks
    assert (ag.dimension, ag.buffers[0].destination.size, rs.dimension, rs.buffers[0].destination.size) == \
        (0, 512, 0, 32)
    assert aa.groups == ((0, 1), (2, 3)) and aa.reduction is None
    assert cp.pairs == ((0, 1), (1, 0)) and cp.groups == ()
    assert cb.groups == ((1, 0, 3, 2),)
    assert st.is_async and dn.start == st.profile_annotation == "st"
    assert (result.manifest.replica_count, result.manifest.num_partitions) == (1, 4)
    text = thunk_sequence_to_string(result.manifest.thunks)
    assert "kCollectivePermute" in text and "source_target_pairs={{0,1},{1,0}}" in text
    assert "replica_groups={{1,0,3,2}}" in text and "reduction=sum" in text and "start=st" in text


def test_one_device_keeps_copies():
    result, thunks = _collectives("HloModule m\n" + ADD + "ENTRY e { p = f32[4] parameter(0)\n"
                                  " ROOT r = f32[4] all-reduce(p), replica_groups={}, to_apply=add }")
    assert thunks == [] and result.manifest.replica_count * result.manifest.num_partitions == 1


def test_the_manifest_round_trips_and_refuses_bad_groups():
    result, _ = _collectives("HloModule m, num_partitions=2\n" + ADD + "ENTRY e { p = f32[4] parameter(0)\n"
                             " ROOT r = f32[4] all-reduce(p), channel_id=1, replica_groups={{0,1}}, "
                             "use_global_device_ids=true, to_apply=add }")
    data = result.manifest.to_bytes()
    again = load_manifest(data, "m.json")
    assert again.to_bytes() == data and again.num_partitions == 2
    body = json.loads(data)
    for bad, message in ((((0, 0),), "every device 0..N-1 once"), (((0, 1, 2),), "names device 2")):
        body["thunks"]["thunks"][0]["groups"] = [list(g) for g in bad]
        body["integrity"] = {"sha256": body_digest(body)}
        with pytest.raises(ManifestError, match=message):
            load_manifest(json.dumps(body), "m.json")


def test_the_cli_compiles_for_the_counts_it_is_given(tmp_path):
    from click.testing import CliRunner

    from hlo_codegen.cli import cli

    text = ("HloModule m\n" + ADD + "ENTRY e { p = f32[4] parameter(0)\n"
            " ROOT r = f32[4] all-reduce(p), channel_id=1, replica_groups={}, to_apply=add }")
    out = tmp_path / "m.json"
    result = CliRunner().invoke(cli, ["--target", "host", "--num-partitions", "2", "--num-replicas", "2",
                                      "-o", str(out)], input=text, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    manifest = load_manifest(out.read_bytes(), "m.json")
    (thunk,) = [t for t in walk(manifest.thunks) if isinstance(t, CollectiveThunk)]
    # channel_id without use_global_device_ids: cross-replica-and-partition over both replicas
    assert (manifest.replica_count, manifest.num_partitions, thunk.groups) == (2, 2, ((0, 1, 2, 3),))
    bad = CliRunner().invoke(cli, ["--target", "host", "--num-partitions", "3"],
                             input=text.replace("replica_groups={}", "replica_groups={{0,1},{2,3}}"),
                             catch_exceptions=False)
    assert bad.exit_code == 1 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "replica" in bad.stderr, bad.stderr
