"""The spellings an HloModuleProto cannot tell apart, and the one a trip through it gives.

HLO text -> proto -> text is the identity except where two texts say the same thing and the proto
keeps only the meaning (an explicit default, a spacing, a quoted value that XLA prints unquoted).
There the trip gives XLA's own spelling: the one XLA's printer writes for the proto's value, and
what XLA itself prints after the same text -> proto -> text (tests/corpus/test_proto_out_corpus.py
checks each normalisation against jaxlib on every corpus module it touches, and that each one in
this list is still needed). Each is named, with its reason; the round-trip tests compare the
module read back with its text after exactly these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from hlo_common.hlo.strings import c_unescape, lexes_as_json_dict

_COLLECTIVE = re.compile(r" (?:all-reduce|all-gather|all-to-all|reduce-scatter|ragged-all-to-all|"
                         r"collective-broadcast)(?:-start)?\(")
_STRING = r'"(?:[^"\\]|\\.)*"'
_DOT = re.compile(r" dot\(")


@dataclass(frozen=True)
class Normalisation:
    name: str
    reason: str
    text: Callable[[str], str] | None = None  # on the printed module
    module: Callable[[object], bool] | None = None  # on the parsed module; True when it changed it


def _balanced_end(text: str, start: int) -> int:
    """Index just past the `}` closing the `{` at `start` (strings skipped)."""
    depth, k = 0, start
    while k < len(text):
        c = text[k]
        if c == '"':
            k = re.compile(_STRING).match(text, k).end()
            continue
        depth += (c == "{") - (c == "}")
        k += 1
        if depth == 0:
            return k
    return len(text)


def _each_value(text: str, key: str, rewrite: Callable[[str], str]) -> str:
    """`text` with every `key={...}` value passed through `rewrite`."""
    out, pos = [], 0
    for m in re.finditer(re.escape(key) + "=(?={)", text):
        if m.start() < pos:
            continue
        end = _balanced_end(text, m.end())
        out += [text[pos:m.end()], rewrite(text[m.end():end])]
        pos = end
    return "".join(out) + text[pos:]


def _per_line(pattern: re.Pattern, missing: str, added: str) -> Callable[[str], str]:
    def fix(text: str) -> str:
        return "\n".join(line + added if pattern.search(line) and missing not in line else line
                         for line in text.split("\n"))
    return fix


def _ints(text: str) -> str:
    return "{" + ",".join(v.strip() for v in text.split(",") if v.strip()) + "}"


_ALIAS = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*(?:,\s*([\w-]+)\s*)?\)")


def _alias(value: str) -> str:
    entries = [f"{_ints(o)}: ({p}, {_ints(i)}, {k or 'may-alias'})" for o, p, i, k in _ALIAS.findall(value)]
    return "{ " + ", ".join(entries) + " }"


def _frontend(value: str) -> str:
    def unquote(m: re.Match) -> str:
        body = c_unescape(m.group(2)[1:-1])
        return f"{m.group(1)}={body}" if lexes_as_json_dict(body) else m.group(0)
    return re.sub(r"(?<=[{,])([\w.\-]+)=(" + _STRING + ")", unquote, value)


def _accuracy(value: str) -> str:
    value = re.sub(r"mode=(\w+)", lambda m: "mode=" + m.group(1).lower(), value)
    return re.sub(r"\b(atol|rtol)=([-\d.eE+]+)", lambda m: f"{m.group(1)}={_double(float(m.group(2)))}",
                  value)


def _double(v: float) -> str:
    return repr(v).removesuffix(".0")


def _laid_out(shape):
    from hlo_common.hlo.shape import Shape

    if shape.is_tuple:
        return Shape.tuple_of(_laid_out(s) for s in shape.tuple_shapes)
    return shape.with_default_layouts() if shape.is_array and shape.layout is None else shape


def _outfeed_shape(module) -> bool:
    changed = False
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "outfeed" and "outfeed_shape" not in instr.attrs:
                instr.attrs["outfeed_shape"] = _laid_out(instr.operands[0].shape)
                changed = True
    return changed


def _comparison_type(module) -> bool:
    from hlo_common.proto.proto_tables import default_comparison
    from hlo_common.proto.proto_values import PROTO_ID

    changed = False
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "compare" and "type" in instr.attrs:
                first = PROTO_ID.get(instr.operands[0].shape.element_type.name)
                if str(instr.attrs["type"]) == default_comparison(first):
                    del instr.attrs["type"]
                    changed = True
    return changed


NORMALISATIONS = (
    Normalisation("false-flags", "an explicit `unique_indices=false` / `indices_are_sorted=false` is the "
                  "bool field's default, which XLA's printer leaves out",
                  lambda t: re.sub(r", (?:unique_indices|indices_are_sorted)=false\b", "", t)),
    Normalisation("alias-spelling", "an input_output_alias entry without a kind is may-alias (XLA's "
                  "parser's default, the proto's Kind), and the list prints in XLA's spacing",
                  lambda t: _each_value(t, "input_output_alias", _alias)),
    Normalisation("no-replica-groups", "a collective without replica_groups has an empty list in the "
                  "proto, which XLA prints `replica_groups={}`",
                  _per_line(_COLLECTIVE, "replica_groups=", ", replica_groups={}")),
    Normalisation("no-contracting-dims", "a dot without contracting dimensions has a DotDimensionNumbers "
                  "all the same, which XLA prints with `lhs_contracting_dims={}, rhs_contracting_dims={}`",
                  lambda t: _per_line(_DOT, "rhs_contracting_dims=", ", rhs_contracting_dims={}")(
                      _per_line(_DOT, "lhs_contracting_dims=", ", lhs_contracting_dims={}")(t))),
    Normalisation("empty-batch-dims", "explicit empty `lhs_batch_dims={}` / `rhs_batch_dims={}` are the "
                  "proto's empty lists, which XLA's printer leaves out",
                  lambda t: re.sub(r", [lr]hs_batch_dims=\{\}", "", t)),
    Normalisation("unit-group-counts", "an explicit `feature_group_count=1` / `batch_group_count=1` is "
                  "the convolution's default count, which XLA's printer leaves out",
                  lambda t: re.sub(r", (?:feature|batch)_group_count=1\b", "", t)),
    Normalisation("default-precision", "`operand_precision={default,...}` is a list of the enum's "
                  "default, which XLA's printer leaves out when no operand asks for more",
                  lambda t: re.sub(r", operand_precision=\{default(?:,default)*\}", "", t)),
    Normalisation("dict-frontend-attribute", "a quoted frontend attribute whose value reads as a dict is "
                  "one string in the proto, which XLA prints unquoted",
                  lambda t: _each_value(t, "frontend_attributes", _frontend)),
    Normalisation("result-accuracy", "result_accuracy is an enum and doubles in the proto: XLA prints "
                  "`mode=highest`, leaves out `mode=DEFAULT`, and writes 1.0 as `1`",
                  lambda t: re.sub(r", result_accuracy=\{mode=default\}", "",
                                   _each_value(t, "result_accuracy", _accuracy))),
    Normalisation("metadata-deduplicated-name", "metadata's deduplicated_name is kept in the proto, but "
                  "XLA's OpMetadataToString does not print it",
                  lambda t: re.sub(r", metadata=\{\}", "", re.sub(r" ?deduplicated_name=" + _STRING, "", t)
                                   .replace("metadata={ ", "metadata={"))),
    Normalisation("default-comparison-type", "an explicit comparison `type=` that is the operands' "
                  "default is the same proto string, which XLA's printer leaves out",
                  module=_comparison_type),
    Normalisation("outfeed-shape", "an outfeed without `outfeed_shape=` has its operand's shape (XLA's "
                  "parser's default, laid out), which the proto must hold and XLA always prints",
                  module=_outfeed_shape),
)


def normalise(printed: str, name: str) -> tuple[str, list[str]]:
    """(`printed` after every normalisation, parsed and printed again; the names of those that
    changed it)."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module

    fired, text = [], printed
    for n in NORMALISATIONS:
        if n.text is not None:
            new = n.text(text)
            if new != text:
                fired.append(n.name)
                text = new
    if " compare(" in text and ", type=" in text or " outfeed(" in text:  # the normalisations on the module
        module = parse_module(text, name)
        fired += [n.name for n in NORMALISATIONS if n.module is not None and n.module(module)]
        text = print_module(module)
    return (print_module(parse_module(text, name)) if fired else printed), fired
