"""Corpus tiers `pipeline-layout` and `codegen-layout`: the pipeline and pipe tiers again, on
layout variants of every runnable module (`tests/helpers/layout_variants.py`).

A variant `<module id>@<k>` (k = 0 .. VARIANTS-1) gives every entry parameter and result leaf of
rank >= 2 a seeded permuted layout (through the parameters' shapes and entry_computation_layout)
and turns on layout-assignment's `vary_layouts_seed` knob, which moves every dot's result into
another layout cuBLAS can write and every convolution into a cuDNN layout triple. So GEMM rewriting
and its epilogues, layout normalization, transposes, reductions, bitcasts, copy insertion and the
emitters meet layouts the corpus seldom has. Per variant:

- `pipeline-layout` (test_pipeline_corpus.check_module): the interpreter on the variant, the gpu
  pipeline with the knob and the verifier after every pass, the interpreter after; compared with
  that tier's bounds;
- `codegen-layout` (test_pipe_corpus's stages): hlo-opt with the knob | hlo-codegen --target host |
  hlo-run --platform host against the interpreter on the manifest's module, and the cuda PTX
  linking with nvJitLink.

Runs the modules those tiers run, less the ones with no layout freedom (no entry value of rank
>= 2, no dot, no convolution: every variant would be the module itself) and the parts listed under
`pipeline` / `codegen` (they fail whatever the layouts). A failing variant is listed under its
tier in expected_failures.txt, `codegen-layout` lines with `host:` / `cuda:` parts as `codegen`'s;
a listed variant that passes fails its test. The default run takes a seeded sample of the
non-slow variants (DEFAULT_PIPELINE and DEFAULT_PIPE of them, one per module, half of them from
modules with a dot or a convolution); the rest are `slow`. Regenerate the lines (every variant,
one worker, each variant killed after HARD_LIMIT_S) with

    .venv/bin/python tests/corpus/test_layout_corpus.py --update [--modules ID...] [--jobs 1]
"""

from __future__ import annotations

import functools
import sys
import time
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
import test_pipe_corpus as pipe  # noqa: E402
import test_pipeline_corpus as pipeline  # noqa: E402
from corpus_lib import EXPECTED_FAILURES, corpus_available, expected_failures  # noqa: E402
from layout_variants import has_layout_freedom, pipeline_overrides, variant_text  # noqa: E402

PIPELINE_TIER, PIPE_TIER = "pipeline-layout", "codegen-layout"
VARIANTS = 6
DEFAULT_PIPELINE = 300  # variants of the default run, pipeline tier
DEFAULT_PIPE = 100  # and pipe tier (host and cuda)
HARD_LIMIT_S = 240  # --update kills a worker whose variant (pipeline + host + cuda) runs past this


# -- which variants --------------------------------------------------------------------------------------
def _interesting(module_id: str, text: str) -> tuple[bool, bool]:
    """(has layout freedom, has a dot or convolution)."""
    from hlo_common.hlo.parser import parse_module

    module = parse_module(text, module_id)
    library = any(i.opcode in ("dot", "convolution") for c in module.computations for i in c.instructions)
    return has_layout_freedom(module), library


def _sampled(rows: list[tuple[str, str, int, bool, bool]], count: int) -> set[str]:
    """`count` variant ids of the non-slow rows, one variant per module (chosen by crc32), half of
    them from modules with a dot or a convolution, in crc32 order."""
    def crc(text: str) -> int:
        return zlib.crc32(text.encode())

    fast = sorted((r for r in rows if not r[3] and r[2] == crc(r[0]) % VARIANTS),
                  key=lambda r: crc(f"{r[0]}@{r[2]}"))
    library = [r for r in fast if r[4]][:count // 2]
    others = [r for r in fast if not r[4]][:count - len(library)]
    return {f"{r[0]}@{r[2]}" for r in library + others}


def _variants(modules, listed: set[str], count: int) -> tuple[tuple[str, str, int, str, bool], ...]:
    """(variant id, module id, k, text, slow) for the modules with layout freedom."""
    rows = []
    for module_id, text, slow in modules:
        if module_id in listed:
            continue
        free, library = _interesting(module_id, text)
        if free:
            rows += [(module_id, text, k, slow, library) for k in range(VARIANTS)]
    default = _sampled(rows, count)
    return tuple((f"{m}@{k}", m, k, t, f"{m}@{k}" not in default) for m, t, k, _s, _l in rows)


@functools.lru_cache(maxsize=None)
def pipeline_variants():
    listed = set(expected_failures(pipeline.TIER))
    return _variants(pipeline.candidate_modules(), listed, DEFAULT_PIPELINE)


@functools.lru_cache(maxsize=None)
def pipe_variants():
    return _variants(pipe.runnable_modules(), set(), DEFAULT_PIPE)


# -- one variant ---------------------------------------------------------------------------------------
def check_pipeline_variant(variant_id: str, module_id: str, k: int, text: str) -> pipeline.Outcome:
    vtext, seed = variant_text(text, module_id, k)
    return pipeline.check_module(variant_id, vtext, pipeline_overrides(seed))


def _pipe_stages(variant_id: str, module_id: str, k: int, text: str, target: str) -> pipe.Outcome:
    vtext, seed = variant_text(text, module_id, k)
    stages = [("hlo-opt", lambda _: pipe.optimized_text(variant_id, vtext, seed)),
              ("hlo-codegen", lambda opt: pipe.compile_text(variant_id, opt, target))]
    if target == "host":
        stages.append(("hlo-run", lambda data: pipe.run_manifest(variant_id, data)))
    return pipe._unless_unrunnable(variant_id, vtext, pipe._staged(stages))


def check_host_variant(variant_id: str, module_id: str, k: int, text: str) -> pipe.Outcome:
    return _pipe_stages(variant_id, module_id, k, text, "host")


def check_cuda_variant(variant_id: str, module_id: str, k: int, text: str) -> pipe.Outcome:
    return _pipe_stages(variant_id, module_id, k, text, "cuda")


# -- the tests -------------------------------------------------------------------------------------------
def _params(rows):
    if not corpus_available():
        return [pytest.param(None, None, None, None, id="no-corpus")]
    return [pytest.param(vid, mid, k, text, id=vid, marks=[pytest.mark.slow] if slow else [])
            for vid, mid, k, text, slow in rows]


@pytest.mark.parametrize("variant_id, module_id, k, text", _params(pipeline_variants()))
def test_pipeline_keeps_results_in_other_layouts(variant_id, module_id, k, text):
    if variant_id is None:
        pytest.skip("corpus not found")
    outcome = check_pipeline_variant(variant_id, module_id, k, text)
    listed = expected_failures(PIPELINE_TIER).get(variant_id)
    if outcome.kind == "not-runnable":
        pytest.skip(f"not runnable: {outcome.reason}")
    if outcome.kind == "fail" and listed is None:
        pytest.fail(f"{variant_id}: {outcome.reason} (fix it, or list it under '{PIPELINE_TIER}' in "
                    "tests/corpus/expected_failures.txt)", pytrace=False)
    if outcome.kind == "ok" and listed is not None:
        pytest.fail(f"{variant_id} now keeps its results but is listed ({listed}); remove its "
                    f"'{PIPELINE_TIER}' line", pytrace=False)


def _listed_pipe_part(module_id: str, variant_id: str, part: str) -> tuple[str | None, str | None]:
    """(this variant's listed reason, the base module's listed reason) for `part`."""
    def parts(line: str | None) -> dict[str, str]:
        out = {}
        for piece in (line or "").split(" | "):
            key, _, reason = piece.partition(": ")
            if key in ("host", "cuda"):
                out[key] = reason
        return out

    return (parts(expected_failures(PIPE_TIER).get(variant_id)).get(part),
            parts(expected_failures(pipe.TIER).get(module_id)).get(part))


def _expect_pipe(variant_id: str, module_id: str, k: int, text: str, part: str, check) -> None:
    listed, base = _listed_pipe_part(module_id, variant_id, part)
    if base is not None:
        pytest.skip(f"the module itself is listed under '{pipe.TIER}': {base}")
    outcome = pipe.with_time_limit(lambda: check(variant_id, module_id, k, text), pipe.TIME_LIMIT_S)
    if not outcome.runnable:
        pytest.skip(f"not runnable: {outcome.reason}")
    if not outcome.ok and listed is None:
        pytest.fail(f"{variant_id}: {part} pipe fails: {outcome.reason} (fix it, or list it under "
                    f"'{PIPE_TIER}' in tests/corpus/expected_failures.txt)", pytrace=False)
    if outcome.ok and listed is not None:
        pytest.fail(f"{variant_id}: the {part} pipe now passes but is listed ({listed}); remove the "
                    f"'{part}:' part of its '{PIPE_TIER}' line", pytrace=False)


@pytest.mark.parametrize("variant_id, module_id, k, text", _params(pipe_variants()))
def test_pipe_host_in_other_layouts(variant_id, module_id, k, text):
    if variant_id is None:
        pytest.skip("corpus not found")
    _expect_pipe(variant_id, module_id, k, text, "host", check_host_variant)


@pytest.mark.parametrize("variant_id, module_id, k, text", _params(pipe_variants()))
def test_pipe_cuda_ptx_links_in_other_layouts(variant_id, module_id, k, text):
    if variant_id is None:
        pytest.skip("corpus not found")
    pytest.importorskip("cuda.bindings.nvjitlink", reason="PTX linking needs nvJitLink (the ptx extra)")
    _expect_pipe(variant_id, module_id, k, text, "cuda", check_cuda_variant)


def test_layout_lines_name_variants_the_tiers_run():
    """A line for a variant no tier runs (no longer runnable, or VARIANTS lowered) can only go stale."""
    if not corpus_available():
        pytest.skip("corpus not found")
    for tier, rows in ((PIPELINE_TIER, pipeline_variants()), (PIPE_TIER, pipe_variants())):
        stale = sorted(set(expected_failures(tier)) - {r[0] for r in rows})
        assert not stale, f"'{tier}' lines for variants the tier does not run: {stale}"


# -- maintenance: regenerate the lines -----------------------------------------------------------------------
def check_variant(item: tuple[str, str, int, str, bool, bool]) -> tuple[dict[str, str], dict[str, str]]:
    """({part: outcome kind}, {tier: expected-failures line}) for one variant; parts are pipeline,
    host and cuda, kinds ok / fail / not-runnable / listed (the module itself is)."""
    variant_id, module_id, k, text, run_pipeline, run_pipe = item
    kinds: dict[str, str] = {}
    lines: dict[str, str] = {}
    if run_pipeline:
        outcome = check_pipeline_variant(variant_id, module_id, k, text)
        kinds["pipeline"] = outcome.kind
        if outcome.kind == "fail":
            lines[PIPELINE_TIER] = f"{PIPELINE_TIER} {variant_id} {outcome.reason}"
    if run_pipe:
        parts = []
        for part, check in (("host", check_host_variant), ("cuda", check_cuda_variant)):
            if _listed_pipe_part(module_id, variant_id, part)[1] is not None:
                kinds[part] = "listed"
                continue
            outcome = pipe.with_time_limit(lambda: check(variant_id, module_id, k, text), pipe.TIME_LIMIT_S)
            kinds[part] = "not-runnable" if not outcome.runnable else "ok" if outcome.ok else "fail"
            if kinds[part] == "fail":
                parts.append(f"{part}: {outcome.reason}")
        if parts:
            lines[PIPE_TIER] = f"{PIPE_TIER} {variant_id} {' | '.join(parts)}"
    return kinds, lines


def _worker(fn, tasks, results) -> None:
    while (item := tasks.get()) is not None:
        results.put((item[0], fn(item)))


def run_killable(fn, items: list[tuple], jobs: int, hard_limit_s: float):
    """Yield (item id, fn(item) or why it has none, seconds) for items whose first field is their
    id, `jobs` at a time in worker processes; a worker that dies or runs one item past
    `hard_limit_s` is replaced (the alarm cannot stop a NumPy call or a JIT-compiled kernel)."""
    import multiprocessing
    import queue

    ctx = multiprocessing.get_context("spawn")
    results, pending, workers = ctx.Queue(), list(reversed(items)), []

    def start() -> None:
        tasks = ctx.Queue()
        proc = ctx.Process(target=_worker, args=(fn, tasks, results), daemon=True)
        proc.start()
        workers.append({"proc": proc, "tasks": tasks})
        feed(workers[-1])

    def feed(w) -> None:
        w["item"], w["since"] = (pending.pop() if pending else None), time.monotonic()
        w["tasks"].put(w["item"])

    for _ in range(min(jobs, len(items))):
        start()
    while any(w["item"] is not None for w in workers):
        try:
            item_id, result = results.get(timeout=5)
            owner = next((w for w in workers if w["item"] is not None and w["item"][0] == item_id), None)
            if owner is not None:  # else the late word of a worker already replaced
                yield item_id, result, time.monotonic() - owner["since"]
                feed(owner)
        except queue.Empty:
            pass
        for w in [w for w in workers if w["item"] is not None]:
            stuck = time.monotonic() - w["since"] > hard_limit_s
            if stuck or not w["proc"].is_alive():
                if stuck:
                    w["proc"].kill()
                w["proc"].join()
                yield (w["item"][0], f"took longer than {hard_limit_s} s" if stuck
                       else f"crashed (exit code {w['proc'].exitcode})", time.monotonic() - w["since"])
                workers.remove(w)
                start()
    for w in workers:
        w["tasks"].put(None)


def _part_keys(reason: str) -> set[str]:
    return {piece.partition(": ")[0] for piece in reason.split(" | ") if piece.startswith(("host:", "cuda:"))}


def update(only: list[str] | None, jobs: int) -> None:
    from collections import Counter

    pl = {r[0]: r for r in pipeline_variants()}
    pp = {r[0]: r for r in pipe_variants()}
    ids = sorted(set(pl) | set(pp), key=lambda v: (v.rsplit("@", 1)[0], v))
    if only:
        ids = [v for v in ids if v.rsplit("@", 1)[0] in only or v in only]
    items = [(v, *(pl.get(v) or pp[v])[1:4], v in pl, v in pp) for v in ids]
    lines: dict[str, dict[str, str]] = {PIPELINE_TIER: {}, PIPE_TIER: {}}
    counts: Counter = Counter()
    for variant_id, result, seconds in run_killable(check_variant, items, jobs, HARD_LIMIT_S):
        if isinstance(result, str):  # killed or crashed: every part it would have run fails
            parts = (["pipeline"] if variant_id in pl else []) + (["host"] if variant_id in pp else [])
            result = ({p: "fail" for p in parts},
                      {t: f"{t} {variant_id} {'host: ' if t == PIPE_TIER else ''}{result}"
                       for t, p in ((PIPELINE_TIER, "pipeline"), (PIPE_TIER, "host")) if p in parts})
        kinds, found = result
        counts.update(f"{part} {kind}" for part, kind in kinds.items())
        for tier, line in found.items():  # a line explained by hand survives while it still fails so
            listed = expected_failures(tier).get(variant_id)
            same = listed is not None and _part_keys(listed) == _part_keys(line.split(" ", 2)[2])
            lines[tier][variant_id] = f"{tier} {variant_id} {listed}" if same else line
        print(f"{seconds:6.1f}s {variant_id}: {' | '.join(found.values()) or 'ok'}", flush=True)
    checked = set(ids)
    old = EXPECTED_FAILURES.read_text().splitlines()
    kept = [ln for ln in old if ln.split(" ", 1)[0] not in lines or ln.split()[1] not in checked]
    new = [lines[t][v] for t in (PIPELINE_TIER, PIPE_TIER) for v in sorted(lines[t])]
    EXPECTED_FAILURES.write_text("\n".join(kept + new) + "\n")
    print(f"{len(items)} variants checked ({len({i[1] for i in items})} modules): "
          + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Regenerate the layout tiers of expected_failures.txt")
    parser.add_argument("--update", action="store_true", required=True)
    parser.add_argument("--modules", nargs="+", metavar="ID", help="only these modules (or variant ids)")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    update(args.modules, args.jobs)
