"""Run every `bench/bench_*.py` and `bench/fusion_vs_xla.py` in turn (what `make bench` does) and
print their tables.

    .venv/bin/python bench/run_all.py [-k SUBSTRING]

Each benchmark runs as its own process with this interpreter, so one that crashes does not stop
the others; the exit status is 1 when any of them failed. Benchmarks print figures and never
assert on times.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXTRA = ("fusion_vs_xla.py",)  # benchmarks not named bench_*.py


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", dest="only", default="", help="run only benchmarks whose file name contains this")
    opts = ap.parse_args()
    scripts = sorted([*HERE.glob("bench_*.py"), *(HERE / name for name in EXTRA)])
    scripts = [p for p in scripts if opts.only in p.name]
    failed = []
    for script in scripts:
        print(f"=== {script.name}", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(script)], cwd=HERE.parent)
        print(f"=== {script.name}: {'ok' if code == 0 else f'FAILED (exit {code})'} "
              f"in {time.perf_counter() - start:.1f}s\n", flush=True)
        if code != 0:
            failed.append(script.name)
    if failed:
        print(f"{len(failed)} of {len(scripts)} benchmarks failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
