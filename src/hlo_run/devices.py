"""hlo-run on several devices: how many, and the per-device layout of arguments and results.

A module runs on N = replica_count x num_partitions devices: the counts come from its header,
`--num-replicas` / `--num-partitions` (run_hlo_module's `--num_replicas` / `--num_partitions`)
override them, and a module whose header names neither, but whose collectives name more devices
(XLA's own tests write such modules), gets as many replicas (no `channel_id`) or partitions as its
largest id asks for. With N > 1, every argument and result carries a leading device axis of size
N in device order (device d is replica d // num_partitions, partition d % num_partitions): `arg0`
of a parameter f32[8,64] on 4 devices is f32[4,8,64] in `--inputs` and `--output`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from hlo_common.errors import HloError
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.replica_groups import group_mode
from hlo_common.interpreter.devices import module_collectives

MAX_DEVICES = 64


class DeviceCountError(HloError):
    """The device count is out of range, or the module cannot run on it."""


def _header_count(module, key: str) -> int | None:
    raw = module.header_attr(key)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise DeviceCountError(f"module {module.name}: {key}={raw} is not a count") from None
    if value < 1:
        raise DeviceCountError(f"module {module.name}: {key}={value}; at least 1 is needed")
    return value


def _inferred(module) -> tuple[int, int]:
    """(replicas, partitions) the collectives ask for, for a module whose header is silent: the
    largest id they name, or an all-gather's result / operand size when it names none. Ids of the
    cross-partition mode count partitions; the others count replicas (flattened ids are replicas
    when there is one partition)."""
    replicas = partitions = 1
    for instr in module_collectives(module):
        raw = instr.attrs.get("replica_groups")
        ids = [d for g in raw.groups() for d in g] if hasattr(raw, "groups") else []
        pairs = instr.attrs.get("source_target_pairs")
        ids += [d for p in getattr(pairs, "pairs", ()) for d in p]
        need = max(ids, default=0) + 1
        if not ids and instr.opcode == "all-gather" and instr.operands and instr.shape.is_array:
            d = int(instr.attrs["dimensions"][0])
            need = max(1, instr.shape.dims[d] // max(1, instr.operands[0].shape.dims[d]))
        if group_mode(instr) == "cross-partition":
            partitions = max(partitions, need)
        else:
            replicas = max(replicas, need)
    return replicas, partitions


def device_counts(module, replicas: int | None, partitions: int | None,
                  max_devices: int = MAX_DEVICES) -> tuple[int, int]:
    """(replica_count, num_partitions) to run `module` with (see the module docstring)."""
    header_r, header_p = _header_count(module, "replica_count"), _header_count(module, "num_partitions")
    if header_r is None and header_p is None and replicas is None and partitions is None:
        r, p = _inferred(module)
    else:
        r = replicas or header_r or 1
        p = partitions or header_p or 1
    if r * p > max_devices:
        raise DeviceCountError(f"module {module.name} asks for {r * p} devices ({r} replica(s) x {p} "
                               f"partition(s)), more than --max-devices {max_devices}")
    return r, p


def check_device_groups(module, replicas: int, partitions: int) -> None:
    """DeviceCountError unless every collective's groups fit the counts (each device at most
    once, every one of them when groups are given), before any platform starts."""
    from hlo_common.hlo.replica_groups import check_groups

    for instr in module_collectives(module):
        try:
            check_groups(instr, replicas, partitions)
        except ValueError as exc:
            raise DeviceCountError(f"%{instr.name} ({instr.opcode}, {group_mode(instr)}): {exc}") from None


def stack(per_device: Sequence[Any]) -> Any:
    """Per-device values (arrays or tuples of them) -> one value with a leading device axis."""
    first = per_device[0]
    if isinstance(first, tuple):
        return tuple(stack([v[k] for v in per_device]) for k in range(len(first)))
    return np.stack([np.asarray(v) for v in per_device])


def unstack(value: Any, n: int) -> list[Any]:
    """The inverse of `stack`: device d's value."""
    if isinstance(value, tuple):
        parts = [unstack(v, n) for v in value]
        return [tuple(p[d] for p in parts) for d in range(n)]
    return [value[d] for d in range(n)]


def device_shape(shape: Shape, n: int) -> Shape:
    """`shape` with a leading device axis of size n (tuples: on every leaf)."""
    if shape.is_tuple:
        return Shape.tuple_of([device_shape(s, n) for s in shape.tuple_shapes])
    if not shape.is_array:
        return shape
    return Shape.array(shape.element_type, (n,) + tuple(shape.dims))


def per_device_args(args: Sequence[Any], n: int) -> list[list[Any]]:
    """Stacked arguments (one per parameter) -> device d's argument list."""
    columns = [unstack(a, n) for a in args]
    return [[c[d] for c in columns] for d in range(n)]
