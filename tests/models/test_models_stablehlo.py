"""StableHLO input on the JAX programs of `testdata/models` (issue 19 item 6): each model's builder
(`testdata/models/make_modules.py`: flax, equinox, haiku, optax) lowered at test time with
`jax.jit(fn).lower(*args).as_text()` (StableHLO MLIR text, jax's default), written to a `.mlir`
file and read by `hlo_common.source.read_input`, the loader of all three tools (format detected
from the name and first bytes, converted by jaxlib's converter, then through the proto reader).

The module it gives runs on the interpreter with hlo-run's seed-0 arguments of the checked-in
`testdata/models/<name>.hlo` (jax's HLO of the same lowering, which `test_models.py` keeps what the
generator makes), and must give XLA:CPU's results for that module, judged as the models tier
judges its interpreter check (`test_models.judge`: f32 1e-4, 16-bit floats 2e-2, else no farther
from a float64 evaluation than XLA:CPU). The default run reads every SAMPLE-th model (about 10 s on
2 cores); `-m slow` reads them all.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import test_models

from hlo_common.hlo.parser import parse_module
from hlo_common.source import read_input

pytest.importorskip("jax", reason="jax lowers the models to StableHLO")
MODELS_DIR = Path(__file__).resolve().parents[2] / "testdata" / "models"
SAMPLE = 9


def _builders() -> dict:
    sys.path.insert(0, str(MODELS_DIR))
    try:
        import make_modules
    finally:
        sys.path.remove(str(MODELS_DIR))
    return make_modules.builders()


def _names() -> list[str]:
    return test_models.module_names()


def _check(name: str, tmp_path) -> None:
    import jax

    from hlo_common.interpreter.evaluator import evaluate

    fn, args = _builders()[name]()
    path = tmp_path / f"{name}.mlir"
    path.write_text(jax.jit(fn).lower(*args).as_text())
    source = read_input(path)
    assert source.format == "stablehlo" and source.text.startswith("HloModule ")
    module = parse_module(source.text, source.name)
    reference = parse_module(test_models.text(name), name)
    assert [p.shape for p in module.entry.parameters] == [p.shape for p in reference.entry.parameters]
    actual = evaluate(module, test_models.arguments(name))
    outcome = test_models.judge(name, "interpreter", actual, test_models.xla_cpu(name, False))
    assert outcome.ok, f"{name} from StableHLO: {outcome.reason}"


@pytest.mark.parametrize("name", _names()[::SAMPLE])
def test_stablehlo_of_a_model_sample_gives_xla_cpu_s_results(name, tmp_path) -> None:
    _check(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for k, n in enumerate(_names()) if k % SAMPLE])
def test_stablehlo_of_every_other_model_gives_xla_cpu_s_results(name, tmp_path) -> None:
    _check(name, tmp_path)


def test_every_model_has_a_builder() -> None:
    """The checked-in modules and the builders lowered above are the same set."""
    assert sorted(_builders()) == _names()
