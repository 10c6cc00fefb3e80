"""Interpreter handlers for the cuBLAS GEMM custom calls `__cublas$gemm` and `__cublas$lt$matmul`
(what `cublas-gemm-rewriter` emits). What they compute lives in `gemm_semantics` (shared with
hlo-codegen's gemm_config and hlo-run's host GemmThunk); this module only unpacks operands and
packs the result:

    out                                   when the call returns an array
    (out, [aux], [amax], [workspace])     when it returns a tuple: the pre-activation values for
                                          *_AUX epilogues, the f32 amax of the result when
                                          `damax_output` is set, and an s8 workspace (zeros)

Values are logical arrays; only the bias epilogues read layouts (the bias runs along the
result's most minor physical elements, `gemm_semantics.add_bias`).
"""

from __future__ import annotations

import numpy as np

from hlo_common.errors import InterpreterError
from hlo_common.interpreter.custom_call import register_custom_call
from hlo_common.interpreter.gemm_semantics import (
    GEMM_CUSTOM_CALL_TARGETS, evaluate_gemm, parse_gemm_semantics,
)
from hlo_common.interpreter.numeric import to_element_type


@register_custom_call(*sorted(GEMM_CUSTOM_CALL_TARGETS))
def _gemm(instr, operands, ev):
    sem = parse_gemm_semantics(instr, InterpreterError)
    roles = sem.operand_roles()
    out_shape = instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape
    bias = instr.operands[roles["bias"]] if "bias" in roles else None
    values = evaluate_gemm(sem, out_shape.element_type, operands[0], operands[1],
                           operands[roles["c"]] if "c" in roles else None,
                           operands[roles["bias"]] if bias is not None else None,
                           out_shape.minor_to_major, bias.shape.minor_to_major if bias is not None else None)
    if not instr.shape.is_tuple:
        return values.result
    leaves = [values.result]
    has_aux, damax = sem.epilogue_info.has_aux, sem.damax_output
    for shape in instr.shape.tuple_shapes[1:]:
        if has_aux:
            leaves.append(to_element_type(values.pre_activation, shape.element_type))
            has_aux = False
        elif damax and shape.rank == 0 and shape.element_type.name == "f32":
            leaves.append(values.amax)
            damax = False
        else:
            leaves.append(np.zeros(shape.dims, shape.element_type.np_dtype))
    return tuple(leaves)
