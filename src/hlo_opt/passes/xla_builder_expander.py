"""XlaBuilderTestPass ("test-only-xla-builder"): `xla_builder.math.*` custom calls get their
decomposition as a called computation (XLA's `xla/hlo/tools/tests/hlo_opt_test_only_passes.cc`).

XLA's builder library can emit a math function as a custom call that carries no computation;
this pass builds the function with the library (`hlo_common.hlo.xla_builder_math`, the one
definition the interpreter and hlo-codegen use too) and attaches it:

    %c = f32[] custom-call(%x), custom_call_target="xla_builder.math.Atan"
      =>
    %xla_builder.math.Atan (arg0: f32[]) -> f32[] {
      %arg0 = f32[] parameter(0)
      %constant = f32[] constant(1)
      ROOT %atan2 = f32[] atan2(%arg0, %constant) }
    %c = f32[] custom-call(%x), custom_call_target="xla_builder.math.Atan",
         called_computations={%xla_builder.math.Atan}

Later, the call inliner of the pipeline or hlo-codegen's prepare stage turns the call into its
computation. Differences from XLA's test pass: the old call is replaced rather than left dead,
calls that already have a computation are left alone (the pass is idempotent), and a target this
library does not build (`Polygamma`, `IgammaGradA`, ...: XLA's other `xla_builder.*` targets)
is an HloError naming the call, as XLA's "Unsupported xla_builder custom call target" is.
Declines (returns False) when the module has no such call. Not part of the gpu pipeline (as in
XLA); run it with `--passes test-only-xla-builder`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloInstruction, HloModule
from hlo_common.hlo.xla_builder_math import PREFIX, TARGETS, decomposition_for
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


def _needs_expansion(instr: HloInstruction) -> bool:
    target = str(instr.attrs.get("custom_call_target", ""))
    return (instr.opcode == "custom-call" and target.startswith("xla_builder.")
            and not instr.called_computations())


def attach_decomposition(module: HloModule, call: HloInstruction) -> HloInstruction:
    """Replace `call` by the same custom call with its decomposition (a clone, added to `module`
    before the call's computation) as called computation; returns the new call."""
    target = str(call.attrs.get("custom_call_target"))
    shared = decomposition_for(call) if target in TARGETS else None
    if shared is None:
        known = ", ".join(sorted(t[len(PREFIX):] for t in TARGETS))
        raise HloError(f"%{call.name}: no decomposition of custom_call_target=\"{target}\" for operands "
                       f"{[str(op.shape) for op in call.operands]} (this library builds {known})")
    comp = shared.clone(name=module.unique_computation_name(target))
    comp_index = module.computations.index(call.parent)
    module.computations.insert(comp_index, comp)
    comp.parent = module
    new = call.clone(name=call.name)
    new.attrs["called_computations"] = [comp]
    name = call.name
    call.parent.replace_instruction(call, new, remove_dead_operands=False)
    new.name = name
    return new


@register_pass
@dataclass
class XlaBuilderTestPass(HloPass):
    """Attaches the builder library's decomposition to `xla_builder.math.*` custom calls."""

    name = "test-only-xla-builder"

    def run(self, module: HloModule) -> bool:
        calls = [i for comp in module.computations for i in comp.instructions if _needs_expansion(i)]
        for call in calls:
            attach_decomposition(module, call)
        return bool(calls)
