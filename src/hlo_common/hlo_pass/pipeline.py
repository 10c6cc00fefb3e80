"""Pass pipelines, as in XLA's `hlo_pass_pipeline.cc` and `hlo_pass_fix.h`.

An `HloPassPipeline` is itself a pass: it runs its passes (and sub-pipelines) in order, skips the
ones named in `--disable-pass`, dumps the module between passes (`dump.ModuleDumper`), records
wall times (`--time-passes`) and, with `verify_each`, runs the verifier at the start and after
every pass that changed the module, so a broken invariant names the pass that broke it.
`HloPassFix` re-runs a pass or pipeline until it changes nothing, at most 25 times (XLA's
limit); a pass that keeps changing the module is a `PipelineError` naming it.

    pipeline = HloPassPipeline("simplification-demo", [HloDCE(), HloCSE()])
    changed = pipeline.run(module)                            # defaults
    changed = pipeline.run_with(module, RunOptions(verify_each=True, dumper=d))
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable

from hlo_common.errors import HloError, VerificationError
from hlo_common.hlo.ir import HloModule
from hlo_common.hlo_pass.pass_base import HloPass

PIPELINE_START = "pipeline-start"
PIPELINE_END = "pipeline-end"
DEFAULT_ITERATION_LIMIT = 25  # XLA's HloPassFix::kDefaultIterationLimit


class PipelineError(HloError):
    """A pass failed inside a pipeline: it raised, returned a non-bool, or never converged."""


@dataclass
class PassRunRecord:
    """One run of one leaf pass, for `--time-passes`."""

    pass_name: str
    pipeline: str
    seconds: float
    changed: bool


@dataclass
class RunOptions:
    """What travels with one pipeline run (one module): the CLI builds it from its flags."""

    verify_each: bool = False
    disabled_passes: frozenset[str] = frozenset()
    dumper: object | None = None  # a dump.ModuleDumper, or None for no dumps
    records: list[PassRunRecord] | None = None  # filled when timing is asked for
    device: object | None = None  # a device.DeviceDescription (`--device`); None: the H100
    triton_gemm: bool = True  # XLA's --xla_gpu_enable_triton_gemm: False keeps dots on cuBLAS


def verify(module: HloModule, where: str) -> None:
    """Run the verifier; a failure becomes a VerificationError that says `where` it happened."""
    from hlo_common.hlo.verifier import verify_module

    try:
        verify_module(module)
    except VerificationError as exc:
        text = str(exc)
        if exc.place and text.startswith(f"{exc.place}: "):  # FILE:LINE:COL first, as parse errors
            raise VerificationError(f"{where}: {text[len(exc.place) + 2:]}", place=exc.place) from exc
        raise VerificationError(f"{where}: {text}") from exc


def run_leaf_pass(p: HloPass, module: HloModule, pipeline_name: str, options: RunOptions) -> bool:
    """Run one pass that is not a pipeline: time it, and turn a crash into a PipelineError naming it."""
    start = time.perf_counter()
    try:
        changed = p.run_with_options(module, options)
    except HloError:
        raise
    except Exception as exc:  # a bug in the pass: name it rather than print a traceback
        raise PipelineError(f"pass '{p.name}' (pipeline '{pipeline_name}') failed: "
                            f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(changed, bool):
        raise PipelineError(f"pass '{p.name}' returned {changed!r} instead of a bool")
    if options.records is not None:
        options.records.append(PassRunRecord(p.name, pipeline_name, time.perf_counter() - start, changed))
    return changed


def run_pass(p: HloPass, module: HloModule, pipeline_name: str, options: RunOptions) -> bool:
    """Run a pass, pipeline or fixed point under `options`."""
    if isinstance(p, (HloPassPipeline, HloPassFix)):
        return p.run_with(module, options, nested=True, parent=pipeline_name)
    return run_leaf_pass(p, module, pipeline_name, options)


class HloPassPipeline(HloPass):
    """A named, ordered list of passes and sub-pipelines; `run` returns whether anything changed."""

    def __init__(self, name: str, passes: Iterable[HloPass] = (), verify_each: bool = False):
        self.name = name
        self.passes: list[HloPass] = list(passes)
        self.verify_each = verify_each

    def add_pass(self, p: HloPass) -> HloPass:
        self.passes.append(p)
        return p

    def pass_names(self) -> list[str]:
        return [p.name for p in self.passes]

    def run(self, module: HloModule) -> bool:
        return self.run_with(module, RunOptions(verify_each=self.verify_each))

    def run_with(self, module: HloModule, options: RunOptions, nested: bool = False,
                 parent: str | None = None) -> bool:
        names = self.pass_names()
        if options.verify_each and not nested:
            first = names[0] if names else PIPELINE_END
            verify(module, f"verification failed before pass '{first}' (pipeline '{self.name}')")
        dumper = options.dumper
        if dumper is not None:
            dumper.between_passes(module, self.name, PIPELINE_START, names[0] if names else PIPELINE_END,
                                  changed=None)
        changed = False
        for i, p in enumerate(self.passes):
            if p.name in options.disabled_passes:
                continue
            pass_changed = run_pass(p, module, self.name, options)
            if dumper is not None:
                nxt = names[i + 1] if i + 1 < len(names) else PIPELINE_END
                dumper.between_passes(module, self.name, p.name, nxt, changed=pass_changed)
            if pass_changed and options.verify_each:
                verify(module, f"verification failed after pass '{p.name}' (pipeline '{self.name}')")
            changed |= pass_changed
        return changed

    def __repr__(self) -> str:
        return f"HloPassPipeline({self.name!r}, {self.pass_names()})"


class HloPassFix(HloPass):
    """Runs `inner` (a pass or pipeline) until it reports no change; it keeps `inner`'s name."""

    def __init__(self, inner: HloPass, iteration_limit: int = DEFAULT_ITERATION_LIMIT):
        self.inner = inner
        self.name = inner.name
        self.iteration_limit = iteration_limit

    def run(self, module: HloModule) -> bool:
        return self.run_with(module, RunOptions())

    def run_with(self, module: HloModule, options: RunOptions, nested: bool = False,
                 parent: str | None = None) -> bool:
        owner = parent if parent is not None else self.name
        changed_any = False
        for _ in range(self.iteration_limit):
            if not run_pass(self.inner, module, owner, options):
                return changed_any
            changed_any = True
        raise PipelineError(f"pass '{self.name}' did not reach a fixed point: it still changed the module "
                            f"after {self.iteration_limit} iterations")

    def __repr__(self) -> str:
        return f"HloPassFix({self.inner!r})"


@dataclass
class PipelineSequence:
    """Top-level pipelines run one after another, each with its own dump names (XLA's compiler runs
    `optimization`, `layout assignment`, `fusion`, ... as separate pipelines, not nested ones)."""

    name: str
    pipelines: list[HloPassPipeline] = field(default_factory=list)

    def run_with(self, module: HloModule, options: RunOptions) -> bool:
        changed = False
        for pipeline in self.pipelines:
            if pipeline.name in options.disabled_passes:
                continue
            changed |= pipeline.run_with(module, options)
        return changed
