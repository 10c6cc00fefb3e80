"""Which attributes each opcode takes, and which it must have (part of the HLO parser).

XLA's parser (`xla/hlo/parser/hlo_parser.cc`, `CreateInstruction`) gives every opcode a table of
attributes, each required or optional, on top of those any instruction may carry
(`ParseInstructionRhs`); an attribute outside the table is "unexpected" and a required one that
is missing is "expected but not seen", both errors. Without this, a typo such as `typ=TOTALORDER`
for `type=TOTALORDER` was kept as text and ignored, and changed the compare's results.

`attribute_rules(opcode, wrapped)` gives (required, allowed) for an instruction; the parser checks
each attribute's name as it reads it and the required ones after the last. The few attributes
that depend on the operands (a conditional's branches, a broadcast's dimensions) are checked by
`operand_rules` and `missing_required`, once the operands are read.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction

# Any instruction (XLA: ParseInstructionRhs).
COMMON = frozenset({"sharding", "frontend_attributes", "statistics", "parameter_replication",
                    "control-predecessors", "origin", "metadata", "backend_config"})

_ACCURACY = ("acos", "acosh", "asin", "asinh", "atanh", "exponential-minus-one", "log", "log-plus-one",
             "logistic", "sqrt", "cbrt", "rsqrt", "tanh", "erf", "sine", "sinh", "cosine", "cosh", "tan",
             "exponential")
_DOT_DIMS = ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims",
             "operand_precision")
_COLLECTIVE = ("replica_groups", "channel_id", "constrain_layout", "use_global_device_ids")
_CHANNEL = ("channel_id", "is_host_transfer")
_GATHER_OPTIONAL = ("indices_are_sorted", "operand_batching_dims", "start_indices_batching_dims")
_SCATTER_OPTIONAL = ("indices_are_sorted", "unique_indices", "input_batching_dims",
                     "scatter_indices_batching_dims")
_CUSTOM_CALL_OPTIONAL = ("window", "dim_labels", "feature_group_count", "batch_group_count",
                         "operand_layout_constraints", "custom_call_has_side_effect", "to_apply",
                         "called_computations", "output_to_operand_aliasing", "padding_type", "literal",
                         "operand_precision", "schedule", "api_version")

# opcode -> (required, optional); opcodes not listed take only COMMON.
_RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "iota": (("iota_dimension",), ()),
    "topk": (("k",), ("largest", "is_stable")),  # is_stable: in XLA's own benchmark modules
    **{op: ((), ("result_accuracy",)) for op in _ACCURACY},
    "all-gather": (("dimensions",), _COLLECTIVE),
    "all-gather-start": (("dimensions",), _COLLECTIVE),
    "all-reduce": (("to_apply",), _COLLECTIVE + ("mode",)),
    "all-reduce-start": (("to_apply",), _COLLECTIVE + ("mode",)),
    "reduce-scatter": (("to_apply", "dimensions"), _COLLECTIVE + ("mode",)),
    "all-to-all": ((), ("replica_groups", "channel_id", "dimensions", "constrain_layout")),
    "ragged-all-to-all": ((), ("replica_groups", "channel_id", "dimensions")),
    "collective-broadcast": ((), ("replica_groups", "channel_id")),
    "collective-permute": (("source_target_pairs",), ("channel_id", "slice_sizes")),
    "collective-permute-start": (("source_target_pairs",), ("channel_id", "slice_sizes")),
    "async-start": (("calls",), ("async_execution_thread", "output_to_operand_aliasing")),
    "async-update": ((), ("async_execution_thread", "calls")),
    "async-done": ((), ("async_execution_thread", "calls")),
    "copy-start": ((), ("cross_program_prefetch_index",)),
    "reshape": ((), ("inferred_dimension",)),
    "sort": (("dimensions", "to_apply"), ("is_stable",)),
    "while": (("condition", "body"), ()),
    "recv": ((), _CHANNEL),
    "recv-done": ((), _CHANNEL),
    "send": ((), _CHANNEL),
    "send-done": ((), _CHANNEL),
    "get-tuple-element": (("index",), ()),
    "call": (("to_apply",), ("is_composite",)),
    "reduce-window": (("to_apply",), ("window",)),
    "convolution": (("dim_labels",), ("window", "feature_group_count", "batch_group_count", "conv_kind",
                                      "operand_precision")),
    "fft": (("fft_type", "fft_length"), ()),
    "triangular-solve": ((), ("left_side", "lower", "unit_diagonal", "transpose_a")),  # its options proto
    "compare": (("direction",), ("type",)),
    "cholesky": ((), ("lower",)),  # its options proto
    "broadcast": ((), ("dimensions",)),  # required unless the operand is a scalar (operand_rules)
    "concatenate": (("dimensions",), ()),
    "map": (("to_apply",), ("dimensions",)),
    "scan": (("to_apply", "dimensions", "num_carries"), ("is_reverse", "is_associative")),
    "reduce": (("to_apply", "dimensions"), ()),
    "reverse": (("dimensions",), ()),
    "select-and-scatter": (("select", "scatter"), ("window",)),
    "slice": (("slice",), ()),
    "dynamic-slice": (("dynamic_slice_sizes",), ()),
    "transpose": (("dimensions",), ()),
    "batch-norm-training": (("epsilon", "feature_index"), ()),
    "batch-norm-inference": (("epsilon", "feature_index"), ()),
    "batch-norm-grad": (("epsilon", "feature_index"), ()),
    "pad": (("padding",), ()),
    "fusion": (("calls", "kind"), ("output_to_operand_aliasing",)),
    "infeed": ((), ("infeed_config",)),
    "outfeed": ((), ("outfeed_config", "outfeed_shape")),
    "rng": (("distribution",), ()),
    "rng-get-and-update-state": (("delta",), ()),
    "rng-bit-generator": (("algorithm",), ()),
    "reduce-precision": (("exponent_bits", "mantissa_bits"), ()),
    # a pred index takes true/false_computation, an s32 one branch_computations (operand_rules)
    "conditional": ((), ("true_computation", "false_computation", "branch_computations")),
    "custom-call": (("custom_call_target",), _CUSTOM_CALL_OPTIONAL),
    "dot": ((), _DOT_DIMS + ("algorithm",)),
    "ragged-dot": ((), _DOT_DIMS + ("lhs_ragged_dims", "rhs_group_dims")),
    "scaled-dot": ((), _DOT_DIMS + ("algorithm",)),
    "gather": (("offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim", "slice_sizes"),
               _GATHER_OPTIONAL),
    "scatter": (("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                 "index_vector_dim", "to_apply"), _SCATTER_OPTIONAL),
    "domain": (("domain",), ()),
    "get-dimension-size": (("dimensions",), ()),
    "set-dimension-size": (("dimensions",), ()),
}


def attribute_rules(opcode: str, wrapped: str | None = None) -> tuple[frozenset[str], frozenset[str]]:
    """(required, allowed) attribute names of an instruction. `wrapped` is the written name of an
    async sugar form such as `custom-call-start`: its start takes the wrapped op's attributes as
    well (XLA parses them into the wrapped instruction) and no `calls`; its update and done take
    only `async_execution_thread`."""
    if wrapped is None:
        required, optional = _RULES.get(opcode, ((), ()))
        return frozenset(required), COMMON | set(required) | set(optional)
    if opcode != "async-start":
        return frozenset(), COMMON | {"async_execution_thread"}
    required, optional = _RULES.get(wrapped[: -len("-start")], ((), ()))
    return frozenset(required), COMMON | set(required) | set(optional) | {"async_execution_thread",
                                                                          "output_to_operand_aliasing"}


def operand_rules(instr: HloInstruction, required: frozenset[str], allowed: frozenset[str]):
    """(required, allowed) adjusted for what depends on the operands: a broadcast of a scalar may
    leave out its (empty) dimensions; a conditional with a pred index takes true/false_computation,
    one with an s32 index branch_computations."""
    first = instr.operands[0].shape if instr.operands else None
    if first is None or not first.is_array:
        return required, allowed
    if instr.opcode == "broadcast" and first.rank > 0:
        return required | {"dimensions"}, allowed
    if instr.opcode == "conditional":
        branches = {"true_computation", "false_computation"} if first.element_type.is_pred \
            else {"branch_computations"}
        drop = {"true_computation", "false_computation", "branch_computations"} - branches
        return required | branches, allowed - drop
    return required, allowed


def missing_required(instr: HloInstruction, required: frozenset[str], seen: set[str]) -> str | None:
    """XLA's "attribute ... is expected but not seen" for the first missing one, or None. A scalar
    broadcast without dimensions gets XLA's default, {} (algsimp died on the missing key)."""
    if instr.opcode == "broadcast" and "dimensions" not in required:
        instr.attrs.setdefault("dimensions", ())
    missing = sorted(k for k in required if k not in seen)
    if not missing:
        return None
    return (f"attribute '{missing[0]}' is expected but not seen ({instr.opcode} requires "
            f"{', '.join(sorted(required))})")
