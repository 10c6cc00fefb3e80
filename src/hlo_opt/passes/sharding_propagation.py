"""ShardingPropagation ("sharding-propagation"): every instruction of the entry computation (and
of the loops and conditionals it runs) gets a sharding, carried forward and backward from the
ones the user wrote (xla/service/sharding_propagation.cc).

Where it sits: in the `spmd-partitioner` pipeline before `spmd-partitioning`, only when the module
has num_partitions > 1. First the calls of the entry and of its loops' and conditionals' bodies
are inlined (shard_map bodies excepted), as XLA's SPMD pipeline runs CallInliner first. User
annotations come first and are never changed: the shardings of
parameters, of `Sharding` custom calls and of any instruction that has one; an entry parameter
or root without one is replicated (jax's allow_spmd_sharding_propagation_to_parameters/output are
false). Then, until nothing changes, a forward sweep gives each instruction without a sharding
the most tiled one its operands imply, and a backward sweep the most tiled one its users ask
for, through elementwise ops, broadcast, reshape (where tiled dims keep their blocks), transpose,
dot and reduce (`hlo_opt.spmd.rules`, `hlo_opt.spmd.dot_dims`), slice, pad, concatenate,
reduce-window, dynamic-(update-)slice, gather, scatter, convolution and sort
(`hlo_opt.spmd.window_rules`, `gather_dims`, `conv_handlers`, `sort_handlers`), and tuples leaf
by leaf. A while
loop's carried sharding comes from around it, refined by what its body makes of it, and is then
fixed on the body's and condition's parameter and the body's root, whose instructions are
propagated in turn; a conditional's branches take their operands' shardings and the result's
(`hlo_opt.spmd.control_rules`). What is still open at the end is replicated.
`--dump-pass-re sharding-propagation` shows each instruction's sharding after it.

Left for later: XLA's aggressiveness levels and refinement of partial shardings of annotated
instructions.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.hlo_utils import NameUniquer
from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.sharding import HloSharding
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.passes.call_inliner import inline_call, is_inlineable
from hlo_opt.spmd import control_rules, dot_dims, manual, rules, sort_handlers, uneven
from hlo_opt.spmd.config import needs_partitioning, num_partitions
from hlo_opt.spmd.errors import SpmdError
from hlo_opt.spmd.tiling import Tiling, from_sharding


@register_pass
@dataclass
class ShardingPropagation(HloPass):
    """Gives every entry instruction a sharding from the user's annotations."""

    name = "sharding-propagation"

    def run(self, module: HloModule) -> bool:
        if not needs_partitioning(module):
            return False
        n = num_partitions(module)
        changed = _inline_calls(module)
        tilings = propagate(module, n)
        for instr, t in tilings.items():
            if instr.sharding is None:  # the user's annotations stay as written
                instr.sharding = to_hlo_sharding(t)
                changed = True
        return changed


def _inline_calls(module: HloModule) -> bool:
    """The calls of the entry and of the loops it runs (jax wraps jnp.pad, jnp.roll, a scan's
    step, ... in them) replaced by their bodies, so that propagation and the partitioner see
    through them, as XLA's SPMD pipeline runs CallInliner first; shard_map bodies
    (inlineable="false") stay calls."""
    uniquer = NameUniquer.for_module(module)
    changed = False
    for comp in _partitioned_computations(module.entry):
        while True:
            calls = [i for i in comp.post_order() if is_inlineable(i)]
            if not calls:
                break
            for call in calls:
                inline_call(call, uniquer)
            changed = True
    return changed


def _partitioned_computations(comp):
    """`comp` and, recursively, the bodies, conditions and branches of the loops and
    conditionals in it."""
    yield comp
    for instr in list(comp.instructions):
        if instr.opcode == "while":
            yield from _partitioned_computations(instr.attrs["body"])
            yield from _partitioned_computations(instr.attrs["condition"])
        elif instr.opcode == "conditional":
            for branch in control_rules.branches(instr):
                yield from _partitioned_computations(branch)


def to_hlo_sharding(t) -> HloSharding:
    if t == manual.MANUAL:
        return HloSharding("manual")
    if isinstance(t, tuple):
        return HloSharding("tuple", elements=tuple(_leaves_sharding(t)))
    return t.to_sharding()


def _leaves_sharding(t):
    for e in t:
        if isinstance(e, tuple):
            yield from _leaves_sharding(e)
        else:
            yield to_hlo_sharding(e)


def annotation(instr: HloInstruction, n: int):
    """The user's tiling of `instr` (a tuple of them for a tuple shape), None without one."""
    if instr.sharding is None:
        return None
    if instr.sharding.kind == "manual":  # inside a GSPMD manual region: per-device already
        return manual.like(instr.shape)
    try:
        return _tiling_of(instr.sharding, instr.shape, n, instr)
    except ValueError as exc:
        raise SpmdError(f"unsupported sharding {instr.sharding}: {exc}", instr) from None


def _tiling_of(sharding: HloSharding, shape, n: int, instr):
    if shape.is_tuple:
        leaves = list(sharding.elements) if sharding.kind == "tuple" else None
        it = iter(leaves) if leaves is not None else None
        return _tuple_tiling(shape, it, sharding, n, instr)
    t = from_sharding(sharding, shape.rank, n)
    if t is None:
        raise ValueError("the partitioner takes replicated, maximal and tiled shardings so far")
    return t  # uneven tiles are padded (hlo_opt.spmd.uneven)


def _tuple_tiling(shape, leaves, whole, n, instr):
    out = []
    for element in shape.tuple_shapes:
        if element.is_tuple:
            out.append(_tuple_tiling(element, leaves, whole, n, instr))
        else:
            leaf = next(leaves) if leaves is not None else whole
            out.append(_tiling_of(leaf, element, n, instr))
    return tuple(out)


def replicated_like(shape, n: int):
    if shape.is_tuple:
        return tuple(replicated_like(s, n) for s in shape.tuple_shapes)
    return Tiling.replicated(shape.rank, n)


def propagate(module: HloModule, n: int) -> dict:
    return propagate_computation(module.entry, n, {})


def propagate_computation(comp, n: int, given: dict, free_root: bool = False) -> dict:
    """Tilings for every instruction of `comp` (and of the loops it runs): `given` (a loop
    body's parameter and root) and the user's annotations fixed, the rest propagated; the root,
    unless given or annotated, is replicated (`free_root`: propagated like the rest)."""
    order = comp.post_order()
    tilings: dict = {}
    for instr in order:
        t = given.get(instr)
        if t is None:
            t = _region(instr, tilings, n)
        if t is None:
            t = annotation(instr, n)
        if t is None and (instr.opcode == "parameter" or (instr is comp.root and not free_root)):
            t = replicated_like(instr.shape, n)
        if t is not None:
            tilings[instr] = t
    fixed = set(tilings)
    open_ = [i for i in order if i not in fixed]
    changed = True
    while changed:  # each change tiles an instruction more finely, so this ends
        changed = False
        for instr in open_:
            changed |= _assign(tilings, instr, _forward(instr, tilings))
        for instr in reversed(open_):
            changed |= _assign(tilings, instr, _backward(instr, tilings, n))
    for instr in order:
        tilings[instr] = _complete(tilings.get(instr), instr.shape, n)
    for instr in order:
        if instr.opcode == "while":
            carried = control_rules.refined_carry(instr, tilings[instr], n, propagate_computation)
            if instr.sharding is None:  # a user's annotation of the loop stays as written
                tilings[instr] = carried
            tilings.update(control_rules.loop_tilings(instr, tilings[instr], n, propagate_computation))
        elif instr.opcode == "conditional":
            tilings.update(control_rules.branch_tilings(instr, tilings, n, propagate_computation))
    return tilings


def _complete(t, shape, n: int):
    """`t` with its unknown tuple leaves (or all of it) replicated."""
    if t is None:
        return replicated_like(shape, n)
    if isinstance(t, tuple):
        return tuple(_complete(e, s, n) for e, s in zip(t, shape.tuple_shapes))
    return t


def _region(instr: HloInstruction, tilings: dict, n: int):
    """Inside a shard_map region (after GlobalToLocalShape, up to LocalToGlobalShape) values are
    MANUAL; LocalToGlobalShape's result has the region's out sharding."""
    edge = manual.target(instr)
    if edge == manual.TO_LOCAL:
        return manual.like(instr.shape)
    if edge == manual.TO_GLOBAL:
        return manual.region_tilings(instr, n)[0]
    if any(manual.is_manual(tilings.get(op)) for op in instr.operands):
        return manual.like(instr.shape)
    return None


def _assign(tilings: dict, instr: HloInstruction, t) -> bool:
    """Give `instr` tiling `t` if it has none, or refine it where `t` splits it into more tiles
    (XLA's IsShardingMoreSpecific: a replicated guess gives way to a sharded one); a tuple leaf
    by leaf (None: not known yet)."""
    if t is None:
        return False
    current = tilings.get(instr)
    if isinstance(t, tuple):
        merged = control_rules.merge_tuple(current, t)
        if merged is None or merged == current:
            return False
        tilings[instr] = merged
        return True
    if current is not None and (isinstance(current, tuple) or t.num_tiles <= current.num_tiles):
        return False
    tilings[instr] = t
    return True


def _best(instr: HloInstruction, candidates) -> Tiling | None:
    """The most tiled candidate (an even split before an uneven one of as many tiles, whose last
    tiles are padded; then the first one)."""
    best, best_key = None, None
    for t in candidates:
        if t is None or isinstance(t, tuple) or t.rank != instr.shape.rank:
            continue
        even = t.local_dims(instr.shape.dims) is not None
        if not even and not _may_pad(instr, t):
            continue
        key = (t.num_tiles, even)
        if best_key is None or key > best_key:
            best, best_key = t, key
    return best


def _may_pad(instr: HloInstruction, t: Tiling) -> bool:
    """Whether `instr` may take uneven (padded) tiles: not the window ops, whose handlers move
    data between whole tiles, except a slice that keeps every tile where it was (it cuts the end
    of the array off, as `hlo_opt.spmd.uneven.slice_in_place` partitions it)."""
    if instr.opcode in ("concatenate", "pad", "dynamic-slice", "dynamic-update-slice", "reverse"):
        return False
    if instr.opcode != "slice":
        return True
    if any(u.opcode in ("concatenate", "pad") for u in instr.users):
        return False  # the window handlers read such slices from the sliced array itself (jnp.roll)
    src, spec = instr.operands[0].shape.dims, instr.attrs["slice"].dims
    return all(uneven.keeps_tiles(*spec[d], src[d], t.tiles[d]) for d in t.uneven_dims(instr.shape.dims))


def _forward(instr: HloInstruction, tilings: dict):
    if instr.opcode == "get-tuple-element":
        t = tilings.get(instr.operands[0])
        return t[instr.attrs["index"]] if isinstance(t, tuple) else None
    if instr.opcode == "tuple":
        return tuple(tilings.get(op) for op in instr.operands)
    if instr.opcode == "while":
        return tilings.get(instr.operands[0])
    if instr.opcode == "sort":
        return sort_handlers.forward(instr, tilings)
    if instr.shape.is_tuple:
        return None
    if instr.opcode == "dot":
        return _best(instr, [_dot_forward(instr, tilings)])
    known = [(k, tilings[op]) for k, op in enumerate(instr.operands) if op in tilings]
    return _best(instr, [rules.output_from_operand(instr, k, t) for k, t in known if isinstance(t, Tiling)])


def _dot_forward(dot: HloInstruction, tilings: dict) -> Tiling | None:
    axes = dot_dims.dot_axes(dot)
    lhs, rhs = tilings.get(dot.operands[0]), tilings.get(dot.operands[1])
    if lhs is not None and rhs is not None:
        space = dot_dims.joint(lhs, rhs, axes)
        if space is not None:
            return dot_dims.project(space, axes, "out")
    options = []
    if lhs is not None:
        options.append(dot_dims.project(dot_dims.lift(lhs, axes, "lhs"), axes, "out"))
    if rhs is not None:
        options.append(dot_dims.project(dot_dims.lift(rhs, axes, "rhs"), axes, "out"))
    return _best(dot, options)


def _backward(instr: HloInstruction, tilings: dict, n: int):
    if instr.shape.is_tuple:
        return control_rules.tuple_from_users(instr, tilings)
    candidates = []
    for user in instr.users:
        t = tilings.get(user)
        if t is None or user.parent is not instr.parent:
            continue
        for k, op in enumerate(user.operands):
            if op is not instr:
                continue
            if manual.target(user) == manual.TO_LOCAL:
                candidates.append(manual.region_tilings(user, n)[k])
            elif user.opcode == "tuple":
                candidates.append(t[k])
            elif isinstance(t, Tiling) and user.opcode == "dot" and k < 2:
                axes = dot_dims.dot_axes(user)
                side = "lhs" if k == 0 else "rhs"
                candidates.append(dot_dims.project(dot_dims.lift(t, axes, "out"), axes, side))
            elif user.opcode == "sort":
                candidates.append(sort_handlers.operand(user, k, t))
            elif isinstance(t, Tiling) and not user.shape.is_tuple:
                candidates.append(rules.operand_from_output(user, k, t))
    return _best(instr, candidates)
