"""The canonical HLO printer: print(parse(print(m))) == print(m), byte for byte.

Style follows XLA's current dumps: `%` sigils, operands by name only, layouts on every array
shape, computation signatures without layouts, opcode-specific attributes in a fixed order,
then called computations, then the common attributes (sharding, frontend_attributes,
control-predecessors, metadata, backend_config).
"""

from __future__ import annotations

from hlo_common import attributes as A
from hlo_common.ir import COMPUTATION_ATTRS, HloComputation, HloInstruction, HloModule
from hlo_common.literal import format_literal


def print_module(module: HloModule, print_metadata: bool = True) -> str:
    parts = [_header(module)]
    if module.stack_frames:
        parts.append(module.stack_frames.rstrip("\n") + "\n")
    for comp in module.computations:
        parts.append(print_computation(comp, print_metadata))
    return "\n".join(parts)


def _header(module: HloModule) -> str:
    attrs = []
    if module.is_scheduled:
        attrs.append("is_scheduled=true")
    if module.entry_computation_layout is not None:
        params, result = module.entry_computation_layout
        attrs.append("entry_computation_layout={(" + ", ".join(str(p) for p in params) + ")->"
                     + str(result) + "}")
    attrs.extend(f"{k}={v}" for k, v in module.header_attrs)
    return "HloModule " + ", ".join([module.name] + attrs) + "\n"


def print_computation(comp: HloComputation, print_metadata: bool = True) -> str:
    params = comp.parameters
    sig = "(" + ", ".join(f"{p.name}: {p.shape.to_string(False)}" for p in params) + ") -> " + \
        comp.root.shape.to_string(False)
    head = ("ENTRY " if comp.is_entry else "") + f"%{comp.name} {sig} {{\n"
    lines = [head]
    for instr in comp.instructions:
        prefix = "  ROOT " if instr is comp.root else "  "
        lines.append(prefix + print_instruction(instr, print_metadata) + "\n")
    tail = "}"
    if comp.execution_thread is not None:
        tail += f", execution_thread={A.quote_string(comp.execution_thread)}"
    lines.append(tail + "\n")
    return "".join(lines)


def print_instruction(instr: HloInstruction, print_metadata: bool = True) -> str:
    opcode = instr.opcode
    wrapped = instr.attrs.get("async_wrapped_opcode")
    if wrapped is not None:
        opcode = wrapped.text
    if instr.opcode == "parameter":
        ops = str(instr.parameter_number)
    elif instr.opcode == "constant":
        ops = "{...}" if instr.literal_unknown else format_literal(instr.literal, instr.shape.element_type)
    else:
        ops = ", ".join(f"%{o.name}" for o in instr.operands)
    text = f"%{instr.name} = {instr.shape} {opcode}({ops})"
    attrs = _attribute_strings(instr, print_metadata)
    if attrs:
        text += ", " + ", ".join(attrs)
    return text


def _attribute_strings(instr: HloInstruction, print_metadata: bool) -> list[str]:
    out = []
    specific = [k for k in instr.attrs if k not in COMPUTATION_ATTRS and k != "async_wrapped_opcode"]
    specific.sort(key=A.attr_sort_key)
    for key in specific:
        val = instr.attrs[key]
        kind = A.ATTR_KINDS.get(key)
        out.append(f"{key}={A.format_attr_value(kind, val) if kind else val}")
    for key in COMPUTATION_ATTRS:
        val = instr.attrs.get(key)
        if val is None:
            continue
        if isinstance(val, list):
            out.append(f"{key}={{" + ", ".join(f"%{c.name}" for c in val) + "}")
        else:
            out.append(f"{key}=%{val.name}")
    if instr.sharding is not None:
        out.append(f"sharding={instr.sharding}")
    if instr.frontend_attributes:
        out.append("frontend_attributes={" + ",".join(f"{k}={v}" for k, v in instr.frontend_attributes)
                   + "}")
    for key, val in instr.extra_common:
        out.append(f"{key}={val}")
    if instr.control_predecessors:
        out.append("control-predecessors={" + ", ".join(f"%{p.name}" for p in instr.control_predecessors)
                   + "}")
    if print_metadata and instr.metadata:
        out.append("metadata={" + " ".join(f"{k}={v}" for k, v in instr.metadata) + "}")
    if instr.backend_config is not None:
        out.append(f"backend_config={instr.backend_config}")
    return out
