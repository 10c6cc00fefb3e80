"""The xla-cpu platform: real XLA:CPU through jax (`hlo_run.xla_cpu`), used as a reference.

It compiles the program's original HLO text with XLA's own parser and pipeline (rewritten first
when it holds fusions or `{...}` constants, see `hlo_run.xla_cpu.rewritten_text`). With
`allow_excess_precision=False` XLA rounds bf16/f16 intermediates after every op, as the
interpreter does.
"""

from __future__ import annotations

from typing import Any, Sequence

from hlo_run.backends import Backend, BackendUnavailable, Executable, Program


class XlaCpuBackendExecutable(Executable):
    def __init__(self, compiled):
        self.compiled = compiled

    def run(self, args: Sequence[Any]) -> Any:
        return self.compiled.run(list(args))


class XlaCpuDevicesExecutable(Executable):
    """The module on replicas x partitions host devices (`hlo_run.xla_cpu_devices`)."""

    def __init__(self, text: str, program: Program, allow_excess_precision: bool):
        self.text, self.program, self.excess = text, program, allow_excess_precision

    def run(self, args: Sequence[Any]) -> Any:
        from hlo_run.devices import per_device_args, stack
        from hlo_run.xla_cpu_devices import run_on_devices

        p = self.program
        return stack(run_on_devices(self.text, per_device_args(args, p.devices), p.replicas, p.partitions,
                                    allow_excess_precision=self.excess))


class XlaCpuBackend(Backend):
    name = "xla-cpu"

    def __init__(self, allow_excess_precision: bool = True):
        self.allow_excess_precision = allow_excess_precision

    @classmethod
    def unavailable_reason(cls) -> str | None:
        import importlib.util

        if importlib.util.find_spec("jax") is None or importlib.util.find_spec("jaxlib") is None:
            return "it needs jax and jaxlib (pip install 'hlo-toolchain[test]')"
        return None

    def load(self, program: Program) -> Executable:
        from hlo_run.xla_cpu import XlaCpuExecutable, text_for_xla_cpu

        if program.module is None:
            raise BackendUnavailable(f"{program.name}: XLA:CPU needs an HLO module")
        if program.hlo_text is None:
            from hlo_common.hlo.printer import print_module

            text = print_module(program.module)
        else:
            text = program.hlo_text
        text = text_for_xla_cpu(program.module, text)
        if program.devices > 1:
            return XlaCpuDevicesExecutable(text, program, self.allow_excess_precision)
        return XlaCpuBackendExecutable(
            XlaCpuExecutable.compile(text, allow_excess_precision=self.allow_excess_precision))
