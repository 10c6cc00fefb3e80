"""The numpy reference interpreter (XLA's HloEvaluator role).

    from hlo_common.interpreter import evaluate
    result = evaluate(module, [np.ones((2, 4), np.float32)])

`evaluator.Evaluator` walks computations; handlers, one per opcode, live in the family modules
(`elementwise`, `data_movement`, `control_flow`, `rng`, `custom_call`, `collectives`, `reduction`,
`linalg`, `gather_scatter`, `sort`) and register themselves in `registry.HANDLERS`.
"""

from hlo_common.interpreter.evaluator import Evaluator, evaluate

__all__ = ["Evaluator", "evaluate"]
