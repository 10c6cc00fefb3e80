"""The canonical HLO printer: print(parse(print(m))) == print(m), byte for byte.

The back door of every tool: `HloModule` in, text out (hlo-opt's output, dumps, the manifest's
copy of the optimized module). Style follows XLA's current dumps: `%` sigils, operands by name
only, layouts on every array shape, computation signatures without layouts, computations in
post order (callees first, entry last) and instructions in an order where operands come first
(the existing order whenever it already is one), opcode-specific attributes in a fixed order,
then called computations, then the common attributes (sharding, frontend_attributes,
control-predecessors, metadata, backend_config as compact JSON).

Constants: unlike XLA's dumps, which abbreviate any constant of more than 10 elements to `{...}`,
this printer writes every value out, because HLO text is the interface between our tools and
values must survive `hlo-opt | hlo-codegen`. Two exceptions: a constant whose values were never
known (it was read from `{...}`) prints as `{...}` again, and an all-zero constant of more than 10
elements prints as the scalar `0` (`false` for pred), which XLA's parser reads back as that array
(it puts the scalar in element 0 and zeros everywhere else).
"""

from __future__ import annotations

from hlo_common.hlo import attributes as A
from hlo_common.hlo.ir import COMPUTATION_ATTRS, HloComputation, HloInstruction, HloModule
from hlo_common.hlo.literal import format_literal, format_scalar, is_zero_splat

_SHORT_CONSTANT_ELEMENTS = 10  # XLA prints constants up to this size in full


def print_module(module: HloModule, print_metadata: bool = True) -> str:
    parts = [_header(module)]
    if module.stack_frames:
        parts.append(module.stack_frames.rstrip("\n") + "\n")
    for comp in module.computation_post_order():
        parts.append(print_computation(comp, print_metadata))
    return "\n".join(parts)


def _header(module: HloModule) -> str:
    attrs = []
    if module.is_scheduled:
        attrs.append("is_scheduled=true")
    layout = _entry_layout(module)
    if layout is not None:
        params, result = layout
        attrs.append("entry_computation_layout={(" + ", ".join(str(p) for p in params) + ")->"
                     + str(result) + "}")
    attrs.extend(f"{k}={v}" for k, v in module.header_attrs)
    return "HloModule " + ", ".join([module.name] + attrs) + "\n"


def _entry_layout(module: HloModule):
    """The stored entry_computation_layout, kept as written (XLA keeps it even where it disagrees
    with the entry's shapes), but re-derived from the entry when a pass changed the number of
    parameters, which would make the text unreadable."""
    layout = module.entry_computation_layout
    entry = module.entry
    if layout is None or entry is None or entry.root is None:
        return layout
    actual = [p.shape for p in entry.parameters]
    if len(layout[0]) == len(actual):
        return layout
    return actual, entry.root.shape


def print_computation(comp: HloComputation, print_metadata: bool = True) -> str:
    params = comp.parameters
    sig = "(" + ", ".join(f"{p.name}: {p.shape.to_string(False)}" for p in params) + ") -> " + \
        comp.root.shape.to_string(False)
    lines = [("ENTRY " if comp.is_entry else "") + f"%{comp.name} {sig} {{\n"]
    for instr in comp.post_order():
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
        opcode = str(wrapped)
    if instr.opcode == "parameter":
        ops = str(instr.parameter_number)
    elif instr.opcode == "constant":
        ops = constant_text(instr)
    else:
        ops = ", ".join(f"%{o.name}" for o in instr.operands)
    text = f"%{instr.name} = {instr.shape} {opcode}({ops})"
    attrs = _attribute_strings(instr, print_metadata)
    if attrs:
        text += ", " + ", ".join(attrs)
    return text


def constant_text(instr: HloInstruction) -> str:
    """The literal between `constant(` and `)` (see the module docstring for the rules)."""
    if instr.literal_unknown:
        return "{...}"
    shape = instr.shape
    value = instr.literal
    if shape.is_array and shape.num_elements > _SHORT_CONSTANT_ELEMENTS \
            and not shape.element_type.is_complex and is_zero_splat(value):
        return format_scalar(value[(0,) * value.ndim], shape.element_type)
    return format_literal(value, shape if shape.is_tuple else shape.element_type)


def _attribute_strings(instr: HloInstruction, print_metadata: bool) -> list[str]:
    out = []
    specific = [k for k in instr.attrs if k not in COMPUTATION_ATTRS and k != "async_wrapped_opcode"]
    specific.sort(key=A.attr_sort_key)
    for key in specific:
        val = instr.attrs[key]
        out.append(f"{key}={A.format_attr_value(A.ATTR_KINDS.get(key), val)}")
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
    config = instr.backend_config
    if config is not None:
        out.append(f"backend_config={config}")
    return out
