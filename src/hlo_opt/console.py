"""The `hlo-opt` console script (pyproject's [project.scripts]): sets up the process, then runs
`hlo_opt.cli.main`.

numpy loads OpenBLAS, which starts a thread per CPU that spins for about 0.1 s of CPU before it
sleeps: on a 2-core machine, with `hlo-opt | hlo-codegen` starting together, those threads took
the cores the two tools' start-up needed (hlo-opt on a two-instruction module: 0.25 -> 0.15 s of
CPU with one thread). The compilers do no BLAS work that threads would speed up (constant folding
of small dots), so their processes ask OpenBLAS for one thread unless the user's environment
says otherwise; hlo-run, whose host GEMMs run through BLAS on every core, keeps OpenBLAS's
default. (A result that depended on OpenBLAS's thread count would already differ between machines
with other CPU counts; hlo-opt's output on the compile bench's modules is unchanged.)
"""

from __future__ import annotations

import os


def main() -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported
    from hlo_opt.cli import main as cli_main

    cli_main()
