"""Regenerate the real-library tier's modules: `testdata/models/<name>.hlo`.

The input of `tests/models/test_models.py` (issue 21 item 3): models as people write them with
flax (linen and nnx), equinox, haiku and optax, lowered by jax to pre-optimization HLO text
exactly as `jax.jit(f).lower(*args).as_text(dialect="hlo")` prints it, layout hints included (a
`jax.vmap` over an `eqx.nn.Linear` gives a dot whose transpose jax marks column-major: the case
the corpus seldom has). Weights, optimizer state and data are entry parameters, so hlo-run makes
them from --seed and the files stay small; shapes are small so the tier runs in about a minute.
The libraries are the `models` extra of pyproject.toml, pinned to versions that run with the
pinned jax; the output is the same on every run with those versions.

    .venv/bin/python testdata/models/make_modules.py             # write every module
    .venv/bin/python testdata/models/make_modules.py -k eqx      # only names containing `eqx`
    .venv/bin/python testdata/models/make_modules.py --check     # exit 1 if a file differs
    .venv/bin/python testdata/models/make_modules.py --list

The modules are checked in rather than made at test time: the tier then needs only jax (the
`test` extra), a failure reproduces from the file with `hlo-run --platform host m.hlo --seed 0`,
and a library upgrade shows up as a diff of the lowered programs; `tests/models/test_models.py`
runs `--check` to keep them what this script makes.

The models are in `models_flax.py`, `models_equinox_haiku.py` and `models_optax.py` beside this
file (one builder per module, named as its file; conventions in `models_common.py`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def builders() -> dict:
    """module name -> builder, in the files' order (imports the libraries)."""
    import models_equinox_haiku
    import models_flax
    import models_optax

    return {b.__name__: b for m in (models_flax, models_equinox_haiku, models_optax) for b in m.BUILDERS}


def lower(name: str) -> str:
    """The pre-optimization HLO text of one module, as jax prints it."""
    import jax

    fn, args = builders()[name]()
    text = jax.jit(fn).lower(*args).as_text(dialect="hlo")
    return text if text.endswith("\n") else text + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", dest="only", default="", help="only modules whose name contains this")
    ap.add_argument("--list", action="store_true", help="print the module names and exit")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is not what "
                    "the generator makes")
    opts = ap.parse_args(argv)
    names = [n for n in builders() if opts.only in n]
    if opts.list:
        print("\n".join(names))
        return 0
    stale = []
    for name in names:
        path = HERE / f"{name}.hlo"
        text = lower(name)
        if opts.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
            continue
        path.write_text(text)
        print(f"wrote {path.relative_to(HERE)}", flush=True)
    if stale:
        print(f"not what make_modules.py makes: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
