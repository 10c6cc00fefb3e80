#!/usr/bin/env bash
# The walkthrough "a module from a bug report, bisected to one kernel" of docs/bisector.md, run for
# real: every command is printed as `$ ...` followed by its output, so that section is refreshed by
# pasting what this prints.
#
#     bench/bisect_walkthrough.sh            # from the repository root
#     WALKTHROUGH_KEEP=1 bench/bisect_walkthrough.sh   # keep the temp directory (its path on stderr)
#
# Tools: .venv/bin/ when present, else PATH; the code under src/ is put first on PYTHONPATH so the
# checkout's tools run. Modules come from ${HLO_CORPUS_DIR:-../shared/corpus/xla} and are copied
# into a fresh temp directory at run time (never into the repository); every command runs there.
#
# The planted bug is chosen by what the kernels compute, not by their names, so it survives
# changes to fusion and emitters: plant_bound_bug.py takes the first kernel in execution order
# whose fused computation contains an `xor` and that runs more than one thread per block, and
# lowers the bound of the host backend's per-block thread loop by one (`icmp sle i64 %t, N-1`
# becomes `N-2` for N threads per block), so the last thread of every block never runs. It stops
# with a one-line error when no such kernel or not exactly one such bound exists.
# Each command's exit status is checked against the one the walkthrough expects.
set -euo pipefail

REPO=$(pwd)
if [[ ! -d "$REPO/src/hlo_run" ]]; then
    echo "bisect_walkthrough.sh: run it from the repository root (no src/hlo_run under $REPO)" >&2
    exit 2
fi
CORPUS=$(cd "${HLO_CORPUS_DIR:-../shared/corpus/xla}" && pwd)
MODULE=backends_cpu_benchmarks_hlo__jax.issue.33666.linx.frag_0100.module_0009.hlo
MODULE13=backends_cpu_benchmarks_hlo__jax.issue.33666.linx.slow_0100.module_0013.hlo
for f in "$MODULE" "$MODULE13"; do
    [[ -f "$CORPUS/$f" ]] || { echo "bisect_walkthrough.sh: $CORPUS/$f: not found" >&2; exit 2; }
done
if [[ -x "$REPO/.venv/bin/hlo-run" ]]; then
    export PATH="$REPO/.venv/bin:$PATH"
fi
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1  # stdout and stderr interleave as printed

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bisect_walkthrough.XXXXXX")
if [[ "${WALKTHROUGH_KEEP:-}" == 1 ]]; then
    echo "bisect_walkthrough.sh: working in $WORK (kept)" >&2
else
    trap 'rm -rf "$WORK"' EXIT
fi
cd "$WORK"
cp "$CORPUS/$MODULE" jax_33666_module_0009.hlo
cp "$CORPUS/$MODULE13" jax_33666_slow_module_0013.hlo

# show ARG...: the command as one would type it (an argument with spaces or quotes in double quotes)
show() {
    local out="\$" a
    for a in "$@"; do
        if [[ $a =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then
            out+=" $a"
        else
            a=${a//\\/\\\\}; a=${a//\"/\\\"}; a=${a//\$/\\\$}; a=${a//\`/\\\`}
            out+=" \"$a\""
        fi
    done
    echo "$out"
}

# run EXPECTED_STATUS COMMAND...: print `$ COMMAND`, then its output; stop when the status differs.
run() {
    local want=$1 rc=0
    shift
    show "$@"
    "$@" 2>&1 || rc=$?
    if [[ $rc != "$want" ]]; then
        echo "bisect_walkthrough.sh: \`$*\` exited $rc, expected $want" >&2
        exit 1
    fi
}

cat > plant_bound_bug.py <<'EOF'
"""Plant a launch-bound bug in a host manifest: the first kernel (in execution order) that
computes an xor and runs more than one thread per block stops one thread early in every block."""
import dataclasses, math, re, sys
from hlo_common.manifest.manifest import load_manifest
from hlo_common.manifest.thunks import KernelThunk, thunk_labels
from hlo_common.hlo.parser import parse_module

src, dst = sys.argv[1], sys.argv[2]
m = load_manifest(open(src, "rb").read(), src)
instrs = {i.name: i for c in parse_module(m.hlo, src).computations for i in c.instructions}

def computes_xor(instr):
    todo = list(instr.called_computations())
    while todo:
        for i in todo.pop().instructions:
            if i.opcode == "xor":
                return True
            todo += i.called_computations()
    return False

for thunk, label in thunk_labels(m.thunks):
    if (isinstance(thunk, KernelThunk) and math.prod(thunk.block) > 1
            and computes_xor(instrs[thunk.profile_annotation])):
        break
else:
    sys.exit(f"{src}: no kernel computes an xor with more than one thread per block")
kernel, threads = m.kernels[thunk.kernel], math.prod(thunk.block)
# the host backend runs a block's threads as a loop `for t in 0..threads-1`; its latch compares
# the next t with threads-1
bound = re.compile(rf"(icmp sle i64 %[\w.]+, ){threads - 1}\b")
lines = [ln.strip() for ln in kernel.llvm_ir.splitlines() if bound.search(ln)]
if len(lines) != 1:
    sys.exit(f"{src}: kernel {kernel.name}: {len(lines)} thread-loop bound(s) `icmp sle i64 %t, "
             f"{threads - 1}` in its LLVM IR, expected one")
new = rf"\g<1>{threads - 2}"
ir = bound.sub(new, kernel.llvm_ir)
m.kernels[kernel.name] = dataclasses.replace(kernel, llvm_ir=ir)
open(dst, "wb").write(m.to_bytes())  # to_bytes writes a fresh checksum
print(f"thunk {label} (kernel {kernel.name}, {math.prod(thunk.grid)} block(s) of {threads} "
      f"threads): `{lines[0]}` -> `{bound.sub(new, lines[0])}`")
EOF

echo "# The module as the report runs it, with run_hlo_module's flags"
run 0 hlo-run --platform=cpu --reference_platform=default --abs_error_bound=1e-3 --rel_error_bound=1e-3 \
    --xla_dump_to=dumps jax_33666_module_0009.hlo
echo
echo "# Compiling the optimized module hlo-run dumped, planting the bug, running the broken manifest"
run 0 hlo-codegen --target host dumps/module_0000.jit__normal.after_optimizations.txt -o normal.json
run 0 python plant_bound_bug.py normal.json normal_bad.json
run 1 hlo-run --platform=cpu --reference_platform=default normal_bad.json
echo
echo "# Bisecting"
run 1 hlo-run --platform=cpu --find-first-mismatch --xla_dump_to=dumps --mismatch-dir=bisect normal_bad.json
shopt -s nullglob
standalone=(bisect/*.hlo)
if [[ ${#standalone[@]} != 1 ]]; then
    echo "bisect_walkthrough.sh: expected one standalone module in bisect/, found ${#standalone[@]}" >&2
    exit 1
fi
echo
echo "# The operands the bisector saved, at the last element of each 128-thread block ([7, 15], [15, 15])"
run 0 python -c "import numpy as np; d = np.load('${standalone[0]%.hlo}.inputs.npz'); \
print({k: d[k][[7, 15], 15].tolist() for k in d.files if d[k].shape == (16, 16)})"
echo
echo "# The standalone module and its run"
run 0 cat "${standalone[0]}"
run 0 hlo-run "${standalone[0]}" --platform host --inputs "${standalone[0]%.hlo}.inputs.npz" --no-hlo-passes
echo
echo "# Constants printed as {...}"
run 1 hlo-run --platform=cpu jax_33666_slow_module_0013.hlo
run 1 hlo-run --platform=cpu --find-first-mismatch --mismatch-dir=bisect13 jax_33666_slow_module_0013.hlo
