"""The tables both directions of the HLO <-> HloModuleProto conversion read, kept once so that the
writer (`hlo_to_proto`) stays the inverse of the reader (`proto_to_hlo`, `proto_attrs`): enum
numbers and the words XLA's printer writes for them (xla/hlo/ir/hlo_instruction.cc,
xla/xla_data.proto), the order of a while's or conditional's called computations, and what each
attribute's default is.

    >>> PRECISION[2], RNG_ALGORITHM[1], SHARDING_WORD[4]
    ('HIGHEST', 'rng_three_fry', 'manual')
"""

from __future__ import annotations

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.proto.messages import enum_names

# Opcodes whose `dimensions` XLA prints even when empty, and those whose proto `dimensions` field
# holds something else (an iota's dimension).
ALWAYS_DIMS = frozenset({"broadcast", "transpose", "reduce", "reverse", "concatenate", "sort", "map"})
NO_DIMS = frozenset({"iota"})
PRECISION = enum_names("PrecisionConfig.Precision")
ALGORITHM = enum_names("PrecisionConfig.Algorithm")
API_VERSION = enum_names("CustomCallApiVersion")
CUSTOM_CALL_SCHEDULE = enum_names("CustomCallSchedule")
FFT_TYPE = enum_names("FftType")
TRANSPOSE = enum_names("TriangularSolveOptions.Transpose")
DISTRIBUTION = {1: "rng_uniform", 2: "rng_normal"}
RNG_ALGORITHM = {0: "rng_default", 1: "rng_three_fry", 2: "rng_philox"}
# OpSharding.Type numbers of the shardings that print as one word (also a subgroup's type).
SHARDING_WORD = {0: "replicated", 1: "maximal", 4: "manual", 5: "unknown", 6: "unreduced"}
# HloInputOutputAliasProto's Kind as the module header writes it.
ALIAS_KIND = {1: ", may-alias", 2: ", must-alias"}
PRED_ID, TUPLE_ID = 1, 13
SCAN_ASSOCIATIVE = {1: "true", 2: "false"}  # HloInstructionProto.scan_is_associative
_BY_ID = {t.proto_id: t for t in PRIMITIVE_TYPES.values()}


def inverse(table: dict[int, str]) -> dict[str, int]:
    """word -> number of one of the tables above."""
    return {v: k for k, v in table.items()}


def called_order(opcode: str, names: list) -> list:
    """Called computations in proto order from the IR's (COMPUTATION_ATTRS order): XLA's while
    lists its body before its condition; every other opcode keeps the IR's order. The map is its
    own inverse."""
    if opcode == "while" and len(names) == 2:
        return [names[1], names[0]]
    return list(names)


def default_comparison(type_id: int | None) -> str:
    """Comparison::DefaultComparisonType (xla/comparison_util.cc): the type XLA leaves unprinted."""
    t = _BY_ID.get(type_id)
    if t is None or t.is_float or t.is_complex:
        return "FLOAT"
    return "SIGNED" if t.kind == "signed" else "UNSIGNED"
