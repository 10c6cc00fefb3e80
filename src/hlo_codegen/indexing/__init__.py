"""Indexing maps for hlo-codegen: the index algebra every emitter uses (XLA's indexing analysis).

Modules, bottom up: `interval` (closed integer ranges), `affine` (expressions), `canonical` and
`simplify` (rewrites), `indexing_map` (`IndexingMap`, composition), `serialization` (parsing the
printed form), `shape_indexing` (reshape / layout / bitcast maps), `operand_indexing`,
`op_indexing` (per-opcode output-to-input maps), `fusion_indexing` (through fused computations)
and `thread_indexing` (the loop emitter's thread-id map).
"""

from hlo_codegen.indexing.affine import (
    ADD, CONST, DIM, FLOORDIV, MOD, MUL, SYMBOL, AffineExpr, SymbolicExpr, as_expr, const, dim, sym,
)
from hlo_codegen.indexing.fusion_indexing import (
    compute_grouped_output_to_input_indexing, fusion_output_to_input_indexing, fusion_root,
)
from hlo_codegen.indexing.indexing_map import (
    IndexingMap, Variable, compose, compose_indexing_maps, vars_from_sizes,
)
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.op_indexing import (
    OUTPUT_TO_INPUT, IndexingError, compute_output_to_input_indexing, scalar_map,
)
from hlo_codegen.indexing.operand_indexing import (
    HloInstructionIndexing, OperandIndexing, RuntimeVarIndexing, compose_operand_indexing,
)
from hlo_codegen.indexing.serialization import parse_affine_expr, parse_indexing_map
from hlo_codegen.indexing.shape_indexing import (
    bitcast_map, delinearize, linearize, logical_to_linear, logical_to_physical,
    physical_to_logical, reshape_map,
)
from hlo_codegen.indexing.simplify import RangeEvaluator, Simplifier, simplify_expr
from hlo_codegen.indexing.thread_indexing import (
    LaunchDimensions, default_thread_id_indexing_map,
)

__all__ = [
    "ADD", "MUL", "MOD", "FLOORDIV", "DIM", "SYMBOL", "CONST",
    "AffineExpr", "SymbolicExpr", "as_expr", "const", "dim", "sym", "Interval", "IndexingMap",
    "Variable", "vars_from_sizes", "compose", "compose_indexing_maps", "parse_indexing_map",
    "parse_affine_expr", "RangeEvaluator", "Simplifier", "simplify_expr", "OperandIndexing",
    "RuntimeVarIndexing", "HloInstructionIndexing", "compose_operand_indexing",
    "compute_output_to_input_indexing", "OUTPUT_TO_INPUT", "IndexingError", "scalar_map",
    "compute_grouped_output_to_input_indexing", "fusion_output_to_input_indexing", "fusion_root",
    "bitcast_map", "reshape_map", "linearize", "delinearize", "logical_to_physical",
    "physical_to_logical", "logical_to_linear", "LaunchDimensions",
    "default_thread_id_indexing_map",
]
