"""XLA's emitter-test CHECK lines, translated to our kernel IR (issue 10 item 5, second point).

Each XLA emitter test of the shared corpus (`*emitters_tests_*.hlo`) states with FileCheck what
XLA's MLIR for the fusion must contain. This module reads those CHECK lines, keeps the ones that
say something about the kernel's structure and translates them to our kernel IR
(`hlo_codegen.kernel_ir`), then checks them against the kernel our emitter writes for the same
fusion. `test_emitter_structure.py` runs it per file; run as a script it prints the summary:

    .venv/bin/python tests/helpers/emitter_structure.py [-k SUBSTRING] [--verbose]

Translation (XLA construct -> our kernel IR):

| XLA | ours |
| --- | --- |
| `shuffle_reduce(...) to N`, `gpu.shuffle down` | a `shuffle_reduce` op (`max_distance = N` when given) |
| `allocate_shared : tensor<AxBxT>` | a `shared` buffer of A*B elements of T, pred as i8 (placed |
| | in program order just before the first load or store of that buffer) |
| `sync_threads`, `gpu.barrier` | a `sync_threads` op |
| `tensor.insert` / `predicated_extract` next to shared memory | a store to / load from a shared buffer |
| `predicated_insert` | a store to a kernel parameter inside an `if` |
| `vector.transfer_read ... vector<NxT>` | a `load` whose result is `vector<NxT>` (for `vector<Nxi8>` |
| | also `vector<Nxi1>` from a pred buffer: pred is a byte in memory) |
| `vector<NxT>` alone | a load or store of a `vector<NxT>` value |
| `CHECK-NOT: vector<` | no vector load or store (in the CHECK-NOT's range) |
| `CHECK-NOT: allocate_shared` | no shared buffer (first used in the CHECK-NOT's range) |
| `xla.atomic_rmw` | an atomic read-modify-write op (`atomic_rmw`) |
| `gpu.block_id z` | `block_id {dim = z}` |
| `gpu.thread_id x {xla.range = [a, b]}` | `thread_id {dim = x, range = [a, b]}` |
| `math.F`, `arith.F` for the epilogue functions named in OP_SPECS (`log`, `absf`, `negf`, ...) | an op `F` |

Ordering follows FileCheck: `CHECK` and `CHECK-NEXT` lines match in program order (NEXT is read
as plain CHECK: our IR has other ops between), a run of `CHECK-DAG` lines matches in any order
after the previous match, and a `CHECK-NOT` holds between the match before it and the match
after it (the start and the end of the kernel where there is none). Program order is the walk of
the kernel body with called functions walked at their call. Everything else (function signatures,
`xla.pure_call`, `tensor.extract`, `apply_indexing`, constants, LLVM intrinsics, indexing maps,
`scf.index_switch`, `xla.loop` structure) has no counterpart that means the same and is skipped;
a file with no translatable line is checked for emission only.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LISTED = ROOT / "tests" / "unit" / "hlo_codegen" / "emitters" / "emitter_structure_failures.txt"

_CHECK_RE = re.compile(r"^//\s*CHECK(-NEXT|-DAG|-NOT|-SAME|-LABEL)?:\s?(.*)$")
_EPILOGUE_OPS = ("log", "absf", "negf", "exp", "sqrt", "rsqrt", "tanh", "addf", "mulf", "maximumf",
                 "minimumf", "divf", "subf")


@dataclass
class Pattern:
    """One translated CHECK line: `what` names our construct, `test(event)` matches one event."""

    source: str  # the CHECK line
    what: str  # our construct, in words
    kind: str  # "order" | "dag" | "not"
    match: object = field(repr=False, default=None)  # callable(Event) -> bool
    global_check: object = field(repr=False, default=None)  # callable(Kernel) -> bool, also required


@dataclass
class Event:
    """One op of the kernel in program order, with what the patterns look at."""

    name: str
    attrs: dict
    result_types: tuple[str, ...]
    operand_types: tuple[str, ...]
    buffer_kind: str  # kind of the buffer a load/store names, else ""
    in_if: bool
    buffer_type: str = ""  # HLO element type of that buffer

    def vector_types(self) -> tuple[str, ...]:
        """The vector types of this load or store as XLA's MLIR writes them: a pred buffer's
        vector<N x i1> is XLA's vector<N x i8> (pred is a byte in memory in both)."""
        types = self.result_types + self.operand_types
        if self.buffer_type == "pred":
            types = tuple(re.sub(r"^vector<(\d+)xi1>$", r"vector<\1xi8>", t) for t in types)
        return types


def events(kernel) -> list[Event]:
    """The kernel's ops in program order, called functions walked at the call."""
    buffers = {b.name: b.kind for b in kernel.buffers}
    types = {b.name: b.hlo_type for b in kernel.buffers}
    functions = {f.name: f for f in kernel.functions}
    out: list[Event] = []
    touched: set[str] = set()

    def walk(block, in_if: bool, depth: int) -> None:
        for op in block.ops:
            buffer = op.attrs.get("buffer", "")
            kind = buffers.get(buffer, "")
            if kind == "shared" and buffer not in touched:  # XLA's allocate_shared, at first use
                touched.add(buffer)
                out.append(Event("allocate_shared", {"buffer": buffer}, (), (), kind, in_if))
            out.append(Event(op.name, dict(op.attrs), tuple(r.type for r in op.results),
                             tuple(v.type for v in op.operands), kind, in_if, types.get(buffer, "")))
            # a call's function, and an atomic's combiner (XLA's atomic_rmw region), at the op
            if op.name in ("call", "atomic_rmw") and depth < 8 and op.attrs.get("callee") in functions:
                walk(functions[op.attrs["callee"]].body, in_if, depth + 1)
            for region in op.regions:
                walk(region, in_if or op.name == "if", depth)
    walk(kernel.body, False, 0)
    return out


def _mlir_elem(t: str) -> str:
    return t.strip()


def _shared_elements(t: str) -> tuple[int, str]:
    dims = t.split("x")
    n = 1
    for d in dims[:-1]:
        n *= int(d)
    return n, dims[-1]


def translate(line: str, kind: str) -> Pattern | None:
    """Our pattern for one CHECK line's text, or None when it has no counterpart."""
    src = line
    if kind == "not":
        m = re.search(r"vector<(\d+)x(\w+)>", line)
        if m:
            vt = f"vector<{m.group(1)}x{m.group(2)}>"
            return Pattern(src, f"no load or store of {vt}", kind,
                           lambda e, vt=vt: e.name in ("load", "store") and vt in e.vector_types())
        if "vector<" in line:
            return Pattern(src, "no vector load or store", kind,
                           lambda e: e.name in ("load", "store")
                           and any(t.startswith("vector<") for t in e.vector_types()))
        if "allocate_shared" in line:
            return Pattern(src, "no shared buffer", kind, lambda e: e.name == "allocate_shared")
        return None
    m = re.search(r"shuffle_reduce(?:\([^)]*\))?\s*to\s+(\d+)", line)
    if m:
        dist = int(m.group(1))
        return Pattern(src, f"shuffle_reduce max_distance={dist}", kind,
                       lambda e, d=dist: e.name == "shuffle_reduce" and e.attrs.get("max_distance") == d)
    if "shuffle_reduce" in line or "gpu.shuffle" in line:
        return Pattern(src, "shuffle_reduce", kind, lambda e: e.name == "shuffle_reduce")
    m = re.search(r"allocate_shared\s*:\s*tensor<([0-9x]+x\w+)>", line)
    if m:
        n, elem = _shared_elements(m.group(1))
        return Pattern(src, f"shared buffer {elem}[{n}]", kind, lambda e: e.name == "allocate_shared",
                       global_check=lambda k, n=n, elem=elem: _has_shared(k, n, elem))
    if "allocate_shared" in line:
        return Pattern(src, "shared buffer", kind, lambda e: e.name == "allocate_shared")
    if "sync_threads" in line or "gpu.barrier" in line:
        return Pattern(src, "sync_threads", kind, lambda e: e.name == "sync_threads")
    if "predicated_extract" in line:
        return Pattern(src, "load from shared", kind,
                       lambda e: e.name == "load" and e.buffer_kind == "shared")
    if "predicated_insert" in line:
        return Pattern(src, "guarded store to a parameter", kind,
                       lambda e: e.name == "store" and e.buffer_kind == "param" and e.in_if)
    if "atomic_rmw" in line:
        return Pattern(src, "atomic_rmw", kind, lambda e: e.name.startswith("atomic"))
    m = re.search(r"vector\.transfer_read.*vector<(\d+)x(\w+)>", line)
    if m:
        vt = f"vector<{m.group(1)}x{_mlir_elem(m.group(2))}>"
        return Pattern(src, f"load of {vt}", kind,
                       lambda e, vt=vt: e.name == "load" and vt in e.vector_types())
    m = re.fullmatch(r"\s*vector<(\d+)x(\w+)>\s*", line)
    if m:
        vt = f"vector<{m.group(1)}x{_mlir_elem(m.group(2))}>"
        return Pattern(src, f"load or store of {vt}", kind,
                       lambda e, vt=vt: e.name in ("load", "store") and vt in e.vector_types())
    m = re.search(r"gpu\.block_id\s+([xyz])", line)
    if m:
        dim = m.group(1)
        return Pattern(src, f"block_id {dim}", kind,
                       lambda e, d=dim: e.name == "block_id" and e.attrs.get("dim") == d)
    m = re.search(r"gpu\.thread_id\s+([xyz])\s*\{xla\.range = \[(\d+) : index, (\d+) : index\]", line)
    if m:
        dim, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
        return Pattern(src, f"thread_id {dim} range [{lo}, {hi}]", kind,
                       lambda e, d=dim, r=[lo, hi]: e.name == "thread_id" and e.attrs.get("dim") == d
                       and list(e.attrs.get("range", [])) == r)
    m = re.search(r"\b(?:math|arith)\.(\w+)", line)
    if m and m.group(1) in _EPILOGUE_OPS and "%" in line.split("=", 1)[0]:
        op = m.group(1)
        return Pattern(src, op, kind, lambda e, op=op: e.name == op)
    return None


def _has_shared(kernel, n: int, elem: str) -> bool:
    from hlo_codegen.kernel_ir.types import ir_type

    def storage(hlo_type: str) -> str:  # pred is a byte in memory, XLA's tensor of i8
        return "i8" if hlo_type == "pred" else ir_type(hlo_type)

    return any(b.kind == "shared" and b.num_elements == n and storage(b.hlo_type) == elem
               for b in kernel.buffers)


def patterns_of(text: str) -> tuple[list[Pattern], int]:
    """(translated patterns, number of CHECK lines) of a corpus file."""
    out: list[Pattern] = []
    total = 0
    for raw in text.splitlines():
        m = _CHECK_RE.match(raw.strip())
        if not m:
            continue
        total += 1
        suffix = m.group(1) or ""
        if suffix in ("-SAME", "-LABEL"):
            continue
        kind = {"-DAG": "dag", "-NOT": "not"}.get(suffix, "order")
        p = translate(m.group(2), kind)
        if p is not None:
            out.append(p)
    return out, total


def check_kernel(kernel, patterns: list[Pattern]) -> list[str]:
    """The patterns the kernel does not satisfy, as `what (CHECK text)` lines."""
    evs = events(kernel)
    failures: list[str] = []
    pos = 0  # index after the last ordered match
    pending: list[Pattern] = []  # CHECK-NOTs since the last match, checked up to the next one

    def check_not(end: int) -> None:
        for q in pending:
            if any(q.match(evs[j]) for j in range(pos, end)):
                failures.append(f"{q.what} [CHECK-NOT: {q.source.strip()}]")
        pending.clear()

    i = 0
    while i < len(patterns):
        p = patterns[i]
        if p.kind == "not":
            pending.append(p)
            i += 1
            continue
        if p.kind == "dag":
            group = []
            while i < len(patterns) and patterns[i].kind == "dag":
                group.append(patterns[i])
                i += 1
            first, dag_end = len(evs), pos
            for q in group:
                hits = [j for j in range(pos, len(evs)) if q.match(evs[j])]
                if not hits or (q.global_check is not None and not q.global_check(kernel)):
                    check_not(len(evs))
                    failures.append(f"{q.what} [CHECK-DAG: {q.source.strip()}]")
                else:
                    first, dag_end = min(first, hits[0]), max(dag_end, hits[0] + 1)
            check_not(first)
            pos = dag_end
            continue
        hit = next((j for j in range(pos, len(evs)) if p.match(evs[j])), None)
        if hit is None or (p.global_check is not None and not p.global_check(kernel)):
            check_not(len(evs))  # no next match to end their range: up to the end
            where = "" if pos == 0 or hit is not None else " after the previous match"
            failures.append(f"{p.what}{where} [CHECK: {p.source.strip()}]")
        else:
            check_not(hit)
            pos = hit + 1
        i += 1
    check_not(len(evs))
    return failures


def kernel_for(path: Path):
    from hlo_codegen.emitters import emit_kernel, wrap_computation_in_fusion
    from hlo_codegen.emitters import in_place_argument_ids
    from hlo_common.hlo.parser import parse_module

    module = parse_module(path.read_text(), str(path))
    root = module.entry.root
    fusion = root if root.opcode == "fusion" else wrap_computation_in_fusion(module, module.entry)
    # in place, as XLA's buffer assignment runs a scatter or a DUS (own buffers for other fusions)
    return emit_kernel(fusion, argument_ids=in_place_argument_ids(fusion))


@dataclass
class Result:
    name: str
    translated: int
    checks: int
    failures: list[str]
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.failures and not self.error


def run_file(path: Path) -> Result:
    text = path.read_text()
    pats, total = patterns_of(text)
    try:
        kernel = kernel_for(path)
    except Exception as e:  # noqa: BLE001  (an emission failure is this file's result)
        msg = e.one_line() if hasattr(e, "one_line") else str(e)
        first = (msg.splitlines() or [""])[0][:160]
        return Result(path.name, len(pats), total, [], f"{type(e).__name__}: {first}")
    return Result(path.name, len(pats), total, check_kernel(kernel, pats))


def listed_failures() -> dict[str, str]:
    out = {}
    if LISTED.exists():
        for line in LISTED.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, _, reason = line.partition(" ")
                out[name] = reason.strip()
    return out


# Why today's emitters miss XLA's structure, by corpus file-name prefix (used by --update).
VECTORIZED_TILE = ("CHECK line of a newer XLA's vectorized 32v x (32v+1) tile; the XLA:GPU of the launch "
                   "reference (and FusionAnalysis) packs this one: a 32v x 32v swizzled tile")
A6000_UNROLL = ("XLA's emitter-test tools emit for an RTX A6000 (84 SMs x 1536 threads: unroll 4 from "
                "129024 elements); on the H100 XLA's rule gives 240000 elements unroll 1, as the launch "
                "reference shows")
AREA_REASONS = (
    ("reduce_multirow__f16_v4", "the CHECK lines come from XLA's test device: on an H100 (132 SMs) "
                                "XLA's multi-row rule halves the vector to 2, as its launch shows"),
    ("reduce_multirow__pred_mof", "the CHECK lines come from XLA's test device: on an H100 (132 SMs) "
                                  "XLA's multi-row rule halves the vector to 2"),
    ("reduce_column_small__s8_f32", "XLA's vector<4xf32> is the converted value; we load vector<4xi8> "
                                    "and convert lane by lane"),
    ("reduce_", "reduction emitter differs"),
    ("transpose__packed_transpose_s4", "4-bit transposes go to the loop emitter (no sub-byte shared tiles)"),
    ("transpose__transpose_102_s4", "4-bit transposes go to the loop emitter (no sub-byte shared tiles)"),
    ("transpose__prefer_large_vectors", VECTORIZED_TILE),
    ("transpose__transpose_021_vectorized", VECTORIZED_TILE),
    ("transpose__transpose_210_vectorized", VECTORIZED_TILE),
    ("transpose_", "transpose emitter differs"),
    ("scatter_", "scatter differs from XLA's emitter"),
    ("dynamic_update_slice__vectorize_x4", A6000_UNROLL),
    ("dynamic_update_slice_", "DUS emitter differs"),
    ("loop__vectorize_x4", A6000_UNROLL),
    ("loop_", "loop emitter differs"),
)


def reason_for(r: Result) -> str:
    short = r.name.replace("backends_gpu_codegen_emitters_tests_", "").replace("codegen_emitters_tests_", "")
    area = next((why for prefix, why in AREA_REASONS if short.startswith(prefix)), "emitter differs")
    if r.error:
        return f"{area}; emission fails: {r.error}"
    missing = list(dict.fromkeys(f.rsplit(" [CHECK", 1)[0] for f in r.failures))
    return f"{area}; missing: {', '.join(missing)}"


def main(argv: list[str]) -> int:
    import argparse
    import os

    ap = argparse.ArgumentParser(description="XLA's emitter-test CHECK lines against our kernel IR")
    ap.add_argument("-k", dest="only", default="")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--update", action="store_true", help="rewrite the listed-failures file")
    opts = ap.parse_args(argv)
    corpus = Path(os.environ.get("HLO_CORPUS_DIR", ROOT.parent / "shared" / "corpus" / "xla"))
    files = sorted(p for p in corpus.glob("*emitters_tests_*.hlo") if opts.only in p.name)
    listed = listed_failures()
    results = [run_file(p) for p in files]
    for r in results:
        if not r.passed or opts.verbose:
            state = "pass" if r.passed else "FAIL" + (" (listed)" if r.name in listed else "")
            print(f"{state} {r.name} ({r.translated}/{r.checks} CHECK lines translated)")
            for f in r.failures:
                print(f"    missing: {f}")
            if r.error:
                print(f"    error: {r.error}")
    if opts.update:
        head = [ln for ln in LISTED.read_text().splitlines() if ln.startswith("#")] if LISTED.exists() else []
        body = [f"{r.name} {reason_for(r)}" for r in results if not r.passed]
        LISTED.write_text("\n".join(head + body) + "\n")
        print(f"wrote {LISTED}: {len(body)} entries")
    with_checks = [r for r in results if r.translated]
    print(f"{len(results)} files: {sum(r.passed for r in results)} pass "
          f"({sum(r.passed for r in with_checks)} of {len(with_checks)} with translated CHECK lines, "
          f"{len(results) - len(with_checks)} checked for emission only); "
          f"{sum(not r.passed for r in results)} fail, {len(listed)} listed")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    sys.exit(main(sys.argv[1:]))
