"""What a cuBLAS GEMM computes: XLA's `GemmBackendConfig`, read and evaluated in one place.

Where it sits: `cublas-gemm-rewriter` (hlo-opt) writes `__cublas$gemm` / `__cublas$lt$matmul`
custom calls whose backend_config holds a GemmBackendConfig (every field documented in
`hlo_opt/passes/cublas_gemm_rewriter.py`). Three readers share this module, so a GEMM means the
same thing everywhere:

- the reference interpreter's handler (`hlo_common/interpreter/gemm.py`, beside this module:
  the semantics are numpy, like the rest of the interpreter),
- hlo-codegen's `gemm_config.py` (which calls cuBLAS can run, and the GemmThunk config),
- hlo-run's host GemmThunk (`hlo_run/host_gemm.py`).

The meaning, with `acc` the accumulation type of the result type T (f32 for 16-bit and narrower
floats, int64 for integers, T itself otherwise):

    x   = alpha * dot(lhs, rhs) + beta * c + bias          every operand converted to T, then to acc
    out = activation(x)                                      rounded (or wrapped) to T once
    aux = x                                                  (*_AUX epilogues, in aux's type)
    amax = max |out before rounding|                         (f32, when damax_output is set)

`dot` uses the dimension numbers of the config (batch dims first in the result, then lhs free,
then rhs free dims). `bias` is added as cuBLASLt adds it, in memory order: read in its own
physical order, it runs along the result's most minor physical elements and repeats over the
rest (`bias_output_dims`). With the default row-major result those are the column (rhs free)
dims; with a column-major result (`{0,1}`, which layout assignment gives a dot whose user is a
transpose) they are the row (lhs free) dims, exactly what XLA's FuseVectorBiasAdd checks when it
fuses the bias. RELU is max(x, 0); GELU is cuBLASLt's tanh approximation
0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Operands: lhs, rhs, then c when beta != 0, then
the bias vector for BIAS epilogues.

Fields that do not change the exact result: `operand_precision` (DEFAULT/HIGH/HIGHEST: the
reference computes at full precision, as the interpreter's `dot` does), `lhs_stride` /
`rhs_stride` (derived from the shapes), `grad_x` / `grad_y` (frontend hints), `is_fp8` (false
here; FP8 calls have their own target). `algorithm` rounds the operands when it names 16-bit
inputs (ALG_DOT_BF16_BF16_F32 -> bf16, ALG_DOT_F16_F16_F32 -> f16); other algorithms compute at
full precision.

    >>> sem = GemmSemantics(lhs_contracting_dims=(1,), rhs_contracting_dims=(0,), alpha_real=2.0)
    >>> evaluate_gemm(sem, F32, np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)).result
    array([[6., 6.],
           [6., 6.]], dtype=float32)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from hlo_common.hlo.dtypes import PRIMITIVE_TYPES, PrimitiveType
from hlo_common.errors import HloError
from hlo_common.interpreter.numeric import dot_general, to_accumulation, to_element_type

F32 = PRIMITIVE_TYPES["f32"]
GEMM_CUSTOM_CALL_TARGETS = frozenset({"__cublas$gemm", "__cublas$lt$matmul"})


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.zeros((), x.dtype))


def gelu(x: np.ndarray) -> np.ndarray:
    """cuBLASLt's GELU: the tanh approximation, computed in x's dtype."""
    c = np.asarray(np.sqrt(2.0 / np.pi), x.dtype)
    return np.asarray(0.5, x.dtype) * x * (1 + np.tanh(c * (x + np.asarray(0.044715, x.dtype) * x * x * x)))


@dataclass(frozen=True)
class Epilogue:
    """One cuBLASLt epilogue: whether it adds a bias vector, its activation, and an aux output."""

    name: str
    adds_bias: bool
    activation: str | None  # "relu" | "gelu" | None
    has_aux: bool = False


EPILOGUES: dict[str, Epilogue] = {e.name: e for e in (
    Epilogue("DEFAULT", False, None), Epilogue("BIAS", True, None), Epilogue("RELU", False, "relu"),
    Epilogue("BIAS_RELU", True, "relu"), Epilogue("GELU", False, "gelu"), Epilogue("BIAS_GELU", True, "gelu"),
    Epilogue("GELU_AUX", False, "gelu", True), Epilogue("BIAS_GELU_AUX", True, "gelu", True),
)}
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"relu": relu, "gelu": gelu}
# Algorithms whose inputs are 16-bit: the operands are rounded to that type first.
ALGORITHM_OPERAND_TYPES = {"ALG_DOT_BF16_BF16_F32": "bf16", "ALG_DOT_F16_F16_F32": "f16",
                           "ALG_DOT_BF16_BF16_BF16": "bf16", "ALG_DOT_F16_F16_F16": "f16"}
_DIM_KEYS = ("lhs_batch_dimensions", "rhs_batch_dimensions", "lhs_contracting_dimensions",
             "rhs_contracting_dimensions")


@dataclass(frozen=True)
class GemmSemantics:
    """The fields of a GemmBackendConfig that decide the result."""

    lhs_batch_dims: tuple[int, ...] = ()
    rhs_batch_dims: tuple[int, ...] = ()
    lhs_contracting_dims: tuple[int, ...] = ()
    rhs_contracting_dims: tuple[int, ...] = ()
    alpha_real: float = 1.0
    alpha_imag: float = 0.0
    beta: float = 0.0
    epilogue: str = "DEFAULT"
    algorithm: str = "ALG_UNSET"
    damax_output: bool = False

    @property
    def dims(self) -> tuple[tuple[int, ...], ...]:
        return (self.lhs_batch_dims, self.rhs_batch_dims, self.lhs_contracting_dims,
                self.rhs_contracting_dims)

    @property
    def alpha(self) -> complex:
        return complex(self.alpha_real, self.alpha_imag)

    @property
    def epilogue_info(self) -> Epilogue:
        return EPILOGUES[self.epilogue]

    def operand_roles(self) -> dict[str, int]:
        """Which operand is what: `{"lhs": 0, "rhs": 1}` plus "c" (beta != 0) and "bias"."""
        roles = {"lhs": 0, "rhs": 1}
        if self.beta != 0:
            roles["c"] = len(roles)
        if self.epilogue_info.adds_bias:
            roles["bias"] = len(roles)
        return roles


def gemm_backend_config(data) -> dict | None:
    """The GemmBackendConfig dict of a backend_config (top level or under gemm_backend_config)."""
    if not isinstance(data, dict):
        return None
    inner = data.get("gemm_backend_config", data)
    return inner if isinstance(inner, dict) else None


def parse_gemm_semantics(instr, error: type[HloError] = HloError) -> GemmSemantics:
    """The GemmSemantics of a gemm custom call; `error` naming the call when the config is unusable
    (no dot_dimension_numbers, a bad number, an unknown epilogue, the wrong operand count)."""
    where = f"%{instr.name}"
    cfg = gemm_backend_config(instr.backend_config_data)
    if cfg is None or not isinstance(cfg.get("dot_dimension_numbers"), dict):
        raise error(f"{where}: backend_config has no gemm_backend_config with dot_dimension_numbers")
    ddn = cfg["dot_dimension_numbers"]
    try:
        dims = [tuple(int(v) for v in ddn.get(k, ())) for k in _DIM_KEYS]
        alpha = (float(cfg.get("alpha_real", 1.0)), float(cfg.get("alpha_imag", 0.0)))
        beta = float(cfg.get("beta", 0.0))
    except (TypeError, ValueError):
        raise error(f"{where}: malformed numbers in its gemm backend_config") from None
    epilogue = str(cfg.get("epilogue", "DEFAULT"))
    if epilogue not in EPILOGUES:
        raise error(f"{where}: gemm epilogue {epilogue} is not supported (supported: {', '.join(EPILOGUES)})")
    precision = cfg.get("precision_config") if isinstance(cfg.get("precision_config"), dict) else {}
    algorithm = str(precision.get("algorithm", "ALG_UNSET"))
    sem = GemmSemantics(*dims, alpha[0], alpha[1], beta, epilogue, algorithm,
                        bool(cfg.get("damax_output", False)))
    expected = len(sem.operand_roles())
    if len(instr.operands) != expected:
        raise error(f"{where}: a gemm with beta={beta:g} and epilogue {epilogue} takes {expected} operands, "
                    f"it has {len(instr.operands)}")
    return sem


@dataclass
class GemmValues:
    result: np.ndarray  # rounded to the result type
    pre_activation: np.ndarray  # in the accumulation type (the *_AUX output before its rounding)
    unrounded: np.ndarray  # after the activation, before rounding (what amax reads)

    @property
    def amax(self) -> np.ndarray:
        x = self.unrounded
        return np.asarray(np.max(np.abs(x)) if x.size else 0, np.float32)


def _operand(x: np.ndarray, out_type: PrimitiveType, algorithm: str) -> np.ndarray:
    rounded = ALGORITHM_OPERAND_TYPES.get(algorithm)
    if rounded is not None and np.asarray(x).dtype.kind == "f":
        x = np.asarray(x).astype(PRIMITIVE_TYPES[rounded].np_dtype)
    return to_accumulation(x, out_type)


def bias_output_dims(out_minor_to_major: tuple[int, ...], out_dims: tuple[int, ...],
                     bias_elements: int) -> tuple[int, ...] | None:
    """The result dims a bias of `bias_elements` elements runs along, minor to major: the shortest
    run of the result's most minor physical dims holding that many elements (None when no run
    does: the bias cannot be cuBLASLt's)."""
    n = 1
    for k, d in enumerate(out_minor_to_major):
        if n == bias_elements:
            return tuple(out_minor_to_major[:k])
        n *= out_dims[d]
    return tuple(out_minor_to_major) if n == bias_elements else None


def add_bias(acc: np.ndarray, out_minor_to_major: tuple[int, ...] | None, bias: np.ndarray,
             bias_minor_to_major: tuple[int, ...] | None = None) -> np.ndarray:
    """`acc` (logical) plus the bias as cuBLASLt's BIAS epilogue adds it: both read in memory
    order (None: row-major), the bias along the result's most minor physical elements."""
    rank = acc.ndim
    out_m2m = tuple(range(rank - 1, -1, -1)) if out_minor_to_major is None else tuple(out_minor_to_major)
    b = np.asarray(bias)
    if bias_minor_to_major is not None and b.ndim > 1:
        b = np.transpose(b, tuple(reversed(bias_minor_to_major)))
    b = b.reshape(-1)
    if bias_output_dims(out_m2m, acc.shape, b.size) is None:
        raise HloError(f"a bias of {b.size} elements does not span the most minor dims of a "
                       f"{list(acc.shape)} result with layout {{{','.join(map(str, out_m2m))}}}")
    to_physical = tuple(reversed(out_m2m))
    physical = np.transpose(acc, to_physical)
    summed = (physical.reshape(-1, b.size) + b.reshape(1, -1)).reshape(physical.shape)
    return np.transpose(summed, np.argsort(to_physical))


def evaluate_gemm(sem: GemmSemantics, out_type: PrimitiveType, lhs: np.ndarray, rhs: np.ndarray,
                  c: np.ndarray | None = None, bias: np.ndarray | None = None,
                  out_minor_to_major: tuple[int, ...] | None = None,
                  bias_minor_to_major: tuple[int, ...] | None = None, product=None) -> GemmValues:
    """The GEMM on logical numpy arrays (the module docstring's formula); the layouts (None:
    row-major) say where the bias goes; `product` is dot_general's matrix product (None: numpy's)."""
    a, b = (_operand(x, out_type, sem.algorithm) for x in (lhs, rhs))
    acc = dot_general(a, b, *sem.dims, product=product)
    alpha = sem.alpha
    if alpha != 1:
        acc = acc * np.asarray(alpha if acc.dtype.kind == "c" else alpha.real, acc.dtype)
    if sem.beta != 0:
        if c is None:
            raise HloError(f"a gemm with beta={sem.beta:g} needs its c operand")
        acc = acc + np.asarray(sem.beta, acc.dtype) * to_accumulation(c, out_type)
    info = sem.epilogue_info
    if info.adds_bias:
        if bias is None:
            raise HloError(f"a gemm with epilogue {sem.epilogue} needs its bias operand")
        acc = add_bias(acc, out_minor_to_major, to_accumulation(bias, out_type), bias_minor_to_major)
    pre = acc
    if info.activation is not None:
        acc = ACTIVATIONS[info.activation](acc)
    return GemmValues(to_element_type(acc, out_type), pre, acc)
