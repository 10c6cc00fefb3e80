"""The numpy reference interpreter (XLA's HloEvaluator role).

    from hlo_common.interpreter import evaluate
    result = evaluate(module, [np.ones((2, 4), np.float32)])

`evaluator.Evaluator` runs computations by their evaluation plans (`plan`: steps worked out once
per computation, invariant values cached, large elementwise runs chunked by `regions`, whose float
members run as `region_kernels` with bf16 values carried in f32 by `narrow`, handlers for plain
dtypes specialized by `fast`, one BLAS thread per call from `blas`, independent blocks of large
ops on the threads of `parallel`); handlers, one per opcode,
live in the family modules (`elementwise`, `data_movement`, `control_flow`, `rng`, `custom_call`,
`collectives`, `reduction`, `linalg`, `gather_scatter`, `sort`) and register themselves in
`registry.HANDLERS`.
"""

from hlo_common.interpreter.evaluator import Evaluator, evaluate

__all__ = ["Evaluator", "evaluate"]
