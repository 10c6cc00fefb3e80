"""AlgebraicSimplifier ("algsimp") as a pass: its rewrite table is fully tested, its options are
XLA:GPU's, it leaves fusion computations and control dependencies alone, one run is one sweep,
the layout queries agree with brute force, and a sweep is linear in the module size."""

import importlib
import itertools

import numpy as np
import pytest
from algsimp_cases import assert_same_results, module_text
from pass_testlib import check_pass, check_unchanged, run_pass

from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.hlo.shape import Shape
from hlo_common.hlo_pass.pass_base import PASS_REGISTRY
from hlo_opt.passes import load_all_passes
from hlo_opt.passes.algebraic_simplifier import AlgebraicSimplifier
from hlo_opt.passes.algsimp import REWRITES, all_rewrites
from hlo_opt.passes.algsimp.shapes import common_factors, reshape_is_bitcast, transpose_is_bitcast

CASE_MODULES = ["test_algsimp_arithmetic", "test_algsimp_division", "test_algsimp_logical",
                "test_algsimp_shape_ops", "test_algsimp_slicing", "test_algsimp_reductions",
                "test_algsimp_arg_min_max"]


def all_cases():
    return [case for name in CASE_MODULES for case in importlib.import_module(name).CASES]


def test_every_rewrite_has_one_case_with_a_positive_and_a_negative_module():
    names = [fn.__name__ for fn in all_rewrites()]
    cases = all_cases()
    case_names = [c.name for c in cases]
    assert len(names) == len(set(names)), "two rewrites share a name"
    assert sorted(case_names) == sorted(names), (
        f"rewrites without a case: {sorted(set(names) - set(case_names))}; "
        f"cases without a rewrite: {sorted(set(case_names) - set(names))}")
    assert all(c.negative for c in cases)
    assert len(names) >= 60


def test_every_rewrite_says_which_xla_rewrite_it_is():
    for fn in all_rewrites():
        doc = (fn.__doc__ or "").strip()
        assert doc.startswith("Handle"), f"{fn.__name__}: docstring should name XLA's Handle<Op>: {doc!r}"
        assert len(doc.split(":", 1)[1].split()) >= 3, f"{fn.__name__}: say what it rewrites"


def test_rewrite_table_is_keyed_by_known_opcodes():
    from hlo_common.hlo.opcodes import OPCODES

    assert set(REWRITES) <= set(OPCODES)


def test_registered_under_xla_name_and_in_the_gpu_pipeline():
    from hlo_opt.pipelines import PLANNED_PASSES, build_gpu_pipeline

    load_all_passes()
    assert PASS_REGISTRY["algsimp"] is AlgebraicSimplifier
    assert "algsimp" not in PLANNED_PASSES

    def names(p):
        inner = getattr(p, "inner", None)
        if inner is not None:
            return names(inner)
        return [n for q in getattr(p, "passes", []) for n in names(q)] or [p.name]

    sequence = build_gpu_pipeline()
    flat = [n for pipeline in sequence.pipelines for n in names(pipeline)]
    assert flat.count("algsimp") >= 5


def test_defaults_are_xla_gpu_layout_insensitive_options():
    p = AlgebraicSimplifier()
    assert not p.is_layout_sensitive and p.minmax_propagate_nan and not p.enable_fast_math
    assert not p.supports_non_canonical_dots and p.unconditionally_simplify_reduce_of_transpose_or_reshape
    assert not p.enable_unconditional_reduce_of_concat_replacement and p.enable_dot_strength_reduction
    assert not p.use_convert_constant_folding and not p.run_to_fixed_point


FUSED = """
HloModule m
fused {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  b = f32[4] broadcast(z), dimensions={}
  ROOT a = f32[4] add(p, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  ROOT f = f32[4] fusion(x), kind=kLoop, calls=fused
}
"""


def test_fusion_computations_are_left_alone():
    check_unchanged("algsimp", FUSED)


def test_instructions_with_control_dependencies_are_left_alone():
    check_unchanged("algsimp", """
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  n = f32[4] negate(x)
  z = f32[] constant(0)
  b = f32[4] broadcast(z), dimensions={}
  ROOT a = f32[4] add(n, b), control-predecessors={n}
}
""")


SINK_TWICE = module_text("""
    c = f32[] parameter(0)
    b = f32[4] broadcast(c), dimensions={}
    ROOT n = f32[4] negate(b)""")


def test_one_run_is_one_post_order_sweep():
    """The sunk broadcast leaves a scalar-to-scalar broadcast that only a later sweep removes."""
    module, changed = run_pass("algsimp", SINK_TWICE)
    assert changed
    assert [i.opcode for i in module.entry.post_order()] == ["parameter", "broadcast", "negate", "broadcast"]
    assert AlgebraicSimplifier().run(module)


def test_run_to_fixed_point_reruns_each_computation():
    fixed, _ = run_pass("algsimp", SINK_TWICE, run_to_fixed_point=True)
    assert [i.opcode for i in fixed.entry.post_order()] == ["parameter", "negate", "broadcast"]
    assert AlgebraicSimplifier().run(fixed) is False
    stepwise = parse_module(SINK_TWICE)
    p = AlgebraicSimplifier()
    for _ in range(10):
        if not p.run(stepwise):
            break
    assert print_module(stepwise) == print_module(fixed)
    assert_same_results(SINK_TWICE, fixed)


def test_operands_that_die_with_a_replaced_instruction_are_removed():
    module = check_pass("algsimp", module_text("""
        x = f32[4] parameter(0)
        n = f32[4] negate(x)
        nn = f32[4] negate(n)
        z = f32[] constant(0)
        b = f32[4] broadcast(z), dimensions={}
        ROOT a = f32[4] add(nn, b)"""))
    assert [i.name for i in module.entry.instructions] == ["x"]


def test_output_is_deterministic():
    text = module_text("""
        x = f32[4] parameter(0)
        c = f32[] constant(2)
        b = f32[4] broadcast(c), dimensions={}
        d = f32[4] divide(x, b)
        s = f32[4] subtract(d, b)
        ROOT t = (f32[4], f32[4]) tuple(s, d)""")
    outs = {print_module(run_pass("algsimp", text)[0]) for _ in range(3)}
    assert len(outs) == 1


def _physical_positions(shape: Shape) -> np.ndarray:
    """For each row-major logical index, its offset in memory under the shape's layout."""
    dims = shape.dims
    strides = [0] * len(dims)
    step = 1
    for d in shape.minor_to_major:
        strides[d] = step
        step *= dims[d]
    grids = np.indices(dims).reshape(len(dims), -1)
    return (grids * np.array(strides)[:, None]).sum(axis=0)


def test_reshape_is_bitcast_agrees_with_brute_force_on_all_small_layouts():
    rng = np.random.default_rng(0)
    shapes = [(2, 3), (6,), (3, 2), (1, 6), (2, 1, 3), (6, 1), (1, 2, 3), (3, 1, 2)]
    checked = 0
    for a, b in itertools.product(shapes, shapes):
        for la in itertools.permutations(range(len(a))):
            lb_all = list(itertools.permutations(range(len(b))))
            for lb in [lb_all[k] for k in rng.choice(len(lb_all), min(3, len(lb_all)), replace=False)]:
                src, dst = Shape.array("f32", a, la), Shape.array("f32", b, lb)
                expected = bool(np.array_equal(_physical_positions(src), _physical_positions(dst)))
                assert reshape_is_bitcast(src, dst) == expected, (src, dst)
                checked += 1
    assert checked > 200


def test_transpose_is_bitcast_agrees_with_brute_force():
    for perm in itertools.permutations(range(3)):
        for la in itertools.permutations(range(3)):
            for lb in itertools.permutations(range(3)):
                src = Shape.array("f32", (2, 3, 4), la)
                dst = Shape.array("f32", tuple(src.dims[p] for p in perm), lb)
                data = np.arange(24).reshape(2, 3, 4)
                phys_src = np.empty(24, int)
                phys_src[_physical_positions(src)] = data.reshape(-1)
                phys_dst = np.empty(24, int)
                phys_dst[_physical_positions(dst)] = data.transpose(perm).reshape(-1)
                assert transpose_is_bitcast(src, dst, perm) == bool(np.array_equal(phys_src, phys_dst))


def test_common_factors_follow_xla_util():
    assert common_factors((2, 3, 4), (6, 4)) == [(0, 0), (2, 1), (3, 2)]
    assert common_factors((2, 3), (3, 2)) == [(0, 0), (2, 2)]
    assert common_factors((2, 1, 3), (2, 3)) == [(0, 0), (1, 1), (2, 1), (3, 2)]
    assert common_factors((4, 5), (4, 5)) == [(0, 0), (1, 1), (2, 2)]


def _negate_chain(n: int) -> str:
    lines = ["x = f32[8] parameter(0)", "z = f32[] constant(0)", "b = f32[8] broadcast(z), dimensions={}"]
    prev = "x"
    for k in range(n):
        lines.append(f"n{k} = f32[8] negate({prev})")
        lines.append(f"a{k} = f32[8] add(n{k}, b)")
        prev = f"a{k}"
    lines.append(f"ROOT r = f32[8] negate({prev})")
    return module_text("\n".join(lines))


def _sweep_calls(n: int) -> int:
    from work_count import python_calls

    module = parse_module(_negate_chain(n))
    changed = []
    calls = python_calls(lambda: changed.append(AlgebraicSimplifier().run(module)))
    assert changed == [True]
    return calls


def test_one_sweep_is_linear_in_the_module_size():
    """Every add(n, 0) and negate(negate) fires: k rewrites over ~3k instructions. 8x more
    instructions must cost about 8x the function calls (counted, not timed), far from the 64x of a
    quadratic sweep."""
    small, large = _sweep_calls(500), _sweep_calls(4000)
    assert large < 10 * small, (small, large)


def test_negate_chain_results_are_unchanged():
    text = _negate_chain(5)
    module, _ = run_pass("algsimp", text)
    assert_same_results(text, module)


@pytest.mark.parametrize("sensitive", [False, True])
def test_no_change_on_an_already_simple_module(sensitive: bool):
    check_unchanged("algsimp", module_text("""
        x = f32[4,3] parameter(0)
        y = f32[4,3] parameter(1)
        a = f32[4,3] add(x, y)
        ROOT m = f32[4,3] multiply(a, y)"""), is_layout_sensitive=sensitive)
