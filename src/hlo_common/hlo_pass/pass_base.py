"""Pass base classes, as in XLA's `hlo_pass_interface.h`: a pass has a `name` and `run(module)`
that returns whether it changed the module.

    @register_pass
    class HloDCE(HloPass):
        \"\"\"Removes instructions whose values are never used.\"\"\"
        name = "dce"

        def run(self, module: HloModule) -> bool:
            ...

`register_pass` adds the class to `PASS_REGISTRY` under its `name` (XLA's pass name, the one dump
file names, `--passes`, `--list-passes` and `--disable-pass` use). Options are dataclass fields
with defaults, so `PASS_REGISTRY[name]()` always builds the default pass.
"""

from __future__ import annotations

from typing import ClassVar

from hlo_common.hlo.ir import HloModule

PASS_REGISTRY: dict[str, type[HloPass]] = {}


class HloPass:
    """One rewrite over a module. Collect candidates, return False early, then mutate."""

    name: ClassVar[str] = ""

    def run(self, module: HloModule) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def run_with_options(self, module: HloModule, options) -> bool:
        """What a pipeline calls: `run(module)`, unless the pass needs the run's options (a
        `pipeline.RunOptions`: the device description, the dumper, verify-each)."""
        return self.run(module)

    @classmethod
    def description(cls) -> str:
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


class DevicePass(HloPass):
    """A pass with a `device` field (a DeviceDescription, None for the default): the run's `--device`
    (RunOptions.device), when one is given, replaces it before the pass runs."""

    def take_device(self, options) -> None:
        self.device = getattr(options, "device", None) or self.device

    def run_with_options(self, module: HloModule, options) -> bool:
        self.take_device(options)
        return self.run(module)


def register_pass(cls: type[HloPass]) -> type[HloPass]:
    if not cls.name:
        raise AssertionError(f"{cls.__name__} has no pass name")
    if cls.name in PASS_REGISTRY and PASS_REGISTRY[cls.name] is not cls:
        raise AssertionError(f"two passes named '{cls.name}'")
    PASS_REGISTRY[cls.name] = cls
    return cls
