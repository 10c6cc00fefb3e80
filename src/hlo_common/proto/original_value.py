"""An instruction's `origin={...}` (the arrays of the unoptimized module its value came from) as an
OriginalValueProto and back, for `hlo_to_proto` and `proto_attrs`.

The text is XLA's OriginalValue::ToString (xla/hlo/ir/hlo_original_value.cc) inside `origin={...}`:
a tuple node is `(child, child, ...)`, a leaf `{"name"}` or `{"name" {1,0}}` (the shape index in that
instruction's value), a leaf with no origin `{}`, and a synthetic call `[synthetic_call]`. The proto
lists every node of the tree in pre-order by shape index; only leaves carry an original array.

    >>> from hlo_common.proto.messages import message_class
    >>> p = message_class("OriginalValueProto")()
    >>> origin_to_proto(p, '{({"a"}, {"b" {1}})}')
    >>> origin_text(p)
    '{({"a"}, {"b" {1}})}'
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r'\s*(\[synthetic_call\]|"(?:[^"\\]|\\.)*"|\{|\}|\(|\)|,|-?\d+)')


def origin_to_proto(out, text: str) -> None:
    """Fill OriginalValueProto `out` from the value of `origin=`; ValueError when it does not read."""
    tokens = _TOKEN.findall(text)
    if "".join(tokens) != re.sub(r"\s+", "", text) or tokens[:1] != ["{"] or tokens[-1:] != ["}"]:
        raise ValueError(f"unreadable origin '{text}'")
    body = tokens[1:-1]
    if body == ["[synthetic_call]"]:
        out.is_synthetic_call = True
        return
    end = _node(out, body, 0, [])
    if end != len(body):
        raise ValueError(f"unreadable origin '{text}'")


def _node(out, tokens: list[str], k: int, index: list[int]) -> int:
    element = out.elements.add(shape_index=index)
    if tokens[k] == "(":
        k, child = k + 1, 0
        while tokens[k] != ")":
            k = _node(out, tokens, k, [*index, child])
            child += 1
            if tokens[k] == ",":
                k += 1
        return k + 1
    if tokens[k] != "{":
        raise ValueError(f"expected '{{' or '(' in an origin, found {tokens[k]!r}")
    k += 1
    if tokens[k].startswith('"'):
        element.original_array.instruction_name = tokens[k][1:-1]
        k += 1
        if tokens[k] == "{":
            k += 1
            while tokens[k] != "}":
                if tokens[k] != ",":
                    element.original_array.shape_index.append(int(tokens[k]))
                k += 1
            k += 1
    if tokens[k] != "}":
        raise ValueError(f"expected '}}' in an origin, found {tokens[k]!r}")
    return k + 1


def origin_text(p) -> str:
    """The value of `origin=` for OriginalValueProto `p`."""
    if p.is_synthetic_call:
        return "{[synthetic_call]}"
    nodes = {tuple(e.shape_index): e for e in p.elements}
    return "{" + _text(nodes, ()) + "}"


def _text(nodes: dict, index: tuple) -> str:
    children = []
    while (*index, len(children)) in nodes:
        children.append(_text(nodes, (*index, len(children))))
    element = nodes.get(index)
    if children:
        return "(" + ", ".join(children) + ")"
    if element is None or not element.HasField("original_array"):
        return "{}"
    array = element.original_array
    shape_index = " {" + ",".join(map(str, array.shape_index)) + "}" if array.shape_index else ""
    return '{"' + array.instruction_name + '"' + shape_index + "}"
