"""Launch dimensions of hlo-codegen's kernels against XLA:GPU's for the same fusions (issue 10
item 5: grid, block and shared memory; a check without a GPU).

    .venv/bin/python bench/launch_dims_vs_xla.py [-k SUBSTRING] [--all]
    .venv/bin/python bench/launch_dims_vs_xla.py regenerate [--xla-python PATH] [-k SUBSTRING]

Two module sets:

- `corpus/<file>`: every XLA emitter test of the shared corpus (`*emitters_tests_*.hlo`). Such a
  file holds a fused computation, not a module. Ours: the computation wrapped in a fusion
  (`wrap_computation_in_fusion`, as the emitter tests do) and emitted in-process. XLA's: XLA's
  compile path rejects a fusion instruction in its input (`mhlo.fusion` cannot be legalized), so
  XLA gets the fused computation as the entry of a module and fuses it itself; when it forms one
  kernel, that kernel is the fusion of the test file.
- `fusion/<name>`: the modules of `bench/fusion_vs_xla.py` (`testdata/fusion/<name>.hlo`),
  compiled by XLA without Triton (the flags of `xla/<name>.notriton.hlo`). Each of XLA's kernels
  is the fusion of that name in `testdata/fusion/xla/<name>.notriton.hlo`; ours is that same
  fusion instruction emitted in-process.

Both emit an in-place dynamic-update-slice fusion with each DUS output sharing the buffer of the
parameter it updates (`in_place_argument_ids`), as XLA's buffer assignment does.

`regenerate` runs XLA (`bench/xla_compile_worker.py` under a Python with jax and its CUDA plugin,
no GPU needed) and rewrites `tests/data/launch_dims_xla.tsv`: one line per XLA kernel, `module
kernel grid block shared_bytes`, grid and block as `x,y,z` from XLA's `thunk_sequence.txt`, the
shared memory being the dynamic bytes of the thunk plus the static `.shared` arrays the kernel's
PTX entry declares (XLA's emitters allocate their shared memory statically). A module XLA rejects
gets one line `module - error: message`. The file is committed so that the test
(`tests/unit/hlo_codegen/test_launch_dims_vs_xla.py`) runs without the CUDA plugin.

The comparison takes the number of blocks, the threads per block (products: XLA's emitters use
only the x dimension, ours also y) and the shared-memory bytes. The default mode prints one line
per kernel that differs and the counts; `--all` prints the matching ones too.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # this tree's sources, whatever the venv has installed

REFERENCE = ROOT / "tests" / "data" / "launch_dims_xla.tsv"
DIFFERENCES = ROOT / "tests" / "data" / "launch_dims_differences.txt"
FUSION_DIR = ROOT / "testdata" / "fusion"
CORPUS_DIR = Path(os.environ.get("HLO_CORPUS_DIR", ROOT.parent / "shared" / "corpus" / "xla"))
CORPUS_GLOB = "*emitters_tests_*.hlo"
XLA_PYTHON = "/work/jaxgpu/bin/python"
NOTRITON_FLAGS = "--xla_gpu_enable_triton_gemm=false --xla_disable_hlo_passes=triton-softmax-rewriter"

_THUNK_RE = re.compile(r"(\S+)\s+grid:\s*\[([\d,\s]+)\]\s+threads:\s*\[([\d,\s]+)\]\s+"
                       r"shared_memory:\s*(\d+)\s*bytes")
_PTX_ENTRY_RE = re.compile(r"\.entry\s+([\w$.]+)\s*\(")
_PTX_SHARED_RE = re.compile(r"\.shared\s+(?:\.align\s+\d+\s+)?\.([busf])(\d+)\s+[\w$.]+((?:\[\d+\])+)\s*;")


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int

    def key(self) -> tuple[int, int, int]:
        return math.prod(self.grid), math.prod(self.block), self.shared

    def __str__(self) -> str:
        return f"grid {_dims(self.grid)} block {_dims(self.block)} shmem {self.shared}"


def _dims(d: tuple[int, ...]) -> str:
    return ",".join(str(x) for x in d)


def _triple(text: str) -> tuple[int, int, int]:
    vals = [int(x) for x in re.split(r"[,\s]+", text.strip()) if x]
    return tuple((vals + [1, 1, 1])[:3])  # type: ignore[return-value]


# ----------------------------------------------------------------------------- XLA's dump files

def parse_thunk_sequence(text: str) -> list[tuple[str, tuple, tuple, int]]:
    """(kernel name, grid, block, dynamic shared bytes) of every kernel launch in XLA's
    `thunk_sequence.txt`, in order (thunks nested in control flow included)."""
    return [(m.group(1), _triple(m.group(2)), _triple(m.group(3)), int(m.group(4)))
            for m in _THUNK_RE.finditer(text)]


def ptx_static_shared(text: str) -> dict[str, int]:
    """Bytes of the `.shared` arrays each `.entry` of a PTX file declares (function scope)."""
    out: dict[str, int] = {}
    entries = list(_PTX_ENTRY_RE.finditer(text))
    for i, m in enumerate(entries):
        body = text[m.end(): entries[i + 1].start() if i + 1 < len(entries) else len(text)]
        total = 0
        for s in _PTX_SHARED_RE.finditer(body):
            count = math.prod(int(n) for n in re.findall(r"\d+", s.group(3)))
            total += count * int(s.group(2)) // 8
        out[m.group(1)] = total
    return out


def xla_input_for_corpus(path: Path) -> str:
    """The module XLA compiles for an emitter-test file: its fused computation as the entry."""
    from hlo_codegen.emitters import wrap_computation_in_fusion
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo.printer import print_module

    module = parse_module(path.read_text(), str(path))
    root = module.entry.root
    fusion = root if root.opcode == "fusion" else wrap_computation_in_fusion(module, module.entry)
    comp = fusion.attrs["calls"]
    for c in module.computations:  # XLA's StableHLO import rejects bitcasts: reshape where equal
        for instr in c.instructions:
            if instr.opcode == "bitcast" and _plain_reshape(instr.operands[0].shape, instr.shape):
                instr.opcode = "reshape"
    old = module.entry
    module.computations = [c for c in module.computations if c is not old]
    module.entry = comp
    comp.is_entry = True
    return print_module(module, print_metadata=False)


def _plain_reshape(src, dst) -> bool:
    """A bitcast from `src` to `dst` is a reshape: same element type, both layouts row-major."""
    return (src.is_array and dst.is_array and src.element_type == dst.element_type
            and (src.layout is None or src.layout.is_default())
            and (dst.layout is None or dst.layout.is_default()))


def corpus_files(only: str = "") -> list[Path]:
    return sorted(p for p in CORPUS_DIR.glob(CORPUS_GLOB) if only in p.name)


def fusion_names(only: str = "") -> list[str]:
    return sorted(p.stem for p in FUSION_DIR.glob("*.hlo") if only in p.stem)


def regenerate(xla_python: str, only: str) -> int:
    """Compile every module with XLA and rewrite the reference file (lines of the modules
    selected by `only` replaced, the others kept)."""
    jobs: list[tuple[str, str]] = []  # (module key, XLA input text)
    for p in corpus_files():
        if only in f"corpus/{p.name}":
            jobs.append((f"corpus/{p.name}", xla_input_for_corpus(p)))
    for name in fusion_names():
        if only in f"fusion/{name}":
            jobs.append((f"fusion/{name}", (FUSION_DIR / f"{name}.hlo").read_text()))
    rows: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="launch_dims_") as tmp:
        dump = Path(tmp) / "dump"
        inputs = []
        for i, (key, text) in enumerate(jobs):
            # A unique module name per job: XLA names its dump files after it.
            text, n = re.subn(r"^(\s*HloModule\s+)[\w.\-]+", rf"\g<1>j{i:04d}", text, count=1, flags=re.M)
            path = Path(tmp) / f"j{i:04d}.hlo"
            path.write_text(text if n else f"HloModule j{i:04d}\n\n" + text)
            inputs.append(str(path))
        env = dict(os.environ, XLA_FLAGS=f"{NOTRITON_FLAGS} --xla_dump_to={dump}")
        proc = subprocess.run([xla_python, str(ROOT / "bench" / "xla_compile_worker.py"), *inputs],
                              env=env, capture_output=True, text=True, check=False)
        status = {}
        for line in proc.stdout.splitlines():
            word, _, rest = line.partition(" ")
            path, _, msg = rest.partition(": ")
            status[Path(path.strip()).stem] = msg if word == "error" else None
        for i, (key, _) in enumerate(jobs):
            tag = f"j{i:04d}"
            if tag not in status:
                rows[key] = [f"{key}\t-\terror: the XLA worker did not report (exit {proc.returncode}: "
                             f"{proc.stderr.strip().splitlines()[-1:]})"]
                continue
            if status[tag] is not None:
                rows[key] = [f"{key}\t-\terror: {status[tag][:200]}"]
                continue
            thunks = sorted(dump.glob(f"module_*.{tag}.thunk_sequence.txt"))
            shared: dict[str, int] = {}
            for ptx in sorted(dump.glob(f"module_*.{tag}.*ptx")):
                shared.update(ptx_static_shared(ptx.read_text()))
            sequence = thunks[-1].read_text() if thunks else ""
            launches = parse_thunk_sequence(sequence)
            kinds = sorted(set(re.findall(r"\b(k[A-Z]\w+)", sequence)))
            rows[key] = [f"{key}\t{name}\t{_dims(g)}\t{_dims(b)}\t{dyn + shared.get(name, 0)}"
                         for name, g, b, dyn in launches] or [
                f"{key}\t-\tno kernel (thunks: {', '.join(kinds) or 'none'})"]
            print(f"{key}: {len(launches)} kernel(s)", flush=True)
    kept = [line for line in _reference_lines() if line.split("\t", 1)[0] not in rows]
    lines = sorted(kept + [r for rs in rows.values() for r in rs], key=lambda s: s.split("\t", 1)[0])
    header = ("# XLA:GPU's launch dimensions (H100, no Triton), written by "
              "`bench/launch_dims_vs_xla.py regenerate`; do not edit.\n"
              "# module\tkernel\tgrid\tblock\tshared_bytes\n")
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    REFERENCE.write_text(header + "".join(line + "\n" for line in lines))
    print(f"wrote {REFERENCE.relative_to(ROOT)}: {len(lines)} lines")
    return 0


def _reference_lines() -> list[str]:
    if not REFERENCE.exists():
        return []
    return [line for line in REFERENCE.read_text().splitlines() if line and not line.startswith("#")]


# ----------------------------------------------------------------------------- the comparison

def load_reference() -> dict[str, list[tuple[str, Launch | str]]]:
    """module key -> [(kernel, Launch) ...] or [("-", "error ...")] from the committed file."""
    out: dict[str, list] = {}
    for line in _reference_lines():
        fields = line.split("\t")
        if fields[1] == "-":
            out.setdefault(fields[0], []).append(("-", fields[2]))
        else:
            out.setdefault(fields[0], []).append(
                (fields[1], Launch(_triple(fields[2]), _triple(fields[3]), int(fields[4]))))
    return out


def load_differences() -> dict[tuple[str, str], str]:
    """(module key, kernel) -> reason, from the listed-differences file."""
    out = {}
    if DIFFERENCES.exists():
        for line in DIFFERENCES.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                module, kernel, reason = (line.split(None, 2) + ["", ""])[:3]
                out[(module, kernel)] = reason
    return out


def _launch_of(kernel) -> Launch:
    return Launch(tuple(kernel.grid), tuple(kernel.block), int(kernel.shared_memory_bytes))


def _find_instruction(module, name: str):
    """The instruction XLA's thunk `name` launches (thunk names have `.` written as `_`)."""
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.name == name or instr.name.replace(".", "_") == name:
                return instr
    return None


def ours_for_corpus(path: Path):
    """(emitter kind, Launch) of our kernel for an emitter-test file."""
    from hlo_codegen.emitters import emit_kernel, emitter_kind, wrap_computation_in_fusion
    from hlo_codegen.emitters import in_place_argument_ids
    from hlo_common.hlo.parser import parse_module

    module = parse_module(path.read_text(), str(path))
    root = module.entry.root
    fusion = root if root.opcode == "fusion" else wrap_computation_in_fusion(module, module.entry)
    kernel = emit_kernel(fusion, argument_ids=in_place_argument_ids(fusion))
    return emitter_kind(fusion)[0], _launch_of(kernel)


def _module_cache():
    cache: dict[str, object] = {}

    def get(name: str):
        if name not in cache:
            from hlo_common.hlo.parser import parse_module

            path = FUSION_DIR / "xla" / f"{name}.notriton.hlo"
            cache[name] = parse_module(path.read_text(), str(path))
        return cache[name]
    return get


@dataclass
class Comparison:
    module: str
    kernel: str
    status: str  # "same" | "differs" | "error"
    detail: str
    emitter: str = ""
    ours: Launch | None = None
    xla: Launch | None = None


def compare(only: str = "") -> list[Comparison]:
    """One Comparison per (module, XLA kernel) of the reference (one per module where XLA formed
    several kernels for an emitter test, or failed)."""
    from hlo_codegen.emitters import emit_kernel, emitter_kind
    from hlo_codegen.emitters import in_place_argument_ids

    ref = load_reference()
    out: list[Comparison] = []
    fusion_module = _module_cache()
    for key in sorted(ref):
        if only not in key:
            continue
        entries = ref[key]
        if entries[0][0] == "-":
            out.append(Comparison(key, "-", "error", f"XLA: {entries[0][1]}"))
            continue
        group, _, name = key.partition("/")
        if group == "corpus":
            path = CORPUS_DIR / name
            if len(entries) != 1:
                out.append(Comparison(key, "-", "error",
                                      f"XLA forms {len(entries)} kernels for this computation: "
                                      + ", ".join(k for k, _ in entries)))
                continue
            try:
                kind, ours = ours_for_corpus(path)
            except Exception as e:  # noqa: BLE001  (a finding, reported per module)
                out.append(Comparison(key, "-", "error", f"ours: {type(e).__name__}: {_first(e)}"))
                continue
            xla = entries[0][1]
            out.append(Comparison(key, "-", "same" if ours.key() == xla.key() else "differs",
                                  f"ours {ours} | XLA {xla}", kind, ours, xla))
            continue
        for kernel, xla in entries:
            try:
                instr = _find_instruction(fusion_module(name), kernel)
                if instr is None:
                    out.append(Comparison(key, kernel, "error",
                                          "no instruction of that name in XLA's module"))
                    continue
                if instr.opcode != "fusion":  # a lone kernel (XLA's sort): wrapped as hlo-codegen does
                    from hlo_common.passes.fusion_wrapper import wrap_instruction

                    instr = wrap_instruction(instr)
                kind = emitter_kind(instr)[0]
                ours = _launch_of(emit_kernel(instr, argument_ids=in_place_argument_ids(instr)))
            except Exception as e:  # noqa: BLE001
                out.append(Comparison(key, kernel, "error", f"ours: {type(e).__name__}: {_first(e)}"))
                continue
            out.append(Comparison(key, kernel, "same" if ours.key() == xla.key() else "differs",
                                  f"ours {ours} | XLA {xla}", kind, ours, xla))
    return out


def _first(e: BaseException) -> str:
    text = e.one_line() if hasattr(e, "one_line") else str(e)
    return (text.splitlines() or [""])[0][:160]


# Why our launch dimensions differ from XLA's today, by emitter kind (used by --update).
KIND_REASONS = {
    "reduction": "XLA's pipeline forms another kernel for this module than the emitter test's fusion",
    "transpose": "our transpose emitter differs",
    "loop": "our loop emitter's unroll/vector rule or block size differs from XLA's",
    "concatenate": "our concatenate launch differs from XLA's loop config on the largest operand",
    "scatter": "our scatter launch differs from XLA's (one thread per update element, atomics)",
    "in_place_dynamic_update_slice": "our DUS launch differs from XLA's update-sized loop",
}
# Known reasons for single emitter tests (a substring of the module name), checked first.
MODULE_REASONS = (
    ("_s4.hlo", "4-bit elements: we have no sub-byte shared tiles, so the 4-bit transpose goes to the "
                "loop emitter"),
    ("dynamic_update_slice__int4", "4-bit DUS: threads of the update loop would share bytes of the "
                                   "output (odd rows), so the loop emitter writes the whole output"),
    ("loop__dot_fp8", "XLA rewrites this matrix-vector fp8 dot into a multiply + reduce (a reduction "
                      "fusion); we emit the dot elementally in a loop"),
)


# Reduction kernels that differ, by module name: XLA compiles the test's computation itself.
REDUCTION_REASONS = {
    "reduce_column__horizontal_fusion_two_groups": "XLA's pipeline leaves the parameter side output "
    "out of the kernel (one group); the test's fusion has two reduction groups, on blocks z",
    "reduce_column_small__input_layout": "XLA's layout normalization makes this a row reduction "
    "(f32[16,784]) before fusion; the test's fusion is a small-column reduction",
    "reduce_multirow__f32_x8_no_inputs": "XLA's simplifier folds the reduce of a broadcast constant "
    "into a loop kernel",
    "reduce_row__small_s32": "XLA makes this reduction a Triton fusion (one warp per row)",
}


def reason_for(c: Comparison) -> str:
    if c.status == "error":
        return f"not compared: {c.detail}"
    figures = []
    if c.ours is not None and c.xla is not None:
        for what, a, b in zip(("blocks", "threads/block", "shared bytes"), c.ours.key(), c.xla.key()):
            if a != b:
                figures.append(f"{what} {a} (XLA {b})")
    why = KIND_REASONS.get(c.emitter, c.emitter + " emitter differs")
    if c.emitter == "reduction":
        why = next((w for k, w in REDUCTION_REASONS.items() if k in c.module), why)
    why = next((r for part, r in MODULE_REASONS if part in c.module and c.emitter in ("loop", "transpose",
                "in_place_dynamic_update_slice")), why)
    if c.emitter == "loop" and c.xla is not None and c.xla.shared > 0:
        why = ("we have no tiled transpose emitter: the loop emitter writes the transpose "
               "(XLA tiles it in shared memory)")
    elif c.emitter == "loop" and "concatenate" in (c.module + c.kernel):
        why = "our hero rules send this concatenate to the loop emitter (XLA: its concatenate emitter)"
    return f"{why}: {', '.join(figures)}"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["regenerate"]:
        ap = argparse.ArgumentParser(description="rewrite tests/data/launch_dims_xla.tsv with XLA")
        ap.add_argument("--xla-python", default=XLA_PYTHON, help="a Python with jax and its CUDA plugin")
        ap.add_argument("-k", dest="only", default="", help="only modules whose key contains this")
        opts = ap.parse_args(argv[1:])
        return regenerate(opts.xla_python, opts.only)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", dest="only", default="", help="only modules whose key contains this")
    ap.add_argument("--all", action="store_true", help="print matching kernels too")
    ap.add_argument("--update", action="store_true", help="rewrite the listed-differences file")
    opts = ap.parse_args(argv)
    if not REFERENCE.exists():
        print(f"error: {REFERENCE} is missing; run `{sys.argv[0]} regenerate`", file=sys.stderr)
        return 1
    rows = compare(opts.only)
    listed = load_differences()
    for r in rows:
        if r.status != "same" or opts.all:
            mark = "listed" if (r.module, r.kernel) in listed else "NEW" if r.status != "same" else ""
            print(f"{r.status:8} {mark:6} {r.module} {r.kernel} [{r.emitter or '-'}] {r.detail}")
    if opts.update:
        head = [ln for ln in DIFFERENCES.read_text().splitlines() if ln.startswith("#")] \
            if DIFFERENCES.exists() else []
        body = [f"{r.module} {r.kernel} {reason_for(r)}" for r in rows if r.status != "same"]
        DIFFERENCES.write_text("\n".join(head + body) + "\n")
        print(f"wrote {DIFFERENCES.relative_to(ROOT)}: {len(body)} entries")
    counts = {s: sum(r.status == s for r in rows) for s in ("same", "differs", "error")}
    print(f"{len(rows)} kernels: {counts['same']} same as XLA, {counts['differs']} differ, "
          f"{counts['error']} not compared; {len(listed)} listed differences")
    return 0


if __name__ == "__main__":
    sys.exit(main())
