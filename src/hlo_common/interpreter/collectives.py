"""Interpreter handlers for collectives, evaluated on one replica and one partition.

With a single participant every collective is the identity on its operands (all-reduce reduces one
value, all-gather/reduce-scatter/all-to-all gather or split over a group of one), collective-permute
keeps the value only if the pair {0,0} is listed (else zeros, as XLA fills targets nobody sends to),
and replica-id / partition-id return the evaluator's ids (0). A replica group with more than one
member cannot be evaluated here and raises `InterpreterError`, as do send/recv/infeed/outfeed.
"""

from __future__ import annotations

import re

import numpy as np

from hlo_common.errors import InterpreterError
from hlo_common.interpreter import collectives_multi as multi
from hlo_common.interpreter.registry import register


def _group_size(instr, ev) -> int:
    """Size of the replica group holding this device (1 when groups are absent or empty)."""
    raw = instr.attrs.get("replica_groups")
    if raw is None:
        return 1
    text = str(raw).strip()
    iota = re.match(r"\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*<=", text)
    if iota:
        return int(iota.group(2))
    mesh = re.match(r"mesh\s*\[([^\]]*)\]\s*\{([^}]*)\}", text)
    if mesh:  # mesh['x'=4,'y'=2] {'x'}: a group spans the listed axes
        sizes = {k: int(v) for k, v in re.findall(r"'([^']+)'\s*=\s*(\d+)", mesh.group(1))}
        n = 1
        for axis in re.findall(r"'([^']+)'", mesh.group(2)):
            n *= sizes.get(axis, 1)
        return n
    groups = [g for g in re.findall(r"\{([^{}]*)\}", text)]
    me = ev.replica_id
    for g in groups:
        ids = [int(v) for v in g.split(",") if v.strip()]
        if me in ids or not ids:
            return max(1, len(ids))
    return 1


def _single(instr, operands, ev, results=None):
    """The operands (one value, or a tuple of them), after checking the group has one member and
    that each result (`results`, default the instruction's shape) is shaped like its operand."""
    n = _group_size(instr, ev)
    if n != 1:
        raise InterpreterError(
            f"%{instr.name} ({instr.opcode}): replica group of {n} devices; the interpreter runs one")
    value = operands[0] if len(operands) == 1 else tuple(operands)
    if results is None:
        results = instr.shape.tuple_shapes if instr.shape.is_tuple else (instr.shape,)
    for shape, x in zip(results, operands):
        if shape.is_array and isinstance(x, np.ndarray) and tuple(shape.dims) != x.shape:
            raise InterpreterError(
                f"%{instr.name} ({instr.opcode}): result {shape} differs from operand {list(x.shape)}, "
                "so it needs more than the one device the interpreter runs")
    return value


_MULTI = {"all-reduce": multi.all_reduce, "all-reduce-start": multi.all_reduce,
          "all-gather": lambda i, o, ev: multi._pack(i, multi.all_gather(i, o, ev)),
          "reduce-scatter": multi.reduce_scatter, "all-to-all": multi.all_to_all,
          "collective-broadcast": multi.collective_broadcast}


@register("all-reduce", "all-reduce-start", "all-gather", "reduce-scatter", "all-to-all",
          "collective-broadcast")
def _identity_collective(instr, operands, ev):
    if ev.world is not None:
        return _MULTI[instr.opcode](instr, operands, ev)
    return _single(instr, operands, ev)


@register("all-gather-start")
def _all_gather_start(instr, operands, ev):
    """(operands, results) in the tuple form; the older form's value is the result itself."""
    shape = instr.shape
    if ev.world is not None:
        results = multi.all_gather(instr, operands, ev)
        if not shape.is_tuple or len(shape.tuple_shapes) != 2:  # the older form: the result itself
            return multi._pack(instr, results)
        ops = operands[0] if len(operands) == 1 else tuple(operands)
        return (ops, results[0] if len(results) == 1 else tuple(results))
    if not shape.is_tuple or len(shape.tuple_shapes) != 2:
        return _single(instr, operands, ev)
    out = shape.tuple_shapes[1]
    value = _single(instr, operands, ev, out.tuple_shapes if out.is_tuple else (out,))
    return (value, value)


@register("all-reduce-done")
def _all_reduce_done(instr, operands, ev):
    return operands[0]


@register("all-gather-done", "collective-permute-done")
def _start_done(instr, operands, ev):
    value = operands[0]
    return value[1] if isinstance(value, tuple) and instr.operands[0].shape.is_tuple else value


def _permute(instr, operands, ev):
    pairs = re.findall(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", str(instr.attrs.get("source_target_pairs", "")))
    me = ev.replica_id
    keeps = any(int(s) == me and int(t) == me for s, t in pairs)
    x = operands[0]
    if keeps:
        return x
    if isinstance(x, tuple):
        return tuple(np.zeros_like(v) for v in x)
    return np.zeros_like(x)


@register("collective-permute")
def _collective_permute(instr, operands, ev):
    if ev.world is not None:
        return multi.collective_permute(instr, operands[:1], ev)
    return _permute(instr, operands[:1], ev)


@register("collective-permute-start")
def _collective_permute_start(instr, operands, ev):
    permute = multi.collective_permute if ev.world is not None else _permute
    out = permute(instr, operands[:1], ev)
    if not instr.shape.is_tuple:  # the older form: the start op's value is the result itself
        return out
    extra = tuple(np.zeros(s.dims, s.element_type.np_dtype) for s in instr.shape.tuple_shapes[2:])
    return (operands[0], out) + extra


@register("ragged-all-to-all")
def _ragged_all_to_all(instr, operands, ev):
    """One device: copy each input chunk to its output offset in (a copy of) the output buffer."""
    if ev.world is not None:
        return multi.ragged_all_to_all(instr, operands, ev)
    data, output, in_off, send, out_off, _recv = operands
    out = np.array(output, copy=True)
    for i in range(np.size(send)):
        a, n, b = int(np.ravel(in_off)[i]), int(np.ravel(send)[i]), int(np.ravel(out_off)[i])
        out[b:b + n] = data[a:a + n]
    return out


@register("replica-id")
def _replica_id(instr, operands, ev):
    return np.array(ev.replica_id, dtype=instr.shape.element_type.np_dtype)


@register("partition-id")
def _partition_id(instr, operands, ev):
    return np.array(ev.partition_id, dtype=instr.shape.element_type.np_dtype)


@register("send", "send-done", "recv", "recv-done", "infeed", "outfeed")
def _host_transfer(instr, operands, ev):
    raise InterpreterError(
        f"%{instr.name} ({instr.opcode}): the interpreter has no peer or host to talk to")
