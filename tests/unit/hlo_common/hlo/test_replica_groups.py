"""Replica groups in every form XLA prints (hlo.replica_groups): parsed, printed back byte for
byte as XLA itself prints them, resolved to the devices XLA:CPU groups, and checked by the verifier."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.errors import HloError
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module

FORMS = [
    "{}",
    "{{0,1},{2,3},{4,5},{6,7}}",
    "{{0,1,2,3,4,5,6,7}}",
    "[2,4]<=[8]",
    "[4,2]<=[2,4]T(1,0)",
    "[2,4]<=[2,2,2]T(2,1,0)",
    "mesh['axis_0'=4,'axis_1'=2] {'axis_0'}",
    "mesh['axis_0'=4,'axis_1'=2], device_ids=([2,2,2]T(0,2,1)) {'axis_0'}",
    "mesh['a'=4,'b'=2], device_ids=([4,2]T(1,0)) {'a'}",
    "mesh['a'=2,'b'=4], device_ids=(0,2,4,6,1,3,5,7) {'b'}",
    "mesh['a'=8] {'a':(2)2}",
    "mesh['a'=8] {'a':(4)2,'a':(1)2}",
    "mesh['a'=4,'b'=2] {'b','a'}",
]


def module_text(groups: str, op: str = "all-gather") -> str:
    return f"""HloModule m, num_partitions=8
ENTRY e {{
  p = f32[1] parameter(0)
  ROOT g = f32[8] {op}(p), channel_id=1, replica_groups={groups}, dimensions={{0}}, use_global_device_ids=true
}}
"""


def _sized(groups: str) -> str:
    """The module with the all-gather's result sized to the groups."""
    resolved = parse_module(module_text(groups)).entry.root.attrs["replica_groups"].groups()
    size = len(resolved[0]) if resolved else 8
    return module_text(groups).replace("ROOT g = f32[8]", f"ROOT g = f32[{size}]")


@pytest.mark.parametrize("groups", FORMS)
def test_printed_back_byte_for_byte_as_xla_prints_it(groups):
    text = _sized(groups)
    printed = print_module(parse_module(text))
    assert f"replica_groups={groups}," in printed
    pytest.importorskip("jax")
    from jax._src.lib import xla_client as xc

    xla_printed = xc.hlo.hlo_module_from_text(text).to_string()
    assert f"replica_groups={groups}," in xla_printed


@pytest.mark.parametrize("groups", [g for g in FORMS if g != "{}" and "device_ids" not in g])
def test_devices_of_each_group_are_the_ones_xla_cpu_gathers_from(groups):
    """Every device gathers the ids of its group: XLA:CPU's order is the group's order. (Meshes
    that name their device ids are not run here: jaxlib's conversion into XLA:CPU drops the ids,
    so hlo-run hands XLA their explicit lists; see the next test.)"""
    pytest.importorskip("jax")
    from hlo_common.interpreter.devices import run_devices
    from hlo_run.xla_cpu_devices import run_on_devices

    text = _sized(groups)
    module = parse_module(text)
    resolved = module.entry.root.attrs["replica_groups"].groups()
    args = [[np.array([d], np.float32)] for d in range(8)]
    xla = run_on_devices(text, args, 1, 8)
    ours = run_devices(module, args, 1, 8)
    for d in range(8):
        group = next(g for g in resolved if d in g)
        assert xla[d].tolist() == group, (d, xla[d], group)
        assert ours[d].tolist() == group


@pytest.mark.parametrize("groups, expected", [
    # device_ids [2,2,2]T(0,2,1) lays out [[0,2],[1,3],[4,6],[5,7]]; its columns are the groups
    ("mesh['axis_0'=4,'axis_1'=2], device_ids=([2,2,2]T(0,2,1)) {'axis_0'}", [[0, 1, 4, 5], [2, 3, 6, 7]]),
    # [4,2]T(1,0): iota over [4,2], transposed to [[0,2,4,6],[1,3,5,7]], read as 4x2
    # [[0,2],[4,6],[1,3],[5,7]]
    ("mesh['a'=4,'b'=2], device_ids=([4,2]T(1,0)) {'a'}", [[0, 4, 1, 5], [2, 6, 3, 7]]),
    ("mesh['a'=2,'b'=4], device_ids=(0,2,4,6,1,3,5,7) {'b'}", [[0, 2, 4, 6], [1, 3, 5, 7]]),
    # sub-axes of an 8-axis: (pre 2, size 2) groups ids 2 apart within blocks of 4
    ("mesh['a'=8] {'a':(2)2}", [[0, 2], [1, 3], [4, 6], [5, 7]]),
])
def test_mesh_groups_follow_the_device_order_the_mesh_names(groups, expected):
    """As XLA's MeshAxesReplicaGroupList::flattened_replica_groups defines them (xla/hlo/ir/
    replica_group.cc): the mesh's device array, reshaped by sub-axes, grouped axes moved last."""
    rg = parse_module(_sized(groups))
    assert rg.entry.root.attrs["replica_groups"].groups() == expected


@pytest.mark.parametrize("groups, message", [
    ("{{0,1},{1,2},{3,4},{5,6,7}}", "name device 1 twice"),
    ("{{0,1},{2,3}}", "leave out device 4"),
    ("{{0,1,2,3,4,5,6,8}}", "name device 8, but the module has 8"),
])
def test_verifier_refuses_groups_that_do_not_fit_the_devices(groups, message):
    from hlo_common.hlo_pass.pipeline import verify

    text = module_text(groups, "all-reduce").replace(", dimensions={0}", ", to_apply=add").replace(
        "ROOT g = f32[8]", "ROOT g = f32[1]")
    text = text.replace("ENTRY e {", "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n"
                        " ROOT c = f32[] add(a, b)\n}\nENTRY e {")
    with pytest.raises(HloError, match=message):
        verify(parse_module(text), "verification failed")


@pytest.mark.parametrize("groups, message", [
    ("mesh['a'=4,'a'=2] {'a'}", "distinct"),
    ("mesh['a'=4] {'b'}", "not a mesh axis"),
    ("mesh['a'=2,'b'=2], device_ids=(0,1,1,3) {'a'}", "permutation"),
    ("mesh['a'=8] {'a':(2)4,'a':(1)4}", "overlap|split"),
])
def test_malformed_mesh_groups_are_parse_errors(groups, message):
    with pytest.raises(HloError, match=message):
        parse_module(module_text(groups))


# device_groups / device_pairs (what hlo-codegen writes into collective thunks) against the
# interpreter's rendezvous (`interpreter.devices.World.participants`), a separate implementation
# of XLA's GetParticipatingDevices, for every device, group mode and form.
MODE_CASES = [
    (2, 4, "all-reduce", "replica_groups={{0,1}}"),  # cross-replica
    (2, 4, "all-reduce", "channel_id=1, replica_groups={{1},{0}}"),  # cross-replica-and-partition
    (2, 4, "all-reduce", "channel_id=1, replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true"),
    (2, 4, "all-to-all", "channel_id=1, replica_groups={{3,1},{0,2}}"),  # cross-partition
    (1, 8, "all-gather", "channel_id=1, replica_groups=mesh['x'=4,'y'=2] {'x'}, use_global_device_ids=true"),
    (4, 1, "collective-broadcast", "replica_groups={}"),
]


@pytest.mark.parametrize("replicas, partitions, op, attrs", MODE_CASES)
def test_device_groups_agree_with_the_interpreters_participants(replicas, partitions, op, attrs):
    from hlo_common.hlo.replica_groups import device_groups
    from hlo_common.interpreter.devices import World

    tail = {"all-reduce": ", to_apply=add", "all-gather": ", dimensions={0}",
            "all-to-all": ", dimensions={0}"}
    text = (f"HloModule m, replica_count={replicas}, num_partitions={partitions}\n"
            "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"
            f"ENTRY e {{ p = f32[8] parameter(0)\n ROOT r = f32[8] {op}(p), {attrs}{tail.get(op, '')} }}")
    instr = parse_module(text).entry.root
    groups = device_groups(instr, replicas, partitions)
    world = World(replicas, partitions)
    n = replicas * partitions
    assert sorted(d for g in groups for d in g) == list(range(n))
    for d in range(n):
        (mine,) = [g for g in groups if d in g]
        assert mine == world.participants(instr, d)


def test_device_pairs_name_global_devices_in_each_replica_or_partition():
    from hlo_common.hlo.replica_groups import device_pairs

    def root(attrs):
        text = (f"HloModule m, replica_count=2, num_partitions=2\nENTRY e {{ p = f32[8] parameter(0)\n"
                f" ROOT r = f32[8] collective-permute(p), {attrs} }}")
        return parse_module(text).entry.root

    # without channel_id the pairs name replicas (same partition); with one, partitions (same replica)
    assert device_pairs(root("source_target_pairs={{0,1}}"), 2, 2) == [(0, 2), (1, 3)]
    assert device_pairs(root("channel_id=1, source_target_pairs={{0,1}}"), 2, 2) == [(0, 1), (2, 3)]
