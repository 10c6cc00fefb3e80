"""Collectives across several devices (`devices.run_devices`): each handler sends its operands to
the rendezvous (`World.exchange`) and computes its own result from the group's values, in group
order, with numpy; reductions apply the `to_apply` region (any region, through the evaluator) from
the first group member to the last, as XLA's reference semantics do.

The array forms follow XLA's operation semantics: all-gather concatenates along `dimensions`,
reduce-scatter reduces then keeps the member's slice, all-to-all splits along `dimensions` and
concatenates what every member sent (the tuple form sends operand j to member j),
collective-broadcast copies the first member's value, collective-permute copies from the source
of `source_target_pairs` (zeros where no source names this device).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from hlo_common.errors import InterpreterError


def _exchange(instr, ev, value: Any, group: list[int] | None = None) -> tuple[list[Any], int]:
    """(the group's values in group order, this device's index in the group)."""
    world = ev.world
    group = world.participants(instr, ev.device) if group is None else group
    seq = ev.collective_seq.get(id(instr), 0)
    ev.collective_seq[id(instr)] = seq + 1
    return world.exchange(instr, seq, ev.device, group, value), group.index(ev.device)


def _reduce(instr, ev, arrays: list[np.ndarray]) -> np.ndarray:
    comp = instr.attrs["to_apply"]
    acc = arrays[0]
    for x in arrays[1:]:
        acc = ev.map_computation(comp, [acc, x])[0]
    return np.asarray(acc, dtype=arrays[0].dtype)


def _pack(instr, values: list) -> Any:
    return values[0] if len(values) == 1 and not instr.shape.is_tuple else tuple(values)


def all_reduce(instr, operands, ev):
    values, _ = _exchange(instr, ev, tuple(operands))
    return _pack(instr, [_reduce(instr, ev, [v[k] for v in values]) for k in range(len(operands))])


def _dim(instr) -> int:
    dims = instr.attrs.get("dimensions")
    return int(dims[0] if isinstance(dims, (list, tuple)) else dims)


def all_gather(instr, operands, ev) -> list:
    values, _ = _exchange(instr, ev, tuple(operands))
    d = _dim(instr)
    return [np.concatenate([v[k] for v in values], axis=d) for k in range(len(operands))]


def reduce_scatter(instr, operands, ev):
    values, me = _exchange(instr, ev, tuple(operands))
    d, out = _dim(instr), []
    for k in range(len(operands)):
        total = _reduce(instr, ev, [v[k] for v in values])
        out.append(np.split(total, len(values), axis=d)[me])
    return _pack(instr, out)


def all_to_all(instr, operands, ev):
    if instr.attrs.get("dimensions") is None:  # tuple form: operand j goes to member j
        values, me = _exchange(instr, ev, tuple(operands))
        if len(values) != len(operands):
            raise InterpreterError(f"tuple all-to-all of {len(operands)} operands in a group of "
                                   f"{len(values)} devices")
        return tuple(v[me] for v in values)
    d = _dim(instr)
    chunks = [np.split(x, len(ev.world.participants(instr, ev.device)), axis=d) for x in operands]
    values, me = _exchange(instr, ev, chunks)
    return _pack(instr, [np.concatenate([v[k][me] for v in values], axis=d) for k in range(len(operands))])


def collective_broadcast(instr, operands, ev):
    values, _ = _exchange(instr, ev, tuple(operands))
    return _pack(instr, list(values[0]))


def _pairs(instr) -> list[tuple[int, int]]:
    raw = instr.attrs.get("source_target_pairs")
    if hasattr(raw, "pairs"):
        return [tuple(p) for p in raw.pairs]
    return [(int(s), int(t)) for s, t in re.findall(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", str(raw or ""))]


def collective_permute(instr, operands, ev):
    domain, me = ev.world.domain(instr, ev.device)
    x = operands[0]
    values, _ = _exchange(instr, ev, x, domain)
    sources = [s for s, t in _pairs(instr) if t == me]
    if len(sources) > 1:
        raise InterpreterError(f"source_target_pairs name target {me} {len(sources)} times")
    if sources:
        if sources[0] >= len(values):
            raise InterpreterError(f"source_target_pairs name source {sources[0]} of {len(values)}")
        return values[sources[0]]
    if isinstance(x, tuple):
        return tuple(np.zeros_like(v) for v in x)
    return np.zeros_like(x)


def ragged_all_to_all(instr, operands, ev):
    """Member i sends input[input_offsets[j]:][:send_sizes[j]] to member j, which writes it at
    output_offsets[j] (the sender's entry) of its output; rows are along the leading dimension."""
    data, output, in_off, send, out_off, _recv = operands
    flat = [np.ravel(a).astype(np.int64) for a in (in_off, send, out_off)]
    values, me = _exchange(instr, ev, (data, *flat))
    out = np.array(output, copy=True)
    for src_data, src_in, src_send, src_out in values:
        a, n, b = int(src_in[me]), int(src_send[me]), int(src_out[me])
        out[b:b + n] = src_data[a:a + n]
    return out
