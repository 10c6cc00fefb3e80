"""HloModuleProto -> the project's IR (XLA's HloModule::CreateFromProto, xla/hlo/ir/hlo_module.cc).

The proto is written out as HLO text, one instruction per line from its fields (the spelling of
xla/hlo/ir/hlo_instruction.cc's printer), and that text goes through the project's parser, so a
proto gets exactly the checks, canonical attributes and errors HLO text gets. Constants' values
do not travel as text: they are read from their LiteralProto into the parsed instructions.
Ids that reference nothing, unknown opcodes and malformed fields are ProtoErrors naming the
computation and instruction.
"""

from __future__ import annotations

from hlo_common.hlo.strings import quote_string
from hlo_common.proto.proto_attrs import frontend_text, instruction_attrs
from hlo_common.proto.proto_tables import ALIAS_KIND
from hlo_common.proto.proto_values import ProtoError, literal_from_proto, program_shape_text, shape_text


def module_from_proto(proto, filename: str = "<proto>"):
    """The HloModule of an HloModuleProto message."""
    from hlo_common.errors import HloParseError
    from hlo_common.hlo.parser import parse_module

    text, literals = module_text(proto, filename)
    try:
        module = parse_module(text, filename)
    except HloParseError as exc:
        raise ProtoError(f"{filename}: {_place(text, exc.line)}{exc.message}") from None
    for comp in module.computations:
        for instr in comp.instructions:
            key = (comp.name, instr.name)
            if instr.opcode == "constant" and key in literals:
                instr.literal, instr.literal_unknown = literals[key], False
    return module


def module_text(proto, filename: str) -> tuple[str, dict]:
    """(HLO text of the module with `{...}` for constants, constant values by (computation, name))."""
    if not proto.computations:
        raise ProtoError(f"{filename}: HloModuleProto.computations is empty")
    comp_names = {c.id: c.name for c in proto.computations}
    entry_id = proto.entry_computation_id or next(
        (c.id for c in proto.computations if c.name == proto.entry_computation_name), None)
    if entry_id not in comp_names:
        raise ProtoError(f"{filename}: entry_computation_id {entry_id} names no computation")
    header = [f"HloModule {proto.name or 'module'}"]
    if proto.HasField("host_program_shape") and proto.host_program_shape.HasField("result"):
        header.append("entry_computation_layout={" +
                      program_shape_text(proto.host_program_shape, f"{filename}: host_program_shape") + "}")
    header += _module_attrs(proto)
    schedule = {k: list(v.instruction_ids) for k, v in proto.schedule.sequences.items()}
    if schedule:
        header.append("is_scheduled=true")
    lines, literals = [", ".join(header), ""], {}
    if proto.HasField("stack_frame_index"):
        lines += _stack_frame_lines(proto.stack_frame_index)
    for comp in proto.computations:
        lines += _computation_lines(comp, comp_names, comp.id == entry_id, schedule.get(comp.id),
                                    literals, filename)
        lines.append("")
    return "\n".join(lines), literals


def _module_attrs(proto) -> list[str]:
    out = []
    aliases = [e for e in proto.input_output_alias.entries]
    if aliases:
        parts = []
        for e in aliases:
            kind = ALIAS_KIND.get(e.kind, "")
            parts.append(f"{_index(e.output_shape_index)}: ({e.parameter_number}, "
                         f"{_index(e.parameter_shape_index)}{kind})")
        out.append("input_output_alias={ " + ", ".join(parts) + " }")
    donors = [e for e in proto.buffer_donor.entries]
    if donors:
        out.append("buffer_donor={ " + ", ".join(f"({e.parameter_number}, {_index(e.parameter_shape_index)})"
                                                  for e in donors) + " }")
    if proto.frontend_attributes.map:
        out.append("frontend_attributes=" + frontend_text(proto.frontend_attributes))
    return out


def _computation_lines(comp, comp_names, is_entry, order, literals, filename) -> list[str]:
    where = f"{filename}: computation '{comp.name}'"
    by_id = {i.id: i for i in comp.instructions}
    if len(by_id) != len(comp.instructions):
        raise ProtoError(f"{where}: two instructions share an id")
    if comp.root_id not in by_id:
        raise ProtoError(f"{where}: root_id {comp.root_id} names no instruction")
    if order is not None:
        missing = [i for i in order if i not in by_id]
        if missing:
            raise ProtoError(f"{where}: the schedule names instruction id {missing[0]}, which is not there")
        rest = [i for i in by_id if i not in set(order)]
        instrs = [by_id[i] for i in order + rest]
    else:
        instrs = list(comp.instructions)
    lines = [("ENTRY " if is_entry else "") + f"{_name(comp.name)} {{"]
    names = {i.id: i.name for i in comp.instructions}
    types = {i.id: i.shape.element_type for i in comp.instructions}
    for instr in instrs:
        iwhere = f"{where}, instruction '{instr.name}' (id {instr.id})"
        if instr.opcode == "constant" and instr.HasField("literal"):
            literals[(comp.name, instr.name)] = literal_from_proto(instr.literal, f"{iwhere}: literal")
        root = "ROOT " if instr.id == comp.root_id else ""
        lines.append(f"  {root}{_instruction_text(instr, names, types, comp_names, iwhere)}")
    thread = comp.execution_thread
    lines.append("}" + (f", execution_thread={quote_string(thread)}" if thread and thread != "main" else ""))
    return lines


def _instruction_text(instr, names, types, comp_names, where) -> str:
    if not instr.opcode:
        raise ProtoError(f"{where}: no opcode")
    operands = []
    for k, oid in enumerate(instr.operand_ids):
        if oid not in names:
            raise ProtoError(f"{where}: operand_ids[{k}] = {oid} names no instruction of the computation")
        operands.append(_name(names[oid]))
    called = []
    for k, cid in enumerate(instr.called_computation_ids):
        if cid not in comp_names:
            raise ProtoError(f"{where}: called_computation_ids[{k}] = {cid} names no computation")
        called.append(_name(comp_names[cid]))
    controls = []
    for k, pid in enumerate(instr.control_predecessor_ids):
        if pid not in names:
            raise ProtoError(f"{where}: control_predecessor_ids[{k}] = {pid} names no instruction")
        controls.append(_name(names[pid]))
    shape = shape_text(instr.shape, f"{where}: shape")
    args = ", ".join(operands)
    if instr.opcode == "parameter":
        args = str(instr.parameter_number)
    elif instr.opcode == "constant":
        args = "{...}" if instr.shape.dimensions or instr.shape.element_type == 13 else _SCALAR_STANDIN.get(
            instr.shape.element_type, "0")  # a stand-in of the right kind; the value is set after parsing
    attrs = instruction_attrs(instr, called, [types[o] for o in instr.operand_ids], where)
    if controls:
        attrs.append("control-predecessors={" + ", ".join(controls) + "}")
    tail = "".join(", " + a for a in attrs)
    return f"{_name(instr.name)} = {shape} {instr.opcode}({args}){tail}"


_SCALAR_STANDIN = {1: "false", 15: "(0, 0)", 18: "(0, 0)"}


def _place(text: str, line: int) -> str:
    """`computation 'c', instruction 'i': ` for line `line` of the module text made from the proto
    (the text is the reader's own, so the proto's names say where the problem is)."""
    lines = text.splitlines()
    if not 0 < line <= len(lines):
        return ""
    comp = next((ln for ln in reversed(lines[:line]) if ln.endswith("{") and not ln.startswith(" ")), "")
    comp_name = comp.removeprefix("ENTRY ").split(" ")[0].lstrip("%")
    here = lines[line - 1].strip().removeprefix("ROOT ")
    instr = here.split(" ")[0].lstrip("%") if here.startswith("%") else ""
    where = f"computation '{comp_name}'" if comp_name else ""
    if instr:
        where += f", instruction '{instr}'"
    return where + ": " if where else ""


def _stack_frame_lines(index) -> list[str]:
    """The FileNames / FunctionNames / FileLocations / StackFrames tables as XLA prints them
    (its text writes a frame's parent id one above the proto's)."""
    from hlo_common.hlo.strings import quote_string

    lines = ["FileNames"] + [f"{k} {quote_string(n)}" for k, n in enumerate(index.file_names, 1)]
    lines += ["", "FunctionNames"] + [f"{k} {quote_string(n)}" for k, n in enumerate(index.function_names, 1)]
    lines += ["", "FileLocations"]
    for k, loc in enumerate(index.file_locations, 1):
        lines.append(f"{k} {{file_name_id={loc.file_name_id} function_name_id={loc.function_name_id} "
                     f"line={loc.line} end_line={loc.end_line} column={loc.column} "
                     f"end_column={loc.end_column}}}")
    lines += ["", "StackFrames"]
    lines += [f"{k} {{file_location_id={f.file_location_id} parent_frame_id={f.parent_frame_id + 1}}}"
              for k, f in enumerate(index.stack_frames, 1)]
    return lines + [""]


def _name(name: str) -> str:
    return "%" + name


def _index(idx) -> str:
    return "{" + ",".join(map(str, idx)) + "}"
