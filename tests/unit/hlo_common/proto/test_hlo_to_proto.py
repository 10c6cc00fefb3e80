"""hlo_common.proto.hlo_to_proto, the IR -> HloModuleProto writer, and hlo-opt's proto output
(--emit-proto, --output-format, -o m.pb / m.pbtxt): HLO text -> proto -> text is the identity on
the project's testdata modules (the corpus tier is tests/corpus/test_proto_out_corpus.py), and
XLA itself (jaxlib, when installed) loads what the writer writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import proto_lib
import pytest

from hlo_common.hlo.parser import parse_module, split_module_texts
from hlo_common.hlo.printer import print_module
from hlo_common.proto.hlo_to_proto import entry_layout, module_to_proto, proto_names, serialize
from hlo_common.proto.messages import HloModuleProto
from hlo_common.proto.proto_to_hlo import module_from_proto
from hlo_common.proto.proto_values import ProtoError

ROOT = Path(__file__).resolve().parents[4]
TESTDATA = sorted((ROOT / "testdata").rglob("*.hlo"))

# One module with what the corpus has few of: a schedule, aliasing, shardings, frontend
# attributes, metadata, a stack frame table, control edges, tuples, sub-byte and complex constants.
RICH = """HloModule rich, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }, entry_computation_layout={(f32[4,2]{0,1}, s32[3]{0})->(f32[4,2]{0,1}, s32[3]{0}, c64[2]{0}, s4[3]{0})}, frontend_attributes={fa="1",mesh={x=2}}

FileNames
1 "a.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%add (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %c = s32[] add(%a, %b), metadata={op_type="add" op_name="jit(f)/add" source_file="a.py" source_line=3 stack_frame_id=1}
}

ENTRY %main (p0: f32[4,2], p1: s32[3]) -> (f32[4,2], s32[3], c64[2], s4[3]) {
  %p0 = f32[4,2]{0,1} parameter(0), sharding={devices=[2,1]<=[2]}
  %p1 = s32[3]{0} parameter(1), sharding={replicated}
  %n = f32[4,2]{0,1} negate(%p0), frontend_attributes={_xla_stream="2",k="v w"}, backend_config={"x":[1,2]}
  %z = s32[] constant(0)
  %r = s32[] reduce(%p1, %z), dimensions={0}, to_apply=%add, control-predecessors={%n}
  %b = s32[3]{0} broadcast(%r), dimensions={}
  %cc = c64[2]{0} constant({(1, -2), (0.5, inf)})
  %q = s4[3]{0} constant({-8, 7, 1})
  ROOT %t = (f32[4,2]{0,1}, s32[3]{0}, c64[2]{0}, s4[3]{0}) tuple(%n, %b, %cc, %q), sharding={{devices=[2,1]<=[2]}, {replicated}, {maximal device=1}, {manual}}
}
"""


def _tool(module: str, *args: str, rc: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, timeout=300, check=False)
    assert proc.returncode == rc, proc.stderr.decode()[-2000:]
    return proc


@pytest.mark.parametrize("fmt", ["pb", "pbtxt"])
def test_rich_module_reads_back_from_its_proto(fmt) -> None:
    expected, got = proto_lib.written_and_read(RICH, "rich", fmt)
    assert "stack_frame_id=1" in got and "must-alias" in got and "{maximal device=1}" in got
    assert got == expected, proto_lib.first_difference(expected, got)


def test_rich_module_proto_fields_are_xla_s() -> None:
    """The fields themselves, as XLA's HloModule::ToProto fills them (spot checks)."""
    proto = module_to_proto(parse_module(RICH, "rich"))
    entry = next(c for c in proto.computations if c.id == proto.entry_computation_id)
    assert entry.name == "main" and proto.entry_computation_name == "main"
    by_name = {i.name: i for i in entry.instructions}
    assert by_name["r"].control_predecessor_ids == [by_name["n"].id]
    assert list(by_name["p0"].shape.layout.minor_to_major) == [0, 1]
    assert list(proto.schedule.sequences[entry.id].instruction_ids) == [i.id for i in entry.instructions]
    assert [(e.parameter_number, e.kind) for e in proto.input_output_alias.entries] == [(0, 1), (1, 2)]
    assert by_name["q"].literal.s4s == bytes([0x08, 0x07, 0x01])  # as XLA writes s4 (jaxlib 0.10 checked)
    assert list(by_name["cc"].literal.c64s)[:3] == [1.0, -2.0, 0.5]
    assert by_name["n"].backend_config == b'{"x":[1,2]}'
    assert proto.stack_frame_index.stack_frames[0].parent_frame_id == 0  # the text writes it one above


@pytest.mark.parametrize("path", TESTDATA, ids=[str(p.relative_to(ROOT / "testdata")) for p in TESTDATA])
def test_testdata_modules_read_back_from_their_protos(path) -> None:
    for k, text in enumerate(split_module_texts(path.read_text())):
        expected, got = proto_lib.written_and_read(text, f"{path.name}#{k}", "pb")
        assert got == expected, proto_lib.first_difference(expected, got)


def test_instruction_names_become_unique_per_module() -> None:
    text = """HloModule m
%f (x: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  ROOT %y = f32[] negate(%x)
}
ENTRY %e (x: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  ROOT %y = f32[] call(%x), to_apply=%f
}
"""
    proto = module_to_proto(parse_module(text, "m"))
    names = [i.name for c in proto.computations for i in c.instructions]
    assert len(set(names)) == len(names) == 4
    expected, got = proto_lib.written_and_read(text, "m")
    assert got == expected


def test_what_the_schema_cannot_hold_is_an_error_naming_the_instruction() -> None:
    text = """HloModule m
ENTRY %e (x: f32[2]) -> f32[2] {
  %x = f32[2]{0} parameter(0)
  ROOT %d = f32[2]{0} domain(%x), domain={kind="color", entry={maximal device=0}, exit={replicated}}
}
"""
    with pytest.raises(ProtoError, match=r"instruction 'd': attribute 'domain'.*only sharding domains"):
        module_to_proto(parse_module(text, "m"))


@pytest.mark.parametrize("how", [["-o", "{d}/m.pb"], ["-o", "{d}/m.pbtxt"], ["--emit-proto", "-o", "{d}/x.bin"],
                                 ["--output-format", "pbtxt", "-o", "{d}/x.out"], ["--emit-proto"]])
def test_hlo_opt_writes_a_proto_that_reads_as_its_text_output(tmp_path, how) -> None:
    src = ROOT / "testdata" / "softmax.hlo"
    text = _tool("hlo_opt.cli", str(src)).stdout.decode()
    args = [a.format(d=tmp_path) for a in how]
    proc = _tool("hlo_opt.cli", str(src), *args)
    if "-o" in args:
        out = Path(args[args.index("-o") + 1])
        data = out.read_bytes()
    else:
        out, data = tmp_path / "stdout.pb", proc.stdout
        out.write_bytes(data)
    binary = "pbtxt" not in args and not str(out).endswith(".pbtxt")
    if binary:
        assert HloModuleProto.FromString(data).computations
    else:
        assert data.startswith(b'name: "')
    fmt = "pb" if binary else "pbtxt"
    again = _tool("hlo_opt.cli", "--pipeline", "none", f"--input-format={fmt}", str(out)).stdout.decode()
    module = parse_module(text, "softmax")
    module.entry_computation_layout = entry_layout(module)  # a proto always holds one
    for instr, name in proto_names(module).items():  # and its names are unique per module
        instr.name = name
    assert again == print_module(module)


def test_hlo_opt_refuses_proto_output_of_several_modules(tmp_path) -> None:
    two = tmp_path / "two.hlo"
    one = (ROOT / "testdata" / "softmax.hlo").read_text()
    two.write_text(one + "\n// -----\n" + one)
    proc = _tool("hlo_opt.cli", "--split-input-file", "--pipeline", "none", "--emit-proto", str(two), rc=1)
    assert b"writes one module; the input holds 2" in proc.stderr


def test_xla_loads_the_written_proto_and_prints_the_same_module() -> None:
    xc = proto_lib.xla_client()
    text = (ROOT / "testdata" / "softmax.hlo").read_text()
    opts = xc.hlo.HloPrintOptions()
    reference = proto_lib.canonical(xc.hlo.hlo_module_from_text(text).to_string(opts))
    loaded = xc.XlaComputation(serialize(parse_module(text, "softmax"), "pb")).get_hlo_module()
    assert proto_lib.canonical(loaded.to_string(opts)) == reference


# Fields XLA's proto has for what the text writes as `replica_groups=mesh[...]` (field 93, with a
# device order as a list or as an iota transform, and sub-axes), `domain={...}` (fields 54/55),
# `origin={...}` (88), `statistics={...}` (82), and a sharding's `shard_as`/`shard_like` and
# `metadata=` (OpSharding 11-13, 7): each reads back as written, and matches XLA both ways.
MESH_DOMAIN_ORIGIN = """HloModule m, replica_count=1, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b), origin={{"c"}}
}

ENTRY %e (p: f32[8], t: (f32[8], s32[])) -> f32[8] {
  %p = f32[8]{0} parameter(0), origin={{"p"}}, sharding={devices=[2]0,1 shard_as 3}
  %t = (f32[8]{0}, s32[]) parameter(1), origin={({"t" {1}}, {})}, sharding={{replicated shard_like 2}, {maximal device=0 metadata={op_name="x"}}}
  %n = f32[8]{0} negate(%p), statistics={visualizing_index=1,stat-0=0.5,stat-1=33}, sharding={maximal device=1 metadata={{op_name="a"}, {op_type="b" source_line=3}}}
  %r0 = f32[8]{0} all-reduce(%n), channel_id=1, replica_groups=mesh['x'=4,'y'=2] {'x'}, use_global_device_ids=true, to_apply=%add
  %r1 = f32[8]{0} all-reduce(%r0), channel_id=2, replica_groups=mesh['x'=4,'y'=2], device_ids=(0,2,4,6,1,3,5,7) {'y'}, use_global_device_ids=true, to_apply=%add
  %r2 = f32[8]{0} all-reduce(%r1), channel_id=3, replica_groups=mesh['x'=4,'y'=2], device_ids=([4,2]T(1,0)) {'y','x':(2)2}, use_global_device_ids=true, to_apply=%add
  %d0 = f32[8]{0} domain(%r2), domain={kind="sharding", entry={maximal device=1}, exit={}}
  ROOT %d1 = f32[8]{0} domain(%d0), domain={kind="sharding", entry={devices=[2,1,4]<=[8] last_tile_dim_replicate}, exit={replicated}}
}
"""


def test_mesh_groups_domains_origins_and_sharding_groups_read_back_from_their_proto() -> None:
    proto = module_to_proto(parse_module(MESH_DOMAIN_ORIGIN, "m"))
    entry = {i.name: i for i in proto.computations[-1].instructions}
    mesh = entry["r2"].mesh_axes_replica_group_list
    assert [(a.name, a.size) for a in mesh.mesh.axes] == [("x", 4), ("y", 2)]
    assert list(mesh.mesh.iota_transform.transpose_perm) == [1, 0]
    assert [(a.mesh_axis_index, a.sub_axis_info.pre_size) for a in mesh.axes] == [(1, 0), (0, 2)]
    assert entry["d0"].domain_exit_sharding.tile_assignment_devices == [1]  # `entry=` is the user side
    assert [e.original_array.instruction_name for e in entry["t"].original_value.elements] == ["", "t", ""]
    assert (entry["p"].sharding.shard_group_id, entry["t"].sharding.tuple_shardings[0].shard_group_type) == (3, 1)
    assert [m.op_type for m in entry["n"].sharding.metadata] == ["", "b"]
    assert [s.stat_val for s in entry["n"].statistics_viz.statistics] == [0.5, 33.0]
    for fmt in ("pb", "pbtxt"):
        expected, got = proto_lib.written_and_read(MESH_DOMAIN_ORIGIN, "m", fmt)
        assert got == expected, proto_lib.first_difference(expected, got)


def test_mesh_groups_domains_origins_and_sharding_groups_match_xla_s_proto() -> None:
    """XLA's proto of the module reads to what our parser gives from XLA's text of it, and XLA loads
    ours and prints what it prints for the text."""
    data, xla_text = proto_lib.xla_proto_and_text(MESH_DOMAIN_ORIGIN)
    reference = proto_lib.canonical(print_module(parse_module(xla_text, "m")))
    got = proto_lib.canonical(print_module(module_from_proto(HloModuleProto.FromString(data), "m")))
    assert got == reference, proto_lib.first_difference(reference, got)
    xc = proto_lib.xla_client()
    ours = xc.XlaComputation(serialize(parse_module(MESH_DOMAIN_ORIGIN, "m"), "pb")).get_hlo_module().to_string()
    assert proto_lib.canonical(print_module(parse_module(ours, "m"))) == reference
