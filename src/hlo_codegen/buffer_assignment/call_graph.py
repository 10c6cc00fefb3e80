"""Moved to `hlo_common.analysis.call_graph` (hlo-opt's copy insertion and scheduler use it too);
these names stay importable from here for hlo-codegen's thunk emitter and compiler."""

from hlo_common.analysis.call_graph import (  # noqa: F401
    CONTROL_FLOW_CALLERS, EMBEDDED, GLOBAL, branch_computations, computation_contexts,
    instruction_sequence, xla_called_computations, xla_computation_post_order, xla_instruction_post_order)
