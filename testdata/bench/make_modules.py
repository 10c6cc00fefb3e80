"""Regenerate the bench set's own modules: `testdata/bench/<name>.hlo` (see `bench/bench_set.py`).

The rest of the bench set lives in `testdata/` and `testdata/fusion/`; these are the modules it
adds: a bf16 layer norm as large as the GELU of the emitters document (12.6M elements), and a
small convolution block (two 3x3 convolutions, NHWC activations, HWIO kernels, each followed by
a bias add and a relu, as `flax.linen.Conv` and `jax.nn.relu` make it). They are lowered by jax
to pre-optimization HLO text with default layouts, as `testdata/fusion/make_modules.py` does
(whose building blocks and lowering this script reuses); weights are entry parameters, so
hlo-run makes them from --seed.

    .venv/bin/python testdata/bench/make_modules.py            # every module
    .venv/bin/python testdata/bench/make_modules.py -k conv    # only matching names

The output is the same on every run with the same jax version (0.10.2).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import lax

HERE = Path(__file__).resolve().parent


def _fusion_generator():
    """testdata/fusion/make_modules.py as a module (its layer_norm, spec and layout rewrite)."""
    path = HERE.parent / "fusion" / "make_modules.py"
    spec = importlib.util.spec_from_file_location("fusion_make_modules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FUSION = _fusion_generator()
f32, bf16 = jnp.float32, jnp.bfloat16
spec = FUSION.spec


def conv_bias_relu(x, w, b):
    """One NHWC convolution (HWIO kernel, stride 1, SAME padding), a bias add and a relu."""
    y = lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jax.nn.relu(y + b)


def conv_block(x, w1, b1, w2, b2):
    return conv_bias_relu(conv_bias_relu(x, w1, b1), w2, b2)


N, HW, C1, C2 = 8, 32, 32, 64  # batch, height = width, input and block channels
# name -> (function, argument specs).
MODULES: dict[str, tuple] = {
    "layernorm_bf16": (FUSION.layer_norm, (spec((6, 512, 4096), bf16), spec((4096,), bf16),
                                           spec((4096,), bf16))),
    "conv_block": (conv_block, (spec((N, HW, HW, C1)), spec((3, 3, C1, C2)), spec((C2,)),
                                spec((3, 3, C2, C2)), spec((C2,)))),
}


def lower(name: str) -> str:
    """The pre-optimization HLO text of one module, every layout the default (major to minor)."""
    fn, args = MODULES[name]
    text = jax.jit(fn).lower(*args).as_text(dialect="hlo")
    text = FUSION._LAYOUT.sub(FUSION._default_layout, text)
    return text if text.endswith("\n") else text + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", dest="only", default="", help="only modules whose name contains this")
    opts = ap.parse_args(argv)
    for name in (n for n in MODULES if opts.only in n):
        path = HERE / f"{name}.hlo"
        path.write_text(lower(name))
        print(f"wrote {path.relative_to(HERE)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
