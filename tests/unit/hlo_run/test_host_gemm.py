"""hlo-run's host GemmThunk (hlo_run.host_gemm): the products it writes straight into the output
buffer (alpha 1, no epilogue: beta 0, or beta 1 adding c, which aliases the output as XLA's
rewriter makes it; any real alpha) have exactly the bits of the general path (`evaluate_gemm` on the same
product), which is the interpreter's formula."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.manifest.manifest import parse_shape_text
from hlo_common.interpreter.gemm_semantics import evaluate_gemm
from hlo_common.manifest.thunks import GemmConfig, MatrixLayout
from hlo_run.host_gemm import host_product, run_gemm, semantics_of


def _config(beta: float, alpha: float = 1.0) -> GemmConfig:
    def layout(rows, cols):
        return MatrixLayout(1, rows, cols, "row_major", cols, rows * cols)

    return GemmConfig("f32[40,70]{1,0}", "f32[70,50]{1,0}", "f32[40,50]{1,0}", (), (), (1,), (0,),
                      layout(40, 70), layout(70, 50), layout(40, 50), alpha_real=alpha, beta=beta)


@pytest.mark.parametrize("beta, alpha", [(0.0, 1.0), (1.0, 1.0), (0.0, 0.125), (1.0, 0.3), (2.0, 1.0)])
def test_direct_results_equal_the_general_path(beta, alpha):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((40, 70), np.float32), rng.standard_normal((70, 50), np.float32)
    c = rng.standard_normal((40, 50), np.float32)
    cfg = _config(beta, alpha)
    out_shape = parse_shape_text(cfg.output_shape, "test")
    want = evaluate_gemm(semantics_of(cfg), out_shape.element_type, a, b, c if beta else None,
                         product=host_product).result
    buffer = c.copy()  # the output aliases c, as output_to_operand_aliasing makes it
    got = run_gemm(cfg, out_shape, a, b, buffer, out=buffer)
    np.testing.assert_array_equal(got, want)
    if beta in (0, 1):
        assert np.shares_memory(got, buffer)  # written in place, no copy back
