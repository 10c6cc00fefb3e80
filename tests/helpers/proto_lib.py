"""Helpers of the proto tests: XLA's own HloModuleProto of a module text (jaxlib, test-only) and a
canonical form of printed modules in which the order of computations and of instructions within
one does not count (XLA's proto lists both in its post order, its text printer in another)."""

from __future__ import annotations

import re

import pytest

# HloModuleConfig fields XLA prints in the module header; HloModuleProto does not hold them.
_CONFIG_ONLY = re.compile(r", (allow_spmd_sharding_propagation_to_(parameters|output)=\{[^}]*\}|"
                          r"replica_count=\d+|num_partitions=\d+)")


def xla_client():
    pytest.importorskip("jax", reason="jaxlib writes the reference protos")
    from jax._src.lib import xla_client as xc

    return xc


def xla_proto_and_text(text: str) -> tuple[bytes, str]:
    """XLA's serialized HloModuleProto of module `text` and XLA's text of the same module (large
    constants printed whole); raises whatever XLA raises when it rejects the text."""
    xc = xla_client()
    module = xc.hlo.hlo_module_from_text(text)
    opts = xc.hlo.HloPrintOptions()
    opts.print_large_constants = True
    return module.as_serialized_hlo_module_proto(), module.to_string(opts)


def canonical(printed: str) -> str:
    """A printed module with computations, and instructions within each, in sorted order."""
    header, _, body = printed.partition("\n")
    blocks = []
    for block in body.strip().split("\n\n"):
        lines = block.split("\n")
        blocks.append(lines[0] + "\n" + "\n".join(sorted(lines[1:])))
    return _CONFIG_ONLY.sub("", header) + "\n" + "\n\n".join(sorted(blocks))


def written_and_read(module_text: str, name: str, fmt: str = "pb") -> tuple[str, str]:
    """(the module as our printer gives it, the module after hlo_to_proto -> bytes -> proto_to_hlo);
    see `trip`."""
    _, expected, got, _ = trip(module_text, name, fmt)
    return expected, got


def trip(module_text: str, name: str, fmt: str = "pb") -> tuple[str, str, str, list[str]]:
    """(the module as our printer gives it before and after the normalisations, the module after
    hlo_to_proto -> bytes -> proto_to_hlo, the normalisations that changed it).

    The first is what the proto can say of the module: HloModuleConfig's header fields
    (replica_count, ...) are not in an HloModuleProto, a missing entry_computation_layout is the
    entry's own shapes (what XLA's parser gives it, and a proto must hold one), instructions
    that share a name across computations get the names the writer gives them (a proto's names
    are unique per module), and the spellings a proto cannot tell apart are XLA's
    (proto_normalise.NORMALISATIONS, each named). Everything else must come back byte for byte."""
    from proto_normalise import normalise

    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module
    from hlo_common.proto.hlo_to_proto import entry_layout, proto_names, serialize
    from hlo_common.proto.loader import read_proto_input

    module = parse_module(module_text, name)
    data = serialize(module, fmt)
    module.entry_computation_layout = entry_layout(module)
    for instr, new in proto_names(module).items():
        instr.name = new
    printed = print_module(module)
    written = _CONFIG_ONLY.sub("", printed.partition("\n")[0]) + "\n" + printed.partition("\n")[2]
    expected, fired = normalise(written, name)
    got = print_module(read_proto_input(data, name, fmt).module)
    return written, expected, got, fired


_LAYOUT = re.compile(r"\]\{[^{}]*\}")
_OPERANDS = re.compile(r"^\S+ = (.*? [\w-]+)\([^()]*\)")  # names: XLA's parser renames clashes its own way
_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%?([^\s=]+) = ")


def changed_lines(before: str, after: str) -> dict[tuple[str, str], str]:
    """The lines of printed module `after` that `before` does not have, keyed by (computation,
    instruction), or ("", attribute) for a module header attribute, as `keyed_lines` keys them."""
    old = keyed_lines(before)
    return {k: v for k, (v, _) in keyed_lines(after).items() if old.get(k, (None,))[0] != v}


def keyed_lines(printed: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(computation, instruction) -> (the line without `ROOT`, layouts and names, the line) of a
    printed module; the header's attributes as ("", name). Layouts aside: XLA's parser gives every
    shape one; names aside: it renames names that clash its own way."""
    lines = printed.splitlines()
    out: dict = {}
    for key, value in re.findall(r", ([\w-]+)=(\{ .*? \}|\{.*?\}(?=, \w+=|$))", lines[0]):
        out[("", key)] = (value, lines[0])
    comp = ""
    for line in lines[1:]:
        if line.endswith("{") and not line.startswith(" "):
            comp = line.removeprefix("ENTRY ").split(" ")[0].lstrip("%")
            continue
        m = _INSTRUCTION.match(line)
        if m:
            bare = _OPERANDS.sub(r"\1(...)", _LAYOUT.sub("]", line.strip().removeprefix("ROOT ")), count=1)
            out[(comp, m.group(1))] = (bare, line)
    return out


def first_difference(a: str, b: str) -> str:
    x, y = a.splitlines(), b.splitlines()
    k = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
    return f"line {k + 1}:\n    text:  {x[k:k + 1]}\n    proto: {y[k:k + 1]}"



_ASYNC_CALL = re.compile(r" async-(start|update|done)\(([^()]*)\)(.*?), calls=%([^\s,]+)")
_ASYNC_NEXT = re.compile(r" async-(update|done)\(%([^\s,()]+)\)")
_ROOT = re.compile(r"^\s*ROOT %\S+ = .*? ([\w-]+)\(([^()]*)\)(.*)$")


def async_sugar(printed: str, name: str) -> str:
    """`printed` as XLA's printer writes it with syntax_sugar_async_ops (its default): an async op
    whose wrapped computation is one instruction on parameters prints as `<op>-start(...)` with
    that instruction's attributes, and the wrapped computation is left out (HloModule::Print,
    xla/hlo/ir/hlo_module.cc), so XLA's text of a module never names those computations."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module

    blocks = printed.split("\n\n")
    wrapped = {}  # computation -> (its block, the wrapped opcode, that instruction's attributes)
    for k, block in enumerate(blocks[1:], 1):
        lines = block.strip("\n").split("\n")
        root = _ROOT.match(lines[-2]) if len(lines) > 2 else None
        if root and all(" parameter(" in ln for ln in lines[1:-2]):
            comp = lines[0].removeprefix("ENTRY ").split(" ")[0].lstrip("%")
            wrapped[comp] = (k, root.group(1), root.group(3))
    used, ops = set(), {}  # the wrapped computations printed as sugar; async op name -> wrapped opcode

    def sugar(line: str) -> str:
        m = _ASYNC_CALL.search(line)
        if m and m.group(4) in wrapped:
            k, op, attrs = wrapped[m.group(4)]
            used.add(k)
            line = line[:m.start()] + f" {op}-{m.group(1)}({m.group(2)}){m.group(3)}" + \
                (attrs if m.group(1) == "start" else "") + line[m.end():]
        else:
            m = _ASYNC_NEXT.search(line)
            op = ops.get(m.group(2)) if m else None
            if op is None:
                return line
            line = line[:m.start()] + f" {op}-{m.group(1)}(%{m.group(2)})" + line[m.end():]
        ops[line.split(" = ")[0].strip().removeprefix("ROOT ").lstrip("%")] = op
        return line
    rewritten = ["\n".join(sugar(ln) for ln in b.split("\n")) for b in blocks]
    if not used:
        return printed
    return print_module(parse_module("\n\n".join(b for k, b in enumerate(rewritten) if k not in used), name))
