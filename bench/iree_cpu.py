"""IREE's llvm-cpu backend on an HLO module: the peer bench/bench_host.py prints beside XLA:CPU.

A bench-only dependency (`pip install iree-base-compiler iree-base-runtime`); `available()` is
False without it, and bench_host.py then leaves the column out. The module goes the way a JAX
user's program reaches IREE: XLA's own parser reads the HLO text and jaxlib converts it to
StableHLO (the conversion hlo_run.xla_cpu uses for XLA:CPU), then `iree.compiler` compiles it for
the host CPU (`--iree-llvmcpu-target-cpu=host`, IREE's multi-threaded `local-task` driver).

    exe = IreeCpuExecutable.compile(hlo_text)
    outputs = exe.run(args)        # numpy arrays in, numpy arrays (a list for tuples) out
"""

from __future__ import annotations

import importlib.util
from typing import Any, Sequence

import numpy as np


def available() -> bool:
    # find_spec of a submodule imports its package, and raises when the package itself is missing
    if importlib.util.find_spec("iree") is None:
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("iree.compiler", "iree.runtime"))


class IreeCpuExecutable:
    """One module compiled by IREE for the host; `run` may be called many times. A run takes the
    host arrays, runs the function and brings the results back to the host, as XLA:CPU's does."""

    def __init__(self, function, device):
        self._function = function
        self._device = device

    @classmethod
    def compile(cls, hlo_text: str) -> IreeCpuExecutable:
        import iree.compiler
        import iree.runtime

        from hlo_run.xla_cpu import _jax_modules

        _, jax_lib, xc = _jax_modules()
        proto = xc.hlo.hlo_module_from_text(hlo_text).as_serialized_hlo_module_proto()
        stablehlo = jax_lib.mlir.hlo_to_stablehlo(proto)
        vmfb = iree.compiler.compile_str(stablehlo, input_type="stablehlo", target_backends=["llvm-cpu"],
                                         extra_args=["--iree-llvmcpu-target-cpu=host"])
        context = iree.runtime.SystemContext(config=iree.runtime.Config("local-task"))
        context.add_vm_module(iree.runtime.VmModule.copy_buffer(context.instance, vmfb))
        module = next(context.modules[name] for name in reversed(list(context.modules.keys()))
                      if name != "hal")
        return cls(module["main"], context.config.device)

    def run(self, args: Sequence[np.ndarray]) -> Any:
        import iree.runtime

        out = self._function(*[iree.runtime.asdevicearray(self._device, np.ascontiguousarray(a))
                               for a in args])
        if isinstance(out, (tuple, list)):
            return [np.asarray(o.to_host()) for o in out]
        return np.asarray(out.to_host())
