"""Interpreter handlers for the cuBLAS GEMM custom calls `__cublas$gemm` and `__cublas$lt$matmul`
(what `cublas-gemm-rewriter` emits; the meaning of every backend_config field is documented in
`hlo_opt/passes/cublas_gemm_rewriter.py`).

    out = epilogue(alpha * dot(lhs, rhs) + beta * c + bias)      rounded once to out's type

computed like the interpreter's `dot` (operands converted to the result type, accumulated in f32
for 16-bit floats). Operands: lhs, rhs, then c when beta != 0, then the bias vector (over the
output's column dims) for BIAS epilogues. The result is the array, or a tuple whose first element
is the array, followed by the pre-activation values for *_AUX epilogues, the f32 amax of the
result when `damax_output` is set, and an s8 workspace (zeros). Layouts do not matter here: values
are logical arrays.
"""

from __future__ import annotations

import numpy as np

from hlo_common.errors import InterpreterError
from hlo_common.interpreter.custom_call import register_custom_call
from hlo_common.interpreter.numeric import dot_general, to_accumulation, to_element_type


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def _gelu(x: np.ndarray) -> np.ndarray:
    """cuBLASLt's GELU: the tanh approximation."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x * x * x)))


# epilogue -> (adds a bias vector, activation, has an auxiliary output)
EPILOGUES = {
    "DEFAULT": (False, None, False), "BIAS": (True, None, False), "RELU": (False, _relu, False),
    "BIAS_RELU": (True, _relu, False), "GELU": (False, _gelu, False), "GELU_AUX": (False, _gelu, True),
    "BIAS_GELU": (True, _gelu, False), "BIAS_GELU_AUX": (True, _gelu, True),
}
_DIM_KEYS = ("lhs_batch_dimensions", "rhs_batch_dimensions", "lhs_contracting_dimensions",
             "rhs_contracting_dimensions")


def _config(instr) -> dict:
    data = instr.backend_config_data
    cfg = data.get("gemm_backend_config", data) if isinstance(data, dict) else None
    if not isinstance(cfg, dict) or "dot_dimension_numbers" not in cfg:
        raise InterpreterError(f"%{instr.name} (custom-call {instr.attrs.get('custom_call_target')}): "
                               "backend_config has no gemm_backend_config with dot_dimension_numbers")
    return cfg


def _dims(instr, cfg: dict) -> list[tuple[int, ...]]:
    ddn = cfg["dot_dimension_numbers"]
    try:
        return [tuple(int(v) for v in ddn.get(k, ())) for k in _DIM_KEYS]
    except (TypeError, ValueError):
        raise InterpreterError(f"%{instr.name}: malformed dot_dimension_numbers {ddn}") from None


@register_custom_call("__cublas$gemm", "__cublas$lt$matmul")
def _gemm(instr, operands, ev):
    cfg = _config(instr)
    epilogue = str(cfg.get("epilogue", "DEFAULT"))
    if epilogue not in EPILOGUES:
        raise InterpreterError(f"%{instr.name}: gemm epilogue {epilogue} is not supported")
    has_bias, activation, has_aux = EPILOGUES[epilogue]
    beta = float(cfg.get("beta", 0.0))
    expected = 2 + (beta != 0) + has_bias
    if len(operands) < expected:
        raise InterpreterError(f"%{instr.name}: a gemm with beta={beta:g} and epilogue {epilogue} needs "
                               f"{expected} operands, it has {len(operands)}")
    out_shape = instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape
    out_type = out_shape.element_type
    lb, rb, lc, rc = _dims(instr, cfg)
    acc = dot_general(to_accumulation(operands[0], out_type), to_accumulation(operands[1], out_type),
                      lb, rb, lc, rc)
    alpha = complex(float(cfg.get("alpha_real", 1.0)), float(cfg.get("alpha_imag", 0.0)))
    if alpha != 1:
        scale = alpha if acc.dtype.kind == "c" else alpha.real
        acc = acc * np.asarray(scale, acc.dtype)
    if beta != 0:
        acc = acc + np.asarray(beta, acc.dtype) * to_accumulation(operands[2], out_type)
    if has_bias:
        acc = _add_bias(acc, to_accumulation(operands[2 + (beta != 0)], out_type))
    pre_activation = acc
    if activation is not None:
        acc = activation(acc)
    result = to_element_type(acc, out_type)
    if not instr.shape.is_tuple:
        return result
    return _tuple_result(instr, result, pre_activation if has_aux else None, bool(cfg.get("damax_output")))


def _add_bias(acc: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """A bias vector over the output's column (minor logical) dims, added to every row and batch."""
    cols = bias.size
    flat = acc.reshape(-1, cols) + bias.reshape(1, cols)
    return flat.reshape(acc.shape)


def _tuple_result(instr, result: np.ndarray, aux: np.ndarray | None, damax: bool) -> tuple:
    leaves = [result]
    shapes = instr.shape.tuple_shapes
    for shape in shapes[1:]:
        if aux is not None and len(leaves) == 1:
            leaves.append(to_element_type(aux, shape.element_type))
        elif damax and shape.rank == 0 and shape.element_type.name == "f32":
            amax = np.max(np.abs(result.astype(np.float32))) if result.size else 0
            leaves.append(np.asarray(amax, np.float32))
            damax = False
        else:
            leaves.append(np.zeros(shape.dims, shape.element_type.np_dtype))
    return tuple(leaves)
