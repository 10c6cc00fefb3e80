"""HloPassPipeline / HloPassFix / the registry / the GPU pipeline data."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hlo_common.errors import VerificationError
from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_common.hlo.shape import Shape
from hlo_opt.cli import list_passes_text
from hlo_common.hlo_pass.pass_base import PASS_REGISTRY, HloPass
from hlo_opt.passes import load_all_passes
from hlo_common.hlo_pass.pipeline import (
    DEFAULT_ITERATION_LIMIT,
    HloPassFix,
    HloPassPipeline,
    PipelineError,
    RunOptions,
)
from hlo_opt.pipelines import (
    GPU_PIPELINES,
    MULTI_OUTPUT_FUSION,
    PLANNED_PASSES,
    PRIORITY_FUSION,
    PipelineSpec,
    build_gpu_pipeline,
    pipeline_pass_names,
)

TEXT = """
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] add(p, p)
  b = f32[4] add(p, p)
  ROOT n = f32[4] multiply(a, b)
}
"""


def module() -> HloModule:
    return parse_module(TEXT, "<test>")


@dataclass
class Recorder(HloPass):
    """Appends its name to a shared log; reports a change `changes` times."""

    name = "recorder"
    log: list | None = None
    label: str = "r"
    changes: int = 0

    def run(self, module: HloModule) -> bool:
        self.log.append(self.label)
        if self.changes > 0:
            self.changes -= 1
            return True
        return False


class Breaker(HloPass):
    """Gives the root a wrong shape, so the verifier must object."""

    name = "breaker"

    def run(self, module: HloModule) -> bool:
        module.entry.root.shape = Shape.array("f32", (7,))
        return True


class Crasher(HloPass):
    name = "crasher"

    def run(self, module: HloModule) -> bool:
        raise KeyError("oops")


class NotABool(HloPass):
    name = "not-a-bool"

    def run(self, module: HloModule):
        return None


def test_pipeline_runs_passes_and_sub_pipelines_in_order():
    log: list = []
    inner = HloPassPipeline("inner", [Recorder(log, "b", changes=1), Recorder(log, "c")])
    outer = HloPassPipeline("outer", [Recorder(log, "a"), inner, Recorder(log, "d")])
    assert outer.run(module()) is True
    assert log == ["a", "b", "c", "d"]
    log.clear()
    assert HloPassPipeline("x", [Recorder(log, "a")]).run(module()) is False


def test_disabled_passes_and_pipelines_are_skipped():
    log: list = []
    inner = HloPassPipeline("inner", [Recorder(log, "b")])
    outer = HloPassPipeline("outer", [Recorder(log, "a"), inner])
    outer.run_with(module(), RunOptions(disabled_passes=frozenset({"inner"})))
    assert log == ["a"]
    log.clear()
    outer.run_with(module(), RunOptions(disabled_passes=frozenset({"recorder"})))
    assert log == []


def test_fix_runs_until_nothing_changes():
    log: list = []
    fix = HloPassFix(Recorder(log, "x", changes=3))
    assert fix.name == "recorder"
    assert fix.run(module()) is True
    assert log == ["x"] * 4
    log.clear()
    assert HloPassFix(Recorder(log, "y")).run(module()) is False
    assert log == ["y"]


def test_non_convergence_is_an_error_naming_the_pass():
    log: list = []
    fix = HloPassFix(HloPassPipeline("spin", [Recorder(log, "x", changes=10**6)]))
    with pytest.raises(PipelineError, match=r"pass 'spin' did not reach a fixed point.* 25 iterations"):
        HloPassPipeline("top", [fix]).run(module())
    assert len(log) == DEFAULT_ITERATION_LIMIT


def test_verify_each_names_the_pass_that_broke_the_module():
    log: list = []
    pipeline = HloPassPipeline("checked", [Recorder(log, "a"), Breaker(), Recorder(log, "b")])
    with pytest.raises(VerificationError, match=r"after pass 'breaker' \(pipeline 'checked'\)"):
        pipeline.run_with(module(), RunOptions(verify_each=True))
    assert log == ["a"]


def test_verify_each_checks_the_input_before_the_first_pass():
    bad = module()
    bad.entry.root.shape = Shape.array("f32", (7,))
    with pytest.raises(VerificationError, match=r"before pass 'recorder' \(pipeline 'p'\)"):
        HloPassPipeline("p", [Recorder([], "a")]).run_with(bad, RunOptions(verify_each=True))


def test_a_crashing_pass_is_named():
    with pytest.raises(PipelineError, match=r"pass 'crasher' \(pipeline 'p'\) failed: KeyError"):
        HloPassPipeline("p", [Crasher()]).run(module())
    with pytest.raises(PipelineError, match=r"pass 'not-a-bool' returned None"):
        HloPassPipeline("p", [NotABool()]).run(module())


def test_records_time_and_change_per_leaf_pass_with_its_pipeline():
    records: list = []
    inner = HloPassFix(HloPassPipeline("inner", [Recorder([], "b", changes=1)]))
    HloPassPipeline("outer", [Recorder([], "a"), inner]).run_with(module(), RunOptions(records=records))
    assert [(r.pass_name, r.pipeline, r.changed) for r in records] == [
        ("recorder", "outer", False), ("recorder", "inner", True), ("recorder", "inner", False)]
    assert all(r.seconds >= 0 for r in records)


# -- registry and the GPU pipeline data --------------------------------------------------------
def test_every_pipeline_name_is_registered_or_planned():
    load_all_passes()
    names = pipeline_pass_names()
    assert [n for n in names if n not in PASS_REGISTRY and n not in PLANNED_PASSES] == []
    assert [n for n in PLANNED_PASSES if n not in names] == [], "planned passes the pipeline never runs"
    assert [n for n in PLANNED_PASSES if n in PASS_REGISTRY] == [], "written passes still listed as planned"
    for name in ("dce", "cse", "tuple-simplifier", "flatten-call-graph", "call-inliner",
                 "zero_sized_hlo_elimination"):
        assert name in PASS_REGISTRY


def test_the_gpu_pipeline_builds_every_registered_pass_with_its_options():
    sequence = build_gpu_pipeline()
    built = set()

    def walk(p):
        if isinstance(p, HloPassFix):
            walk(p.inner)
        elif isinstance(p, HloPassPipeline):
            for sub in p.passes:
                walk(sub)
        else:
            built.add(p.name)

    for p in sequence.pipelines:
        walk(p)
    assert built == {n for n in pipeline_pass_names() if n in PASS_REGISTRY}
    names = [p.name for p in sequence.pipelines]
    assert names[:3] == ["pre-spmd-partitioner", "spmd-partitioner", "optimization"]


def test_pipeline_order_follows_xla():
    names = [spec.name for spec in GPU_PIPELINES]
    order = ["pre-spmd-partitioner", "optimization", "layout assignment", "layout normalization",
             "post-layout_assignment", "fusion", "post-fusion optimization", "pre-scheduling-copy-insertion",
             "scheduling"]
    assert [n for n in names if n in order] == order
    optimization = GPU_PIPELINES[names.index("optimization")]
    simplification = [i for i in optimization.items
                      if isinstance(i, PipelineSpec) and i.name == "simplification"]
    assert simplification and simplification[0].fixed_point


def test_fusion_pipeline_places_priority_and_multi_output_fusion():
    fusion = next(spec for spec in GPU_PIPELINES if spec.name == "fusion")
    names = [i.name for i in fusion.items]
    assert names.index(PRIORITY_FUSION) < names.index(MULTI_OUTPUT_FUSION)
    after = names[names.index(PRIORITY_FUSION) + 1:names.index(MULTI_OUTPUT_FUSION)]
    assert after == ["cse", "dce"]
    assert names[-2:] == ["cse", "dce"]


def test_list_passes_is_sorted_and_marks_planned_passes():
    lines = list_passes_text().splitlines()
    names = [line.split()[0] for line in lines]
    assert names == sorted(names)
    by_name = dict(zip(names, lines))
    assert "(planned)" not in by_name["dce"] and "dead" in by_name["dce"].lower()
    planned = [n for n in PLANNED_PASSES if n not in PASS_REGISTRY]
    assert planned and all("(planned)" in by_name[n] for n in planned)
    assert all("(planned)" not in by_name[n] for n in PASS_REGISTRY)
    assert set(names) == set(PASS_REGISTRY) | set(PLANNED_PASSES)


def test_gpu_pipeline_on_a_small_module():
    m = module()
    build_gpu_pipeline().run_with(m, RunOptions(verify_each=True))
    text = print_module(m)
    assert text.count("add(") == 1  # cse merged the two adds
