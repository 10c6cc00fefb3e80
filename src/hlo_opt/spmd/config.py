"""The device count the SPMD passes partition for: the module header's `num_partitions` (hlo-opt
`--num-partitions N` writes it, as XLA's HloModuleConfig carries it from jax's compile options)."""

from __future__ import annotations

from hlo_common.hlo.ir import HloModule


def num_partitions(module: HloModule) -> int:
    value = module.header_attr("num_partitions")
    try:
        return int(value) if value is not None else 1
    except ValueError:
        return 1
