"""Layout variants of a module, for the layout tiers (`tests/corpus/test_layout_corpus.py`) and the
layout unit tests (`tests/unit/hlo_codegen/test_layout_sensitive_pipe.py`).

A variant changes no value, only where values live:

- (a) every entry parameter and every array leaf of the entry result of rank >= 2 takes a seeded
  permuted layout, written where XLA's text carries it: the parameter's shape and the module's
  `entry_computation_layout` (layout assignment takes both as mandatory, as XLA's LayoutAssignment
  takes the entry's ComputationLayout); variant 0 makes them column-major (`{0,1,...}`), odd
  variants draw a random non-identity permutation each, even ones any permutation (so some stay
  row-major beside permuted ones);
- (b) `knob_seed` is given to layout-assignment's `vary_layouts_seed`, which moves every dot's
  result into another layout cuBLAS can write and every convolution into a cuDNN layout triple.

    text, seed = variant_text(module_text, "m.hlo", 1)
    build_gpu_pipeline(pipeline_overrides(seed)).run_with(parse_module(text), RunOptions())

Everything is seeded by the module id and the variant number (zlib.crc32, not `hash`), so a
variant reproduces whatever PYTHONHASHSEED is.
"""

from __future__ import annotations

import random
import zlib

from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.shape import Layout, Shape


def variant_seed(module_id: str, k: int) -> int:
    return zlib.crc32(f"{module_id}@{k}".encode())


def pipeline_overrides(knob_seed: int | None) -> dict[str, dict] | None:
    """The `build_gpu_pipeline(overrides)` that turns the layout knob on (None: off)."""
    return None if knob_seed is None else {"layout-assignment": {"vary_layouts_seed": knob_seed}}


def permuted_m2m(rank: int, rng: random.Random | None, any_order: bool = False) -> tuple[int, ...]:
    """Column-major (rng None) or a random minor-to-major order, other than the default unless
    `any_order`."""
    default = tuple(range(rank - 1, -1, -1))
    if rng is None:
        return tuple(range(rank))
    while True:
        m2m = tuple(rng.sample(range(rank), rank))
        if m2m != default or any_order:
            return m2m


def _permuted(shape: Shape, rng: random.Random | None, any_order: bool) -> Shape:
    if shape.is_tuple:
        return Shape.tuple_of(_permuted(s, rng, any_order) for s in shape.tuple_shapes)
    if not shape.is_array or shape.rank < 2 or (shape.layout is not None and shape.layout.extra("T")):
        return shape  # tiled layouts name their dims: left as written
    extras = shape.layout.extras if shape.layout is not None else ()
    return Shape(shape.element_type, shape.dims, Layout(permuted_m2m(shape.rank, rng, any_order), extras),
                 shape.tuple_shapes, shape.dynamic)


def permute_entry_layouts(module: HloModule, k: int, seed: int) -> bool:
    """Variant (a) on a parsed module, in place; whether any layout changed."""
    rng, any_order = (None if k == 0 else random.Random(seed)), k > 0 and k % 2 == 0
    entry = module.entry
    layout = module.entry_computation_layout
    before = [p.shape for p in entry.parameters] + [layout[1] if layout is not None else entry.root.shape]
    for p in entry.parameters:
        p.shape = _permuted(p.shape, rng, any_order)
    module.entry_computation_layout = ([p.shape for p in entry.parameters],
                                       _permuted(before[-1], rng, any_order))
    after = module.entry_computation_layout[0] + [module.entry_computation_layout[1]]
    return after != before


def has_layout_freedom(module: HloModule) -> bool:
    """Whether a variant can differ from the module: an entry value of rank >= 2, a dot or a
    convolution."""
    entry = module.entry
    shapes = [p.shape for p in entry.parameters] + [s for _, s in entry.root.shape.leaf_shapes()]
    if any(s.is_array and s.rank >= 2 for s in shapes):
        return True
    return any(i.opcode in ("dot", "convolution") for c in module.computations for i in c.instructions)


def variant_text(text: str, module_id: str, k: int) -> tuple[str, int]:
    """(the module text with variant k's entry layouts, the knob seed of variant k)."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module

    module = parse_module(text, module_id)
    module.is_scheduled = False  # a schedule says the layouts are final: hlo-opt would not run
    seed = variant_seed(module_id, k)
    permute_entry_layouts(module, k, seed)
    return print_module(module), seed
