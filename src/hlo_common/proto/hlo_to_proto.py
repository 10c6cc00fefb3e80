"""The project's IR -> HloModuleProto (XLA's HloModule::ToProto, xla/hlo/ir/hlo_module.cc): what
`hlo-opt --emit-proto` / `-o m.pb|m.pbtxt` write, and the module of `hlo-run --save-snapshot`.

The exact inverse of `proto_to_hlo` (both read `proto_tables`): module_from_proto(module_to_proto(m))
prints as m does. Instructions are listed in the order the printer writes them, computations in
post order (callees first), so the proto reads back in the same order. Ids are numbered from 0 per
module. The HloModuleConfig fields XLA prints in the header (replica_count, num_partitions,
allow_spmd_sharding_propagation_to_*) are not part of an HloModuleProto and are left out, as XLA
leaves them out of its own; anything else the schema cannot hold is a ProtoError naming the
instruction and the attribute, never dropped in silence.

    >>> from hlo_common.hlo.parser import parse_module
    >>> m = parse_module("HloModule m\\nENTRY e { ROOT p = f32[2]{0} parameter(0) }")
    >>> module_to_proto(m).computations[0].instructions[0].opcode
    'parameter'
"""

from __future__ import annotations

import re

from google.protobuf import text_format

from hlo_common.hlo.attributes import c_unescape
from hlo_common.hlo.strings import format_json
from hlo_common.proto.hlo_to_proto_attrs import write_attrs, write_metadata, write_sharding, write_shape
from hlo_common.proto.messages import HloModuleProto
from hlo_common.proto.original_value import origin_to_proto
from hlo_common.proto.proto_tables import ALIAS_KIND
from hlo_common.proto.proto_values import ProtoError, literal_to_proto

# HloModuleConfig, not HloModuleProto (XLA keeps them in HloModuleProtoWithConfig's config).
CONFIG_HEADER_ATTRS = frozenset({"replica_count", "num_partitions",
                                 "allow_spmd_sharding_propagation_to_output",
                                 "allow_spmd_sharding_propagation_to_parameters"})
_ALIAS_KIND = {word.strip(", "): k for k, word in ALIAS_KIND.items()}


def module_to_proto(module, where: str | None = None):
    """The HloModuleProto of `module`."""
    where = where or f"module '{module.name}'"
    proto = HloModuleProto(name=module.name, entry_computation_name=module.entry.name)
    comps = module.computation_post_order()
    comp_ids = {c: k for k, c in enumerate(comps)}
    fused = {i.attrs["calls"] for c in comps for i in c.instructions if i.opcode == "fusion"}
    names = proto_names(module)
    next_id = 0
    for comp in comps:
        instrs = comp.post_order()
        ids = {instr: next_id + k for k, instr in enumerate(instrs)}
        next_id += len(instrs)
        cp = proto.computations.add(name=comp.name, id=comp_ids[comp], root_id=ids[comp.root],
                                    is_fusion_computation=comp in fused,
                                    execution_thread=comp.execution_thread or "main")
        for instr in instrs:
            p = cp.instructions.add()
            _instruction(p, instr, ids, comp_ids, f"{where}, instruction '{instr.name}'")
            p.name = names.get(instr, instr.name)
        _program_shape(cp.program_shape, [p.shape for p in comp.parameters], comp.root.shape,
                       [p.name for p in comp.parameters])
        if module.is_scheduled and comp not in fused:
            proto.schedule.sequences[cp.id].instruction_ids.extend(ids[i] for i in instrs)
    proto.entry_computation_id = comp_ids[module.entry]
    _host_program_shape(proto, module)
    _header(proto, module, where)
    if module.stack_frames:
        _stack_frames(proto.stack_frame_index, module.stack_frames, where)
    return proto


def proto_names(module) -> dict:
    """New names for the instructions whose name another computation's instruction holds too: HLO
    text scopes names per computation, an HloModuleProto per module (XLA refuses a proto with two
    instructions of one name, as its text parser renames them). The first keeps its name, the rest
    get the next free `name.k` in the order the proto lists them."""
    from hlo_common.hlo.hlo_utils import NameUniquer

    seen: set[str] = set()
    clashes = []
    for comp in module.computation_post_order():
        for instr in comp.post_order():
            (clashes.append(instr) if instr.name in seen else seen.add(instr.name))
    if not clashes:
        return {}
    uniquer = NameUniquer(seen)
    return {instr: uniquer.unique(instr.name) for instr in clashes}


def serialize(module, fmt: str) -> bytes:
    """`module` as a binary (`pb`) or text (`pbtxt`) HloModuleProto."""
    proto = module_to_proto(module)
    if fmt == "pbtxt":
        return text_format.MessageToString(proto).encode("utf-8")
    return proto.SerializeToString(deterministic=True)


def _instruction(p, instr, ids, comp_ids, where: str) -> None:
    p.name, p.opcode, p.id = instr.name, instr.opcode, ids[instr]
    write_shape(p.shape, instr.shape, where)
    p.operand_ids.extend(ids[o] for o in instr.operands)
    p.control_predecessor_ids.extend(ids[c] for c in instr.control_predecessors)
    if instr.opcode == "parameter":
        p.parameter_number = instr.parameter_number
    if instr.opcode == "constant" and not instr.literal_unknown:
        literal_to_proto(instr.literal, p.shape, p.literal)
    write_attrs(p, instr, comp_ids, where)
    if instr.sharding is not None:
        write_sharding(p.sharding, instr.sharding, where)
    for key, value in instr.frontend_attributes:
        p.frontend_attributes.map[key] = _unquote(value)
    write_metadata(p.metadata, instr.metadata, where)
    config = instr.backend_config_data
    if config is not None:
        p.backend_config = (format_json(config) if isinstance(config, dict) else config).encode("utf-8")
    for key, value in instr.extra_common:
        if key == "origin":
            _origin(p.original_value, value, where)
            continue
        if key == "statistics":
            _statistics(p.statistics_viz, value, where)
            continue
        if key != "parameter_replication":
            raise ProtoError(f"{where}: attribute '{key}' has no HloInstructionProto field in this "
                             "project's schema; the proto cannot hold it")
        words = value.strip("{} ").split(",")
        p.parameter_replication.replicated_at_leaf_buffers.extend(w.strip() == "true" for w in words)


def _origin(out, value: str, where: str) -> None:
    try:
        origin_to_proto(out, value)
    except (ValueError, IndexError):
        raise ProtoError(f"{where}: origin={value} does not read as XLA's original value") from None


def _statistics(out, value: str, where: str) -> None:
    """`{visualizing_index=1,stat-0=0.5,...}` into a StatisticsViz."""
    pairs = re.findall(r"([\w.\-]+)=([^,{}\s]+)", value)
    if not pairs or pairs[0][0] != "visualizing_index":
        raise ProtoError(f"{where}: statistics={value} does not start with visualizing_index")
    out.stat_index_to_visualize = int(pairs[0][1])
    for name, number in pairs[1:]:
        out.statistics.add(stat_name=name, stat_val=float(number))


def _unquote(value: str) -> str:
    return c_unescape(value[1:-1]) if value.startswith('"') else value


def _program_shape(ps, params, result, names) -> None:
    for shape in params:
        write_shape(ps.parameters.add(), shape, "program shape")
    write_shape(ps.result, result, "program shape")
    ps.parameter_names.extend(names)


def _host_program_shape(proto, module) -> None:
    """The entry layout; XLA needs one in every HloModuleProto, so a module whose text gave none
    gets the one XLA's parser gives it, the entry's own shapes (see `entry_layout`)."""
    params, result = entry_layout(module)
    _program_shape(proto.host_program_shape, params, result, [p.name for p in module.entry.parameters])


def entry_layout(module):
    """(parameter shapes, result shape) of the entry computation layout: the module's own, else the
    entry's parameter and root shapes (XLA's default when the text has no entry_computation_layout)."""
    if module.entry_computation_layout is not None:
        return module.entry_computation_layout
    entry = module.entry
    return [p.shape for p in entry.parameters], entry.root.shape


_INDEX = r"\{([\d,\s]*)\}"
_ALIAS_RE = re.compile(_INDEX + r"\s*:\s*\(\s*(\d+)\s*,\s*" + _INDEX + r"\s*(?:,\s*([\w-]+)\s*)?\)")
_DONOR_RE = re.compile(r"\(\s*(\d+)\s*,\s*" + _INDEX + r"\s*\)")
_KEY_VALUE_RE = re.compile(r'([\w.\-]+)=("(?:[^"\\]|\\.)*"|\{(?:[^{}]|\{[^{}]*\})*\}|[^,}]+)')


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.replace(" ", "").split(",") if v]


def _header(proto, module, where: str) -> None:
    for key, value in module.header_attrs:
        if key in CONFIG_HEADER_ATTRS:
            continue
        if key == "input_output_alias":
            for out, param, pidx, kind in _ALIAS_RE.findall(value):
                proto.input_output_alias.entries.add(output_shape_index=_ints(out),
                                                     parameter_number=int(param),
                                                     parameter_shape_index=_ints(pidx),
                                                     kind=_ALIAS_KIND.get(kind, 1))  # XLA's default
        elif key == "buffer_donor":
            for param, pidx in _DONOR_RE.findall(value):
                proto.buffer_donor.entries.add(parameter_number=int(param), parameter_shape_index=_ints(pidx))
        elif key == "frontend_attributes":
            for k, v in _KEY_VALUE_RE.findall(value[1:-1]):
                proto.frontend_attributes.map[k] = _unquote(v)
        else:
            raise ProtoError(f"{where}: module attribute '{key}' has no HloModuleProto field")


_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def _stack_frames(index, text: str, where: str) -> None:
    """The stack-frame tables (kept as text in the IR) into a StackFrameIndexProto; XLA's text
    writes a frame's parent id one above the proto's."""
    section = None
    for line in text.splitlines():
        line = line.strip()
        if line in _SECTIONS:
            section = line
            continue
        if not line:
            continue
        _, _, rest = line.partition(" ")
        fields = dict(re.findall(r"(\w+)=(-?\d+)", rest))
        if section == "FileNames":
            index.file_names.append(_unquote(rest))
        elif section == "FunctionNames":
            index.function_names.append(_unquote(rest))
        elif section == "FileLocations":
            index.file_locations.add(**{k: int(v) for k, v in fields.items()})
        elif section == "StackFrames":
            index.stack_frames.add(file_location_id=int(fields["file_location_id"]),
                                   parent_frame_id=int(fields["parent_frame_id"]) - 1)
        else:
            raise ProtoError(f"{where}: stack frame line '{line}' outside a known table")

