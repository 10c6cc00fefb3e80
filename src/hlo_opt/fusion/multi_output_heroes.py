"""Which heroes may share one multi-output kernel: the hero queries of multi-output fusion
(XLA's `GetRealHeroForMultiOutputFusion`, `FusionHeroesAreCompatible` and
`ShapesCompatibleForMultiOutputFusion` in `gpu_fusible.cc`), with the per-fusion cache of heroes
the pass keeps.

Where it sits: `hlo_opt.fusion.multi_output_fusible` asks these for its `heroes` and
`loop_shapes` rules and for which fusions are input-fusible; heroes themselves come from
`hlo_common.gpu.ir_emission_utils` (XLA's FindNonTrivialHero), reduction geometry from
`hlo_common.gpu.reduction_utils`.
"""

from __future__ import annotations

from hlo_common.gpu.ir_emission_utils import (
    find_non_trivial_hero, fusion_roots, is_intermediate, is_reshape_or_transpose_bitcast, reshape_is_bitcast,
    tiled_transpose_description,
)
from hlo_common.gpu.reduction_utils import (
    is_real_reduction_hero, is_reduction_from_or_to_contiguous_dimensions, reduction_dimensions,
)
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.fusion.gpu_fusible import ALLOW, FusionDecision, is_custom_fusion


class HeroCache:
    """(root, hero) pairs of fusions, computed once per fusion until `invalidate` (XLA's
    FusionInfoCache role): the pass asks about the same fusions for every operand they share."""

    def __init__(self):
        self._heroes: dict[int, tuple[HloInstruction, list]] = {}  # the fusion kept alive with them

    def heroes(self, fusion: HloInstruction) -> list[tuple[HloInstruction, HloInstruction]]:
        entry = self._heroes.get(id(fusion))
        if entry is None:
            entry = self._heroes[id(fusion)] = (fusion, _compute_heroes(fusion))
        return entry[1]

    def invalidate(self, instr: HloInstruction) -> None:
        self._heroes.pop(id(instr), None)


def _compute_heroes(fusion: HloInstruction) -> list[tuple[HloInstruction, HloInstruction]]:
    return [(root, find_non_trivial_hero(root)) for root in fusion_roots(fusion)]


def fusion_heroes(fusion: HloInstruction,
                  cache: HeroCache | None) -> list[tuple[HloInstruction, HloInstruction]]:
    return cache.heroes(fusion) if cache is not None else _compute_heroes(fusion)


def is_input_fusible_reduction(instr: HloInstruction, cache: HeroCache | None = None) -> bool:
    """A reduce the reduction emitter takes, or a fusion with such a hero (IsInputFusibleReduction)."""
    if instr.opcode == "fusion":
        return any(is_real_reduction_hero(root, hero) for root, hero in fusion_heroes(instr, cache))
    return is_reduction_from_or_to_contiguous_dimensions(instr)


def is_input_fusible_transpose(instr: HloInstruction, cache: HeroCache | None = None) -> bool:
    if instr.opcode == "bitcast" or is_custom_fusion(instr):
        return False
    if instr.opcode == "fusion":
        return any(tiled_transpose_description(hero) is not None for _, hero in fusion_heroes(instr, cache))
    return tiled_transpose_description(instr) is not None


def get_real_hero_for_multi_output_fusion(instr: HloInstruction,
                                          cache: HeroCache | None = None) -> HloInstruction:
    """The op whose shape constrains a multi-output fusion: a real reduction or tiled transpose
    hero of a root when there is one, else the root (the first output of a multi-output one)."""
    if instr.opcode != "fusion":
        return instr
    heroes = fusion_heroes(instr, cache)  # the root, or the root tuple's operands, with their heroes
    for node, hero in heroes:
        if is_real_reduction_hero(node, hero) or tiled_transpose_description(hero) is not None:
            return hero
    return heroes[0][0]


def is_column_reduction_hero(hero: HloInstruction) -> bool:
    return (is_reduction_from_or_to_contiguous_dimensions(hero)
            and not reduction_dimensions(hero).is_row)


def _as_fusion(instr: HloInstruction) -> HloInstruction | None:
    return instr if instr.opcode == "fusion" else None


def _path_of_intermediates(param: HloInstruction) -> bool:
    """From `param` to the root through single-user intermediate ops only."""
    if len(param.users) != 1:
        return False
    node = param.users[0]
    while node.users:
        if not is_intermediate(node) or len(node.users) > 1:
            return False
        node = node.users[0]
    return True


def _incompatible(reason: str) -> FusionDecision:
    return FusionDecision.forbid("heroes", reason)


def fusion_heroes_are_compatible(hero1: HloInstruction, hero2: HloInstruction,
                                 fusion1: HloInstruction | None = None,
                                 fusion2: HloInstruction | None = None) -> FusionDecision:
    """The heroes (of the fusions `fusion1` / `fusion2` when they are fused) can share a kernel."""
    reduce1 = is_reduction_from_or_to_contiguous_dimensions(hero1)
    reduce2 = is_reduction_from_or_to_contiguous_dimensions(hero2)
    tr1 = tiled_transpose_description(hero1)
    tr2 = tiled_transpose_description(hero2)
    nested1 = hero1.opcode == "transpose" and tr1 is None
    nested2 = hero2.opcode == "transpose" and tr2 is None
    if reduce1 and reduce2 and reduction_dimensions(hero1) != reduction_dimensions(hero2):
        return _incompatible("tiled reductions with different shapes")
    if tr1 is not None and tr2 is not None and not tr1.equivalent(tr2):
        return _incompatible("tiled transposes with different shapes")
    if ((tr1 is not None or reduce1) and nested2) or (nested1 and (tr2 is not None or reduce2)):
        return _incompatible("multi-output fusion of a nested transpose with an unnested hero op")
    if (tr1 is not None and reduce2) or (reduce1 and tr2 is not None):
        return _incompatible("multi-output fusion of a transpose and a reduction")
    if tr1 is not None or tr2 is not None:
        if fusion1 is not None and fusion2 is not None:
            for tr, producer, consumer in ((tr1, fusion1, fusion2), (tr2, fusion2, fusion1)):
                if tr is None or producer not in consumer.operands:
                    continue
                param = consumer.fused_computation().parameter(consumer.operands.index(producer))
                if not _path_of_intermediates(param):
                    return _incompatible("tiled transpose would become untiled")
                break
    return ALLOW


def _loop_shape(hero: HloInstruction) -> Shape:
    """The shape a multi-output kernel loops over for this hero: a reduction's or tiled
    transpose's input, else the hero's own shape. (XLA looks for the hero of `hero` inside a
    fusion again; a real hero is its own hero, and a root without one has no tiled transpose.)"""
    if is_reduction_from_or_to_contiguous_dimensions(hero) or tiled_transpose_description(hero) is not None:
        return hero.operands[0].shape
    return hero.shape


def shapes_compatible_for_multi_output_fusion(instr1: HloInstruction, instr2: HloInstruction,
                                              cache: HeroCache | None = None) -> FusionDecision:
    """One kernel loops over one shape: the heroes agree and their loop shapes are equal up to
    element type, or bitcasts of each other."""
    hero1 = get_real_hero_for_multi_output_fusion(instr1, cache)
    hero2 = get_real_hero_for_multi_output_fusion(instr2, cache)
    decision = fusion_heroes_are_compatible(hero1, hero2, _as_fusion(instr1), _as_fusion(instr2))
    if not decision:
        return decision
    l1, l2 = _loop_shape(hero1), _loop_shape(hero2)
    if not _equal_ignoring_element_type(l1, l2) and (
            l1.is_tuple or l2.is_tuple or not _reshape_or_transpose_bitcast(l1, l2)):
        return FusionDecision.forbid("loop_shapes", "different loop shapes")
    return ALLOW


def _reshape_or_transpose_bitcast(a: Shape, b: Shape) -> bool:
    """ShapeUtil::IsReshapeOrTransposeBitcast ignoring element types: a bitcast reshape, or the
    same elements in the same physical order."""
    return reshape_is_bitcast(a, b) or is_reshape_or_transpose_bitcast(a, b)


def _equal_ignoring_element_type(a: Shape, b: Shape) -> bool:
    if a.is_tuple or b.is_tuple:
        return (a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes)
                and all(_equal_ignoring_element_type(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes)))
    return a.dims == b.dims and a.minor_to_major == b.minor_to_major
