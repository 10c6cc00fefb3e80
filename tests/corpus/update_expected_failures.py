"""Regenerate one tier's lines of `expected_failures.txt` from a fresh run (maintenance script).

    .venv/bin/python tests/corpus/update_expected_failures.py --tier interpreter [--jobs 2]

For the `interpreter` tier it runs the check of `test_interpreter_vs_xla.py` on every corpus
module (slow ones too, unless `--skip-slow`) in worker processes, then:
- rewrites that tier's lines of expected_failures.txt (sorted by module id; the reason is the
  interpreter's message or the mismatch summary), leaving every other tier's lines in place;
- rewrites `interpreter_notes.txt`: `slow` modules (the check took longer than `--slow-seconds`
  and they are not already slow by array size) and `xla-crash` modules (XLA:CPU killed the worker
  process or compiled for longer than `--hard-limit` seconds);
- prints the counts by outcome and by reason category.
The reasons are messages for people; the test compares only which modules are listed.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import multiprocessing
import queue
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "helpers"))  # corpus_lib

from corpus_lib import EXPECTED_FAILURES, corpus_modules  # noqa: E402

FAILING = ("error", "mismatch")


def _load_test_module():
    name = "test_interpreter_vs_xla"
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _worker(tasks, done) -> None:
    test = _load_test_module()
    while True:
        item = tasks.get()
        if item is None:
            return
        module_id, text, slow = item
        limit = test.SLOW_TIME_LIMIT_S if slow else test.TIME_LIMIT_S
        start = time.perf_counter()
        outcome = test.check_module(module_id, text, limit,
                                    on_phase=lambda phase: done.put(("phase", module_id, phase)))
        done.put(("result", (module_id, outcome.kind, outcome.reason, time.perf_counter() - start, slow)))


class _Pool:
    """Worker processes fed one module at a time; a dead or stuck worker is replaced."""

    def __init__(self, jobs: int, hard_limit: float):
        self.ctx = multiprocessing.get_context("spawn")
        self.done = self.ctx.Queue()
        self.jobs, self.hard_limit = jobs, hard_limit

    def _start(self) -> dict:
        tasks = self.ctx.Queue()
        proc = self.ctx.Process(target=_worker, args=(tasks, self.done), daemon=True)
        proc.start()
        return {"proc": proc, "tasks": tasks, "item": None, "since": 0.0, "phase": "start"}

    def run(self, items: list[tuple[str, str, bool]]) -> list[tuple]:
        pending = list(reversed(items))
        results: dict[str, tuple] = {}
        retried: set[str] = set()
        workers = [self._start() for _ in range(min(self.jobs, len(items)))]

        def feed(w):
            w["item"] = pending.pop() if pending else None
            w["since"], w["phase"] = time.monotonic(), "start"
            if w["item"] is not None:
                w["tasks"].put(w["item"])

        def finish(w, res):
            results.setdefault(res[0], res)
            print(f"[{len(results)}/{len(items)}] {res[0]}: {res[1]} ({res[3]:.1f}s) {res[2][:100]}",
                  file=sys.stderr, flush=True)
            feed(w)

        for w in workers:
            feed(w)
        while any(w["item"] is not None for w in workers):
            try:
                kind, *payload = self.done.get(timeout=2)
            except queue.Empty:
                kind, payload = None, None
            by_id = {w["item"][0]: w for w in workers if w["item"] is not None}
            if kind == "phase" and payload[0] in by_id:
                by_id[payload[0]]["phase"] = payload[1]
            elif kind == "result" and payload[0][0] in by_id:
                finish(by_id[payload[0][0]], payload[0])
            for i, w in enumerate(workers):
                if w["item"] is None:
                    continue
                dead = not w["proc"].is_alive()
                if dead or time.monotonic() - w["since"] > self.hard_limit:
                    w["proc"].kill()
                    workers[i] = self._start()
                    if dead and w["item"][0] not in retried:  # one retry: a death may be the machine's
                        retried.add(w["item"][0])
                        pending.append(w["item"])
                        feed(workers[i])
                        continue
                    workers[i]["item"] = w["item"]  # for finish(): record, then feed the new worker
                    finish(workers[i], self._failure(w, dead))
        for w in workers:
            w["tasks"].put(None)
        return list(results.values())

    def _failure(self, w: dict, dead: bool) -> tuple:
        mid, _, slow = w["item"]
        what = "crashed (the process died)" if dead else f"ran longer than {self.hard_limit:g} s"
        secs = time.monotonic() - w["since"]
        if w["phase"] in ("start", "xla"):
            return (mid, "xla-crash", f"XLA:CPU {what} while compiling", secs, slow)
        return (mid, "error", f"interpreter {what}", secs, slow)


def category(kind: str, reason: str) -> str:
    if kind == "mismatch":
        return "mismatch"
    m = re.search(r"cannot evaluate opcode '([^']+)'", reason)
    if m:
        return f"unsupported opcode {m.group(1)}"
    if "longer than" in reason or "crashed" in reason:
        return "time limit or crash"
    m = re.search(r"\(([a-z\-]+)\) in computation", reason)
    if m:
        return f"error in {m.group(1)}"
    return "other error"


def rewrite_tier(tier: str, lines: list[str]) -> None:
    """Replace `tier`'s lines in place (at the position of its first old line, else at the end)."""
    old = EXPECTED_FAILURES.read_text().splitlines() if EXPECTED_FAILURES.exists() else []
    out: list[str] = []
    inserted = False
    for line in old:
        if line.split(None, 1)[:1] == [tier]:
            if not inserted:
                out.extend(lines)
                inserted = True
            continue
        out.append(line)
    if not inserted:
        out.extend(lines)
    EXPECTED_FAILURES.write_text("\n".join(out) + "\n")


def print_summary(results: list[tuple], slow_seconds: float) -> None:
    kinds = collections.Counter(kind for _, kind, *_ in results)
    compared = sum(kinds[k] for k in ("error", "mismatch", "match"))
    default_run = sum(1 for _, kind, _, secs, slow in results
                      if kind in ("error", "mismatch", "match") and not slow and secs <= slow_seconds)
    print(f"modules: {len(results)}  " + "  ".join(f"{k}: {v}" for k, v in sorted(kinds.items())))
    print(f"runnable (compared): {compared}, of them in the default run: {default_run}, "
          f"matching: {kinds['match']}")
    print("listed (error or mismatch), by category:")
    cats = collections.Counter(category(kind, reason) for _, kind, reason, *_ in results if kind in FAILING)
    for cat, n in cats.most_common():
        print(f"  {n:4d}  {cat}")
    print("not runnable:")
    reasons = collections.Counter(reason.split(": ")[0][:70] for _, kind, reason, *_ in results
                                  if kind in ("not-runnable", "xla-crash"))
    for reason, n in reasons.most_common():
        print(f"  {n:4d}  {reason}")


def write_notes(path: Path, slow: dict[str, float], crash: dict[str, str], slow_seconds: float) -> None:
    head = ["# What the interpreter tier learned by measuring (written by update_expected_failures.py):",
            f"#   slow <module id> <seconds>: the check took over {slow_seconds:g} s (2-core machine);",
            "#   xla-crash <module id> <reason>: XLA:CPU aborted the process or hung while compiling."]
    lines = [f"slow {mid} {slow[mid]:.1f}" for mid in sorted(slow)]
    lines += [f"xla-crash {mid} {crash[mid]}" for mid in sorted(crash)]
    path.write_text("\n".join(head + lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tier", required=True, choices=["interpreter"])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--skip-slow", action="store_true", help="leave slow modules out (their lines are kept)")
    ap.add_argument("--slow-seconds", type=float, default=3.0)
    ap.add_argument("--hard-limit", type=float, default=400.0,
                    help="replace a worker whose module takes longer than this (XLA compile included)")
    ap.add_argument("--only", default="", help="check only module ids containing this (implies --dry-run)")
    ap.add_argument("--dry-run", action="store_true", help="print the summary, write nothing")
    opts = ap.parse_args()

    test = _load_test_module()
    modules = corpus_modules()
    static_slow = {mid for mid, text in modules if test.largest_array_elements(text) > test.SLOW_ELEMENTS}
    old_slow = set(test.notes("slow"))
    items = [(mid, text, mid in static_slow or mid in old_slow) for mid, text in modules if opts.only in mid]
    if opts.skip_slow:
        items = [it for it in items if not it[2]]
    items.sort(key=lambda it: it[2])  # the quick ones first
    results = sorted(_Pool(opts.jobs, opts.hard_limit).run(items))
    print_summary(results, opts.slow_seconds)
    if opts.dry_run or opts.only:
        return
    failing = {mid: reason for mid, kind, reason, *_ in results if kind in FAILING}
    slow = {mid: secs for mid, kind, _, secs, _ in results
            if kind != "xla-crash" and secs > opts.slow_seconds and mid not in static_slow}
    crash = {mid: reason for mid, kind, reason, *_ in results if kind == "xla-crash"}
    if opts.skip_slow:  # keep what is known about the modules that were not run
        ran = {r[0] for r in results}
        failing.update({mid: r for mid, r in _old_tier_lines(opts.tier).items() if mid not in ran})
        old_slow_notes = test.notes("slow")
        slow.update({mid: float(note.split()[0]) for mid, note in old_slow_notes.items() if mid not in ran})
        crash.update({mid: note for mid, note in test.notes("xla-crash").items() if mid not in ran})
    rewrite_tier(opts.tier, [f"{opts.tier} {mid} {failing[mid]}" for mid in sorted(failing)])
    write_notes(test.NOTES, slow, crash, opts.slow_seconds)
    print(f"wrote {len(failing)} '{opts.tier}' lines to {EXPECTED_FAILURES.name}; "
          f"{len(slow)} slow and {len(crash)} xla-crash notes to {test.NOTES.name}")


def _old_tier_lines(tier: str) -> dict[str, str]:
    from corpus_lib import expected_failures

    expected_failures.cache_clear()
    return expected_failures(tier)


if __name__ == "__main__":
    main()
