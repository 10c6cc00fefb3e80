"""GemmFusionThunk on the host: a Triton GEMM fusion (prologue, dot, epilogue) run as one library
call by evaluating its fused computation with numpy, an f32-accumulating dot through the host's
own GEMM (`host_gemm.host_product`, on the host threads), others through numpy's BLAS.

Where it sits: hlo-run's host platform (`backends/host.py`) calls `run_gemm_fusion` for every
GemmFusionThunk, which hlo-codegen emits for the host target where the cuda target launches the
fusion's kernel. The common fusions (a dot with an elementwise epilogue) run by a direct plan
(`host_gemm_direct`: the GEMM writes the output buffer, the epilogue runs in its store or per
block of rows); the others are evaluated by the reference interpreter (`hlo_common.interpreter`).
Both give the interpreter's values but for the order of a dot's sums (as the host's GemmThunks
do, and cuBLAS or Triton do on the GPU), and run a large GEMM at the speed of the host GEMM rather
than as an elemental loop kernel (numpy's single-threaded BLAS ran the f32 MLP's two [2048,512] x
[512,2048] fusions in 36 ms each on one core, the host GEMM in about 17).

    >>> run_gemm_fusion(thunk.computation, thunk.profile_annotation, [lhs, rhs], out=view)  # doctest: +SKIP
    (logical numpy arrays in, the fusion's logical result out: `view` itself when written there)
"""

from __future__ import annotations

import numpy as np

from hlo_common.errors import HloError

_MODULES: dict[str, object] = {}  # computation text -> parsed module (a manifest repeats fusions)
_PLANS: dict[str, object] = {}  # computation text -> its host_gemm_direct plan, or None


def _module(text: str, name: str):
    module = _MODULES.get(text)
    if module is None:
        from hlo_common.hlo.parser import parse_module

        try:
            module = parse_module(text, f"GEMM fusion {name}")
        except Exception as exc:  # noqa: BLE001 - a bad manifest: one line naming the thunk
            raise HloError(f"GEMM fusion {name}: its computation does not parse: {exc}") from None
        _MODULES[text] = module
    return module


def run_gemm_fusion(text: str, name: str, operands: list[np.ndarray], out: np.ndarray | None = None,
                    direct: bool = True) -> np.ndarray:
    """The fusion's result for `operands` (logical arrays, in parameter order). `out` (optional:
    a logical view of the output buffer) receives the result where the fusion has a direct plan
    (`host_gemm_direct`): the result is then `out` itself. `direct=False` always evaluates the
    fusion with the interpreter (the tests compare the two)."""
    from hlo_common.interpreter import blas
    from hlo_common.interpreter.evaluator import evaluate
    from hlo_common.interpreter.numeric import f32_product
    from hlo_run.host_gemm import host_product

    module = _module(text, name)
    params = module.entry.parameters
    if len(params) != len(operands):
        raise HloError(f"GEMM fusion {name}: {len(operands)} operands for {len(params)} parameters")
    if direct:
        if text not in _PLANS:
            from hlo_run.host_gemm_direct import direct_plan

            _PLANS[text] = direct_plan(module)
        plan = _PLANS[text]
        if plan is not None:
            with blas.single_threaded():
                result = plan.run(list(operands), out)
            if result is not None:
                return result
    # numpy's BLAS single-threaded, as in the interpreter: spinning BLAS threads on busy cores cost 10x
    with blas.single_threaded(), f32_product(host_product):
        return np.asarray(evaluate(module, list(operands)))


__all__ = ["run_gemm_fusion"]
