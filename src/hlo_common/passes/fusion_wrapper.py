"""FusionWrapper ("fusion-wrapper"): every compute instruction left outside a fusion gets a fusion of
its own (XLA's `FusionWrapper`, `xla/service/gpu/transforms/fusion_wrapper.cc`).

Where it sits: the end of hlo-opt's GPU pipeline (`autotuner` and `post-scheduling-passes` in
`hlo_opt.pipelines`, as XLA places it), so that the emitters, which only take fusions, see one
kernel per op the fusion passes left alone; and hlo-codegen's prepare pipeline, which runs the
same class on its input (a no-op on what hlo-opt already wrapped) with its own choice of what
needs a kernel (`hlo_codegen.fusion_wrapper.needs_kernel`, given as `must_wrap`).

    %a = f32[8] add(%p, %q)
      =>  %wrapped_add = f32[8] fusion(%p, %q), kind=kLoop, calls=%wrapped_add_computation
          %wrapped_add_computation { %param_0 = ... ROOT %a = f32[8] add(%param_0, %param_1) }

Which instructions: by default XLA's opcode list (`XLA_WRAPPED_OPCODES`: elementwise ops,
broadcast, concatenate, convert, dot, convolution, dynamic-(update-)slice, gather, iota, map, pad,
reduce, reduce-window, reshape, reverse, scatter, select, slice, transpose, ...; not copy, so copies
copy insertion added stay memcpys, nor sort, custom calls, collectives or control flow), in the
entry computation and every computation it runs as control flow (while, conditional, call), never
inside fusions. Names as XLA's: the fusion `wrapped_<opcode>` and its computation
`wrapped_<opcode>_computation`, made unique module-wide (`.1`, `.2`, ...); the wrapped instruction
keeps its name inside. The fusion takes the instruction's place in its computation's order (a
schedule stays valid), its metadata and control dependencies. The kind is XLA's ChooseFusionKind
for a single op, approximated: kInput for reduce and scatter (XLA: reductions to or from contiguous
dimensions that its reduction emitter handles, and scatters), kLoop for everything else (XLA also
gives kInput to transposes its tiled transpose emitter takes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.hlo.hlo_utils import NameUniquer
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.passes._support import global_computations

XLA_WRAPPED_OPCODES = frozenset({
    "abs", "add", "and", "atan2", "bitcast-convert", "broadcast", "ceil", "cbrt", "clamp",
    "count-leading-zeros", "compare", "complex", "concatenate", "convolution", "convert", "cosine",
    "divide", "dot", "dynamic-slice", "dynamic-update-slice", "erf", "exponential",
    "exponential-minus-one", "floor", "gather", "imag", "iota", "is-finite", "log", "log-plus-one",
    "map", "maximum", "minimum", "multiply", "negate", "not", "or", "pad", "popcnt", "power", "real",
    "reshape", "reduce", "reduce-precision", "reduce-window", "remainder", "reverse",
    "round-nearest-afz", "round-nearest-even", "rsqrt", "scatter", "select", "shift-left",
    "shift-right-logical", "shift-right-arithmetic", "sign", "sine", "slice", "sqrt", "subtract",
    "stochastic-convert", "tan", "tanh", "transpose", "xor",
})
INPUT_FUSION_OPCODES = frozenset({"reduce", "scatter"})


def must_wrap_instruction(instr: HloInstruction) -> bool:
    """XLA's FusionWrapper::MustWrapInstruction: is the opcode one it wraps?"""
    return instr.opcode in XLA_WRAPPED_OPCODES


def choose_fusion_kind(instr: HloInstruction) -> str:
    """The kind of a fusion of `instr` alone (see the module docstring)."""
    return "kInput" if instr.opcode in INPUT_FUSION_OPCODES else "kLoop"


def wrap_instruction(instr: HloInstruction, kind: str | None = None) -> HloInstruction:
    """Put `instr` (of a global computation) into a fusion of its own that takes its place; the
    fused computation goes just before the caller in the module's list. Returns the fusion."""
    comp = instr.parent
    module = comp.parent
    instr_names = NameUniquer({i.name for c in module.computations for i in c.instructions})
    comp_names = NameUniquer({c.name for c in module.computations})
    fusion, body = _wrap(instr, kind, instr_names, comp_names)
    module.computations.insert(module.computations.index(comp), body)
    return fusion


def _wrap(instr: HloInstruction, kind: str | None, instr_names: NameUniquer,
          comp_names: NameUniquer) -> tuple[HloInstruction, HloComputation]:
    """The fusion of `instr` and its computation, which the caller puts into the module's list."""
    comp = instr.parent
    module = comp.parent
    body = HloComputation(comp_names.unique(f"wrapped_{instr.opcode}_computation"))
    params = []
    for i, operand in enumerate(instr.operands):
        p = HloInstruction(f"param_{i}", "parameter", operand.shape)
        p.parameter_number = i
        params.append(body.add_instruction(p))
    inner = instr.clone(new_operands=params, name=instr.name)
    body.add_instruction(inner)
    body.root = inner
    body.parent = module
    fusion = HloInstruction(instr_names.unique(f"wrapped_{instr.opcode}"), "fusion", instr.shape,
                            list(instr.operands),
                            {"kind": kind or choose_fusion_kind(instr), "calls": body})
    fusion.metadata = list(instr.metadata)
    comp.replace_instruction(instr, fusion, remove_dead_operands=False)
    return fusion, body


@register_pass
@dataclass
class FusionWrapper(HloPass):
    """Each remaining unfused op wrapped in its own fusion (wrapped_<opcode>), as XLA:GPU does."""

    name = "fusion-wrapper"
    # Which instructions get a fusion: XLA's opcode list unless a tool gives its own rule (it may
    # raise an HloError naming an instruction nothing can run).
    must_wrap: Callable[[HloInstruction], bool] | None = None

    def run(self, module: HloModule) -> bool:
        rule = self.must_wrap or must_wrap_instruction
        todo = [(comp, instr) for comp in global_computations(module) for instr in comp.instructions
                if instr.opcode != "fusion" and rule(instr)]
        if not todo:
            return False
        instr_names = NameUniquer({i.name for c in module.computations for i in c.instructions})
        comp_names = NameUniquer({c.name for c in module.computations})
        new_bodies: dict[int, list[HloComputation]] = {}
        for comp, instr in todo:
            _, body = _wrap(instr, None, instr_names, comp_names)
            new_bodies.setdefault(id(comp), []).append(body)
        ordered = []
        for comp in module.computations:  # each fused computation just before its caller
            ordered.extend(new_bodies.get(id(comp), ()))
            ordered.append(comp)
        module.computations = ordered
        return True
