"""Elemental emission: scalar kernel IR for HLO instructions, one output element at a time.

Where it sits: emitters (hlo_codegen.emitters) build thread loops and ask the
`ElementalEmitter` for the value of a fusion root (or hero operand) at index values; it emits
one kernel-IR function per subgraph of the partitioned computation (hlo_codegen.partitioner)
and calls across subgraphs. XLA's `elemental_hlo_to_mlir.cc` plays this role.

Rules are registered per opcode in `ELEMENTAL_RULES` by `arith.py` (elementwise math, bitwise,
compare, select, clamp, map), `convert.py` (convert, bitcast-convert, reduce-precision, and the
f32-compute helpers `up` / `down`) and `indexing_ops.py` (broadcast, reshape, bitcast,
transpose, slice, reverse, pad, concatenate, iota, constants, dynamic-slice,
dynamic-update-slice, canonical gather, tuple roots, get-tuple-element, elemental reduce).
`ElementalEmitter.scalar_function(computation)` gives reducers / comparators as functions.
"""

from hlo_codegen.elemental import arith, convert, indexing_ops  # noqa: F401  (register rules)
from hlo_codegen.elemental.emitter import (
    ELEMENTAL_RULES, ElementalEmitter, ElementalError, FunctionContext, elemental,
)

__all__ = ["ELEMENTAL_RULES", "ElementalEmitter", "ElementalError", "FunctionContext", "elemental"]
