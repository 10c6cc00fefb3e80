"""The platforms hlo-run runs programs on: one small interface, one class per platform.

A `Program` is what the user gave hlo-run: an HLO module (with its original text, which XLA:CPU
re-parses) or a manifest (hlo-codegen's output; `hlo_run.compile_hook.manifest_for` makes one
from HLO text). A `Backend` turns a program into an `Executable` once (`load`: compile, JIT,
upload constants) and the executable runs it on arguments as many times as asked:

    backend = get_backend("interpreter")
    exe = backend.load(program)
    result = exe.run(args)          # numpy arrays, tuples for tuple results

Backends are found by name in `BACKENDS` and imported lazily, so `hlo-run --platform interpreter`
never imports jax or CUDA. A new platform adds one entry here and one file beside this one;
`default_platform()` picks the first usable one of `PLATFORM_PREFERENCE`.
"""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass
from typing import Any, Sequence

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.shape import Shape

# name -> "module:Class"; imported on first use.
BACKENDS: dict[str, str] = {
    "interpreter": "hlo_run.backends.interpreter:InterpreterBackend",
    "xla-cpu": "hlo_run.backends.xla_cpu:XlaCpuBackend",
    "host": "hlo_run.backends.host:HostBackend",
    "cuda": "hlo_run.backends.cuda:CudaBackend",
}
# What `--platform` defaults to: the first of these that is registered and usable.
PLATFORM_PREFERENCE = ("cuda", "host", "interpreter")


class BackendUnavailable(HloError):
    """A platform that is not registered, or cannot run on this machine (names the reason)."""


@dataclass
class Program:
    """A runnable thing: an HLO module with its text, or a manifest."""

    name: str  # for messages: the file name, plus `#k` for the k-th module of a split file
    module: HloModule | None = None
    hlo_text: str | None = None
    manifest: Any = None
    run_hlo_passes: bool = True  # HLO text is optimized by hlo-opt before hlo-codegen compiles it
    dump_to: str | None = None  # where hlo-opt and hlo-codegen write their dumps
    module_id: int = 0  # the number in the dumps' names: k for the k-th module of a split file
    replicas: int = 1  # devices: replicas x partitions (hlo_run.devices); arguments and results
    partitions: int = 1  # then carry a leading device axis
    verbose: bool = False  # hlo-run --verbose (the host over MPI prints the device-to-rank mapping)
    keep_collectives: bool = False  # one device: collectives compiled to thunks, run as on several

    @property
    def on_ranks(self) -> bool:
        """Run as an MPI job of one rank per device (hlo_run.mpi_launch): several devices, or one
        whose collectives are collective thunks (hlo-codegen --keep-collectives)."""
        if self.devices > 1 or self.keep_collectives:
            return True
        from hlo_common.manifest.collective_thunks import CollectiveThunk

        return self.manifest is not None and any(isinstance(t, CollectiveThunk)
                                                 for t in self.manifest.all_thunks())

    @property
    def devices(self) -> int:
        return self.replicas * self.partitions

    @property
    def parameter_shapes(self) -> list[Shape]:
        if self.module is None:
            raise BackendUnavailable(f"{self.name}: no HLO module to read the signature from")
        return [p.shape for p in self.module.entry.parameters]

    @property
    def result_shape(self) -> Shape:
        if self.module is None:
            raise BackendUnavailable(f"{self.name}: no HLO module to read the signature from")
        return self.module.entry.root.shape


class Executable(abc.ABC):
    """A program prepared for one platform; `run` may be called many times. A while loop whose
    condition still holds after `max_while_iterations` iterations (None: no limit) ends the run
    with an error naming it (`hlo-run --max-while-iterations`; XLA:CPU through jax has no limit)."""

    max_while_iterations: int | None = None
    source_module: HloModule | None = None  # the module as the user gave it, to name places in

    @abc.abstractmethod
    def run(self, args: Sequence[Any]) -> Any:
        """Run on one value per entry parameter; returns the result value."""

    def profile(self) -> list[tuple[str, float]]:
        """(step name, seconds) of the last run, e.g. per thunk; empty when not measured."""
        return []


class Backend(abc.ABC):
    """One platform. Subclasses set `name` and implement `load`."""

    name: str = ""

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why this platform cannot run here (None when it can)."""
        return None

    @abc.abstractmethod
    def load(self, program: Program) -> Executable:
        """Prepare `program` (compile, JIT, ...); raises an HloError when it cannot."""

    def run(self, program: Program, args: Sequence[Any]) -> Any:
        return self.load(program).run(args)


def backend_class(name: str) -> type[Backend]:
    target = BACKENDS.get(name)
    if target is None:
        known = ", ".join(sorted(BACKENDS))
        raise BackendUnavailable(f"platform '{name}' is not available yet (available: {known})")
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def get_backend(name: str, **options: Any) -> Backend:
    """A backend instance by platform name; raises BackendUnavailable with the reason."""
    cls = backend_class(name)
    reason = cls.unavailable_reason()
    if reason is not None:
        raise BackendUnavailable(f"platform '{name}' cannot run here: {reason}")
    return cls(**options)


def default_platform() -> str:
    """The first usable platform of PLATFORM_PREFERENCE (cuda, then host, then interpreter)."""
    for name in PLATFORM_PREFERENCE:
        if name in BACKENDS and backend_class(name).unavailable_reason() is None:
            return name
    return "interpreter"
