"""The device count the SPMD passes partition for: the module header's `num_partitions` (hlo-opt
`--num-partitions N` writes it, as XLA's HloModuleConfig carries it from jax's compile options)."""

from __future__ import annotations

from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.sharded_arrays import is_global_program


def num_partitions(module: HloModule) -> int:
    value = module.header_attr("num_partitions")
    try:
        return int(value) if value is not None else 1
    except ValueError:
        return 1


def needs_partitioning(module: HloModule) -> bool:
    """num_partitions > 1 on a sharded program over global arrays; a per-device program (with
    collectives, partition-id, or an entry a partitioner named `*_spmd`) is left alone."""
    return num_partitions(module) > 1 and is_global_program(module)
