"""The compiled descriptor (xla_hlo_descriptor.py) is the schema in xla_hlo.proto: every message's
fields have the names and numbers the .proto gives (regenerate with `make proto` after an edit)."""

from __future__ import annotations

import re
from pathlib import Path

from hlo_common.proto import messages

SCHEMA = Path(messages.__file__).with_name("xla_hlo.proto")
_FIELD = re.compile(r"^\s*(?:repeated\s+|optional\s+)?([\w.]+|map<[^>]+>)\s+(\w+)\s*=\s*(\d+)\s*;",
                    re.MULTILINE)


def _proto_fields() -> dict[str, set[tuple[str, int]]]:
    """message name (nested as Outer.Inner) -> {(field, number)}, read from the .proto text."""
    out: dict[str, set[tuple[str, int]]] = {}
    stack: list[str] = []
    for line in SCHEMA.read_text().splitlines():
        line = line.split("//")[0]
        m = re.match(r"\s*(message|enum|oneof)\s+(\w+)\s*\{", line)
        if m:
            stack.append(m.group(2) if m.group(1) == "message" else ("~" + m.group(2)))
            continue
        if line.strip() == "}":
            stack.pop()
            continue
        f = _FIELD.match(line)
        if f and stack and not any(s.startswith("~") and not _is_oneof(s) for s in stack[-1:]):
            owner = ".".join(s for s in stack if not s.startswith("~"))
            out.setdefault(owner, set()).add((f.group(2), int(f.group(3))))
    return out


def _is_oneof(name: str) -> bool:
    return name[1:] in {"specs", "optional_cross_program_prefetch_index"}


def test_descriptor_matches_the_proto_text() -> None:
    fields = _proto_fields()
    assert len(fields) > 30
    for owner, expected in fields.items():
        desc = messages._POOL.FindMessageTypeByName(f"xla.{owner}")
        got = {(f.name, f.number) for f in desc.fields}
        assert got == expected, f"{owner}: descriptor {sorted(got ^ expected)} differs from xla_hlo.proto"


def test_field_numbers_of_the_core_messages_are_xla_s() -> None:
    """A few numbers copied from XLA's hlo.proto / xla_data.proto, so a renumbering shows."""
    inst = messages.message_class("HloInstructionProto").DESCRIPTOR.fields_by_name
    numbers = (inst["operand_ids"].number, inst["called_computation_ids"].number, inst["backend_config"].number)
    assert numbers == (36, 38, 43)
    lit = messages.LiteralProto.DESCRIPTOR.fields_by_name
    assert (lit["f32s"].number, lit["bf16s"].number, lit["tuple_literals"].number) == (8, 13, 10)
    snap = messages.HloSnapshot.DESCRIPTOR.fields_by_name
    assert (snap["hlo"].number, snap["arguments"].number, snap["result"].number) == (1, 2, 3)
