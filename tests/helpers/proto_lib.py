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
