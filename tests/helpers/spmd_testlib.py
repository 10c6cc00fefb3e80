"""The SPMD tier's driver (tests/spmd/): a sharded module through hlo-opt's SPMD passes, its
global arguments split by the parameters' shardings, the N-device interpreter, and the results
gathered by the root's sharding, to compare with XLA:CPU's recorded global results."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "testdata" / "spmd"
SPMD_PASSES = ("sdy-round-trip-import", "sharding-remover", "sharding-propagation", "spmd-partitioning", "dce")


def devices_of(path: Path) -> int:
    return int(re.search(r"_n(\d+)$", path.stem).group(1))


def partition(text: str, n: int, name: str = "m", passes=SPMD_PASSES):
    """The module parsed, given num_partitions n, run through `passes` and verified."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo_pass.pass_base import PASS_REGISTRY
    from hlo_common.hlo_pass.pipeline import verify
    from hlo_opt.passes import load_all_passes

    load_all_passes()
    module = parse_module(text, name)
    module.set_header_attr("num_partitions", str(n))
    for p in passes:
        PASS_REGISTRY[p]().run(module)
    verify(module, "verification failed after partitioning")
    return module


def run_global(module, args: list[np.ndarray], n: int, shapes=None) -> list[np.ndarray]:
    """Run the partitioned `module` on n interpreter devices from global arguments; the global
    results (each replica of a tile checked to agree; `shapes`: the global results' dims, which
    uneven tiles need to cut their padding off)."""
    from hlo_common.hlo.sharded_arrays import gather, split
    from hlo_common.interpreter.devices import run_devices

    params = sorted(module.entry.parameters, key=lambda p: p.parameter_number)
    pieces = [_split_value(a, p.sharding, n, split) for a, p in zip(args, params)]
    per_device = [[pieces[k][d] for k in range(len(params))] for d in range(n)]
    results = run_devices(module, per_device, 1, n)
    root = module.entry.root
    if root.shape.is_tuple:
        shardings = list(root.sharding.elements) if root.sharding is not None else [None] * len(results[0])
        leaves = [[r[k] for r in results] for k in range(len(results[0]))]
    else:
        shardings, leaves = [root.sharding], [results]
    out = []
    for k, (sharding, per) in enumerate(zip(shardings, leaves)):
        array, disagree = gather(per, sharding, None if shapes is None else shapes[k])
        assert not disagree, f"out{k}: replicas {disagree} disagree"
        out.append(array)
    return out


def _split_value(value, sharding, n: int, split):
    """Each device's piece of a global argument (a tuple: element by element)."""
    if not isinstance(value, tuple):
        return split(value, sharding, n)
    shardings = list(sharding.elements) if sharding is not None and sharding.kind == "tuple" \
        else [sharding] * len(value)
    parts = [split(v, s, n) for v, s in zip(value, shardings)]
    return [tuple(p[d] for p in parts) for d in range(n)]


COLLECTIVE_OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                  "collective-broadcast")


def collective_counts(module) -> dict[str, int]:
    counts: dict[str, int] = {}
    for comp in module.computations:
        for instr in comp.instructions:
            op = instr.opcode.removesuffix("-start")
            if op in COLLECTIVE_OPS:
                counts[op] = counts.get(op, 0) + 1
    return counts


def collective_opcodes(where) -> list[str]:
    """The collectives of a module (all its computations) or of one computation, their opcodes
    sorted (async starts not counted)."""
    comps = [where] if hasattr(where, "instructions") else where.computations
    return sorted(i.opcode for c in comps for i in c.instructions if i.opcode in COLLECTIVE_OPS)



def _random_argument(shape, rng):
    if shape.is_tuple:
        return tuple(_random_argument(s, rng) for s in shape.tuple_shapes)
    kind = shape.element_type.name
    if kind == "pred":
        return rng.integers(0, 2, shape.dims).astype(bool)
    if kind in ("s32", "u32"):
        return rng.integers(0, 4, shape.dims).astype(np.int32 if kind == "s32" else np.uint32)
    return np.asarray(rng.standard_normal(shape.dims), np.float32)


def signature(instr) -> str:
    """`operand shapes -> shape` of an instruction, per device after partitioning."""
    def text(s):
        return s.to_string(print_layout=False)
    return f"{', '.join(text(o.shape) for o in instr.operands)} -> {text(instr.shape)}"


def check_partitioned(text: str, n: int, name: str, local: str, collectives: list[str], args_for,
                      tol: float):
    """The module partitioned for n devices: its root's per-device shape is `local`, its
    collectives (sorted opcodes) `collectives`, and on the arguments `args_for(parameters)` makes
    from the unpartitioned module's parameters (in order) it gives, on n interpreter devices,
    what the unpartitioned module gives on one (within `tol`). The partitioned module."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.interpreter.evaluator import Evaluator

    module = partition(text, n, name)
    assert module.entry.root.shape.to_string(print_layout=False) == local
    assert collective_opcodes(module) == collectives
    original = parse_module(text, "original")
    args = args_for(sorted(original.entry.parameters, key=lambda p: p.parameter_number))
    expected = Evaluator().evaluate(original, list(args))
    (got,) = run_global(module, args, n)
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    return module


def check_xla_case(text: str, n: int, root: str, collectives: list[tuple[str, str]],
                   key: tuple[str, list[str]] | None = None, seeds=(17,)):
    """A case of XLA's spmd_partitioner_test.cc partitioned for n devices: the root's per-device
    shape is `root`, the collectives ((opcode, per-device shape)) are `collectives`, the
    instructions of opcode key[0] have the signatures key[1] (sorted), and from random global
    arguments (one draw per seed) the partitioned program on n interpreter devices gives what the
    unpartitioned module gives on one device."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.interpreter.evaluator import Evaluator

    module = partition(text, n)
    assert module.entry.root.shape.to_string(print_layout=False) == root
    got = sorted((i.opcode, i.shape.to_string(print_layout=False)) for c in module.computations
                 for i in c.instructions if i.opcode in COLLECTIVE_OPS)
    assert got == sorted(collectives)
    if key is not None:
        opcode, expected_signatures = key
        found = [signature(i) for c in module.computations for i in c.instructions if i.opcode == opcode]
        assert sorted(found) == sorted(expected_signatures)
    original = parse_module(text, "original")
    params = sorted(original.entry.parameters, key=lambda p: p.parameter_number)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        args = [_random_argument(p.shape, rng) for p in params]
        expected = Evaluator().evaluate(original, list(args))
        expected = list(expected) if isinstance(expected, tuple) else [expected]
        results = run_global(module, args, n)
        assert len(results) == len(expected)
        for r, e in zip(results, expected):  # long f32 sums: the error scales with the largest value
            scale = max(1.0, float(np.max(np.abs(e)))) if np.size(e) else 1.0
            np.testing.assert_allclose(r, e, rtol=1e-5, atol=1e-5 * scale)
    return module
