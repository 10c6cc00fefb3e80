"""The `hlo-codegen` console script (pyproject's [project.scripts]): sets up the process, then
runs `hlo_codegen.cli.main`. OpenBLAS is asked for one thread unless the user's environment says
otherwise, as for hlo-opt (`hlo_opt.console` says why: its spinning threads cost 0.1 s of CPU at
start-up); the Triton child inherits it.
"""

from __future__ import annotations

import os


def main() -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported
    from hlo_codegen.cli import main as cli_main

    cli_main()
