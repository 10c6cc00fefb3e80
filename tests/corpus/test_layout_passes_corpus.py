"""Corpus tier `layout-passes`: layout-assignment -> reshape-decomposer -> move_copy_to_users ->
layout_normalization -> the reduction normalizers and tree-reduction-rewriter -> cublas-gemm-rewriter
on every corpus module that parses and verifies.

Per module: the verifier passes after every pass; layouts are consistent after layout-assignment
(XLA's CheckLayouts); after the reduction passes every op layout_normalization handles is on the
default layout and every reduce reads default-layout inputs; and on modules the interpreter runs,
the results are unchanged (f32 1e-4, bf16/f16 2e-2, f8 1e-1, integers exact; a deterministic third
of the loop-free ones in the default run, all under `slow`). A module that cannot meet this is listed under
`layout-passes` in expected_failures.txt with the reason (none at the time of writing).
`test_default_layout_census` (slow) prints how many modules end with every non-bitcast op on the
default layout.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time

import numpy as np
import pytest
from corpus_lib import corpus_modules, expected_failures, require_corpus

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.opcodes import OPCODES
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.verifier import verify_module
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_opt.layout_checks import check_layouts
from hlo_opt.layout_util import has_default_layout
from hlo_common.hlo_pass.pass_base import PASS_REGISTRY
from hlo_opt.passes import load_all_passes
from hlo_opt.passes.layout_normalization import _HANDLERS, _NOT_ELEMENTWISE_HERE

TIER = "layout-passes"
LAYOUT = ["layout-assignment", "reshape-decomposer", "move_copy_to_users", "layout_normalization"]
REDUCTION = ["reduction-degenerate-dim-remover", "reduction-layout-normalizer", "reduction-dimension-grouper",
             "reduction-splitter", "tree-reduction-rewriter"]
GEMM = ["cublas-gemm-rewriter"]
MODULE_IDS = [mid for mid, _text in corpus_modules()]
_TEXT = dict(corpus_modules())
_NO_INTERPRETER = frozenset({"infeed", "recv", "send", "rng", "rng-bit-generator",
                             "rng-get-and-update-state"})
_MAX_ELEMENTS = 5_000_000  # values the interpreter would compute; bigger modules are not evaluated
EVAL_LIMIT_S = 60  # an input module the interpreter needs longer for is not evaluated
_TOLERANCE = {"f64": 1e-4, "f32": 1e-4, "bf16": 2e-2, "f16": 2e-2}
# custom-call's handler normalizes cuDNN convolution calls only (tuple-shaped, so not checked below);
# every other custom call keeps its layout behind bitcasts (the default action), as in XLA
_NORMALIZED_OPS = (frozenset(_HANDLERS) - {"custom-call"}) | {
    op.name for op in OPCODES.values() if op.is_elementwise and op.name not in _NOT_ELEMENTWISE_HERE}


def _parse(module_id: str) -> HloModule | None:
    try:
        module = parse_module(_TEXT[module_id], module_id)
        verify_module(module)
    except HloError:
        return None
    return module


def _run(module: HloModule, names: list[str]) -> None:
    load_all_passes()
    for name in names:
        PASS_REGISTRY[name]().run(module)
        verify_module(module)


def _layout_problems(module: HloModule) -> list[str]:
    """Ops layout_normalization rewrites still off the default layout, reduces on other inputs."""
    out = []
    for comp in non_fusion_computations(module):
        for instr in comp.instructions:
            shape = instr.shape
            if instr.opcode in _NORMALIZED_OPS and shape.is_array and not has_default_layout(shape):
                out.append(f"%{instr.name} ({instr.opcode}) is on {instr.shape}")
            if instr.opcode == "reduce" and not all(has_default_layout(o.shape) for o in instr.operands):
                out.append(f"%{instr.name} reduces a non-default-layout input")
    return out


def _leaves(value) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def _runnable(module: HloModule) -> bool:
    instrs = [i for c in module.computations for i in c.instructions]
    if any(i.opcode in _NO_INTERPRETER for i in instrs):
        return False
    elements = sum(s.num_elements for i in instrs for _, s in i.shape.leaf_shapes() if s.is_array)
    return elements <= _MAX_ELEMENTS


class _TimeUp(BaseException):
    """Raised by the alarm; a BaseException so that no `except Exception` swallows it."""


@contextlib.contextmanager
def _time_limit(seconds: float):
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum, frame):
        raise _TimeUp()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _compare(got: np.ndarray, want: np.ndarray, type_name: str, where: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, where
    tol = _TOLERANCE.get(type_name, 1e-1 if type_name.startswith("f8") else None)
    if tol is None:
        np.testing.assert_array_equal(got, want, err_msg=where)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol,
                                   equal_nan=True, err_msg=where)


def random_arguments(module: HloModule, seed: int = 0) -> list[np.ndarray]:
    """Seeded inputs: small integers, booleans, floats in [-2, 2)."""
    rng = np.random.default_rng(seed)
    args = []
    for param in module.entry.parameters:
        shape = param.shape
        if not shape.is_array:
            raise TypeError(f"parameter {param.name} is not an array")
        et = shape.element_type
        if et.is_pred:
            args.append(rng.integers(0, 2, size=shape.dims).astype(bool))
        elif et.is_integer:
            args.append(rng.integers(-5 if et.is_signed else 0, 6, size=shape.dims).astype(et.np_dtype))
        else:
            args.append(rng.uniform(-2.0, 2.0, size=shape.dims).astype(et.np_dtype))
    return args


def check_module(module_id: str, numerics: bool) -> None:
    module = _parse(module_id)
    if module is None:
        pytest.skip("does not parse or verify (see the parse and verify tiers)")
    want = args = None
    before_s = 0.0
    if numerics and _runnable(module):
        from hlo_common.interpreter import evaluate

        start = time.perf_counter()
        try:
            args = random_arguments(module)
            with _time_limit(EVAL_LIMIT_S):
                want = _leaves(evaluate(module, args))
        except (HloError, AttributeError, TypeError, ValueError, _TimeUp):
            want = None  # the interpreter tier says why it cannot run this module (or it is too slow)
        before_s = time.perf_counter() - start
    _run(module, LAYOUT[:1])
    problems = check_layouts(module)
    assert not problems, "after layout-assignment:\n" + "\n".join(problems)
    _run(module, LAYOUT[1:] + REDUCTION)
    problems = _layout_problems(module)
    assert not problems, "after layout_normalization and the reduction passes:\n" + "\n".join(problems)
    _run(module, GEMM)
    if want is not None:
        from hlo_common.interpreter import evaluate

        with _time_limit(4 * before_s + 30):
            got = _leaves(evaluate(module, args))
        root = parse_module(_TEXT[module_id]).entry.root
        types = [s.element_type.name for _, s in root.shape.leaf_shapes()]
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            _compare(g, w, types[k] if k < len(types) else "", f"{module_id} output leaf {k}")


_INDEX = {mid: k for k, mid in enumerate(MODULE_IDS)}


def _sampled(module_id: str) -> bool:
    """The default run evaluates every third module, leaving loops (slow to interpret) to `slow`."""
    return _INDEX.get(module_id, 0) % 3 == 0 and " while(" not in _TEXT.get(module_id, "")


def _expect(module_id: str, numerics: bool) -> None:
    require_corpus()
    expected = expected_failures(TIER).get(module_id)
    try:
        check_module(module_id, numerics)
    except (AssertionError, HloError):
        if expected is None:
            raise
        return
    if expected is not None:
        pytest.fail(f"{module_id} passes but is listed under {TIER}: {expected}")


@pytest.mark.parametrize("module_id", MODULE_IDS or ["<no corpus>"])
def test_layout_passes_corpus_module(module_id: str) -> None:
    _expect(module_id, numerics=_sampled(module_id))


@pytest.mark.slow
@pytest.mark.parametrize("module_id", [m for m in MODULE_IDS if not _sampled(m)] or ["<no corpus>"])
def test_layout_passes_corpus_numerics(module_id: str) -> None:
    _expect(module_id, numerics=True)


@pytest.mark.slow
def test_default_layout_census(capsys) -> None:
    """How many modules end with every non-bitcast op (parameters included) on default layouts."""
    require_corpus()
    total = strict = 0
    for module_id in MODULE_IDS:
        module = _parse(module_id)
        if module is None:
            continue
        _run(module, LAYOUT + REDUCTION + GEMM)
        total += 1
        strict += all(has_default_layout(s) for c in non_fusion_computations(module) for i in c.instructions
                      if i.opcode != "bitcast" for _, s in i.shape.leaf_shapes() if s.is_array)
    with capsys.disabled():
        print(f"\n{TIER}: {strict} of {total} modules have every non-bitcast op on default layouts")
    assert strict >= 0.9 * total
