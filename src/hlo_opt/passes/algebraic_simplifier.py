"""AlgebraicSimplifier ("algsimp"): local algebraic rewrites, XLA's algebraic_simplifier.cc.

Runs all over the GPU pipeline: in the `simplification` and `simplification-2` fixed points,
after convolution canonicalization (layout insensitive), and after layout assignment, layout
normalization and fusion (layout sensitive). Each `run` makes one sweep over every non-fusion
computation in post order (XLA's visitor); the pipeline's fixed points repeat it.

    %z = f32[4] broadcast(f32[] constant(0)), dimensions={}
    %a = f32[4] add(%p, %z)                        =>  uses of %a read %p
    %r = f32[2,3] reshape(f32[6] reshape(%q))      =>  %r = f32[2,3] reshape(%q)

The rewrites live in `hlo_opt.passes.algsimp` as a table keyed by opcode, one small function per
rewrite, in XLA's order; the first that applies to an instruction wins. Each says in its docstring
which `Handle<Op>` rewrite of XLA it is and when it declines. The options are XLA's
AlgebraicSimplifierOptions with the values gpu_compiler.cc sets for the layout-insensitive runs;
the layout-sensitive runs only change `is_layout_sensitive`, under which rewrites that could
change a layout decline, and reshapes, transposes and copies that move no data become bitcasts.

Declines (as XLA): instructions with control dependencies, fusion computations, rewrites whose
result would change a shape; fast-math-only identities unless `enable_fast_math`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hlo_common.hlo.ir import HloComputation, HloModule
from hlo_common.hlo.hlo_utils import async_computations, computation_callers
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_opt.passes.algsimp import REWRITES, Rewriter

# XLA's kAlgSimpRerunLimit, for `run_to_fixed_point`.
RERUN_LIMIT = 50


@register_pass
@dataclass
class AlgebraicSimplifier(HloPass):
    """Local algebraic rewrites (x + 0, reshape(reshape(x)), slice(slice(x)), ...), XLA's algsimp."""

    name: ClassVar[str] = "algsimp"

    is_layout_sensitive: bool = False
    # XLA:GPU (LayoutInsensitiveAlgebraicSimplifierOptions) values; XLA's own defaults in comments.
    enable_dot_strength_reduction: bool = True  # GPU: vector . vector dots only
    enable_dot_to_multiply_rewrite: bool = True
    supports_non_canonical_dots: bool = False  # XLA default True; GPU canonicalizes dots
    minmax_propagate_nan: bool = True  # GPU: not xla_gpu_enable_fast_min_max
    unconditionally_simplify_reduce_of_transpose_or_reshape: bool = True  # XLA default False
    enable_unconditional_reduce_of_concat_replacement: bool = False  # XLA default True
    enable_fast_math: bool = False
    enable_floats_are_real: bool = False
    enable_sink_broadcast: bool = True
    enable_broadcast_degenerate_dimension: bool = True
    enable_reduce_of_reshape: bool = True
    enable_negative_padding_replacement: bool = True
    enable_window_reduce_to_reduce_replacement: bool = True
    enable_dynamic_update_slice_to_pad_replacement: bool = True
    enable_remove_no_op_reduce_precision: bool = False
    use_convert_constant_folding: bool = False
    disable_dynamic_slice_to_slice_conversion: bool = False
    very_small_gather_size: int = 4
    # XLA reruns a computation until it stops changing (default True); here the pipeline's fixed
    # points do that, so one sweep per run unless asked.
    run_to_fixed_point: bool = False

    def run(self, module: HloModule) -> bool:
        changed = False
        asynchronous = async_computations(module)
        shared: dict = {}
        for comp in self._computations(module):
            for _ in range(RERUN_LIMIT if self.run_to_fixed_point else 1):
                if not self.run_on_computation(comp, id(comp) in asynchronous, shared):
                    break
                changed = True
        return changed

    def _computations(self, module: HloModule) -> list[HloComputation]:
        """Non-fusion computations in post order (XLA's MakeNonfusionComputations)."""
        callers = computation_callers(module)
        out = []
        for comp in module.computation_post_order():
            sites = callers.get(id(comp), [])
            if sites and all(site.instr.opcode == "fusion" for site in sites):
                continue
            out.append(comp)
        return out

    def run_on_computation(self, comp: HloComputation, is_async: bool = False,
                           shared: dict | None = None) -> bool:
        """One sweep over `comp` in post order; returns whether anything changed."""
        rw = Rewriter(self, comp, shared)
        rw.is_async = is_async
        changed = False
        dead, created, rewrites = rw.dead, rw.created, REWRITES  # both lists only grow in place
        for instr in comp.post_order():
            fns = rewrites.get(instr.opcode)
            if not fns or id(instr) in dead or instr.parent is not comp or instr.control_predecessors \
                    or instr.control_successors or _dynamic(instr):
                continue
            for fn in fns:
                mark = len(created)
                if fn(instr, rw):
                    changed = True
                    break
                if len(created) > mark:
                    rw.discard_created(mark)
        rw.finish()
        if changed:
            comp.instructions = comp.post_order()
        return changed


def _dynamic(instr) -> bool:
    """Dynamic shapes are left to the dynamic-shape passes. (Hot: `any` over the per-dimension
    markers first; only arrays carry any.)"""
    shape = instr.shape
    if any(shape.dynamic) and shape.is_array:
        return True
    for o in instr.operands:
        shape = o.shape
        if any(shape.dynamic) and shape.is_array:
            return True
    return False
