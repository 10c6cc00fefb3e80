"""run_hlo_module's flag spellings, translated into hlo-run's own before click parses them.

Where it sits: the first thing `hlo-run` does with its argument list (`cli.XlaFlagsCommand`), so a
command line pasted from an XLA bug report works as it is:

    run_hlo_module --platform=CUDA --reference_platform=default --abs_error_bound=0.1 m.hlo
    hlo-run        --platform=CUDA --reference_platform=default --abs_error_bound=0.1 m.hlo

Each XLA flag (xla/tools/run_hlo_module_main.cc) takes `--flag=value` or `--flag value`; a boolean
also takes `--flag` alone (true) or `--flag=true|false|1|0` (also `--flag true`). The translation:

    --platform=CUDA|gpu|Host|cpu|Interpreter   --platform cuda|host|interpreter (any case)
    --reference_platform=                      --reference-platform none (empty: no reference)
    --reference_platform=default|interpreter   --reference-platform interpreter
    --reference_platform=cpu|host              --reference-platform xla-cpu (XLA's CPU compiler)
    --abs_error_bound / --rel_error_bound      --abs-error-bound / --rel-error-bound
    --print_literals[=bool]                    --print-literals when true
    --iterations=N                             the same flag (click reads both forms)
    --input_module=PATH                        the INPUT argument
    --input_format=hlo|pb|pbtxt|snapshot|stablehlo|mhlo  --input-format (the same names)
    --run_test_hlo_passes[=bool]               --hlo-passes / --no-hlo-passes
    --run_reference_hlo_passes[=bool]          accepted; the reference runs the input as given
    --use_large_float_range[=bool]             --large-float-range when true
    --xla_dump_to=DIR                          --dump-to DIR
    --num_replicas=N / --num_partitions=N      --num-replicas N / --num-partitions N
    any other --xla_* debug option             ignored, with a warning naming it

Kebab-case flags pass through untouched, so both spellings mix on one line.
"""

from __future__ import annotations

import sys

from hlo_common.errors import HloError

PLATFORM_NAMES = {"cuda": "cuda", "gpu": "cuda", "host": "host", "cpu": "host",
                  "interpreter": "interpreter"}
REFERENCE_NAMES = {"": "none", "none": "none", "default": "interpreter", "interpreter": "interpreter",
                   "cpu": "xla-cpu", "host": "xla-cpu", "xla-cpu": "xla-cpu", "cuda": "cuda", "gpu": "cuda"}
_TRUE = {"true": True, "1": True, "false": False, "0": False}

# XLA flag -> (kind, our flag). kind: "value" copies the value, "bool" maps true/false.
_VALUE_FLAGS = {
    "abs_error_bound": "--abs-error-bound",
    "rel_error_bound": "--rel-error-bound",
    "xla_dump_to": "--dump-to",
    "num_replicas": "--num-replicas",
    "num_partitions": "--num-partitions",
}
_BOOL_FLAGS = {
    "print_literals": ("--print-literals", None),
    "run_test_hlo_passes": ("--hlo-passes", "--no-hlo-passes"),
    "run_reference_hlo_passes": (None, None),
    "use_large_float_range": ("--large-float-range", None),
}


class XlaFlagError(HloError):
    """An XLA flag value hlo-run cannot honour (e.g. --input_format=pb): a user error, exit 1."""


def _split(arg: str) -> tuple[str, str | None]:
    name, eq, value = arg[2:].partition("=")
    return name, (value if eq else None)


def _bool(name: str, value: str) -> bool:
    try:
        return _TRUE[value.strip().lower()]
    except KeyError:
        raise XlaFlagError(f"--{name}={value}: expected true, false, 1 or 0") from None


def translate(argv: list[str], warn=None) -> list[str]:
    """`argv` with run_hlo_module's flags rewritten as hlo-run's (see the module docstring)."""
    warn = warn or (lambda text: print(f"hlo-run: warning: {text}", file=sys.stderr))
    out: list[str] = []
    args = _Args(argv)
    while args.k < len(argv):
        arg = argv[args.k]
        args.k += 1
        if arg == "--":
            out.extend(argv[args.k - 1:])
            break
        if not arg.startswith("--"):
            out.append(arg)
            continue
        name, value = _split(arg)
        if "_" not in name and name not in ("platform", "reference-platform"):
            out.append(arg)
            continue
        out += _translate_flag(arg, name, value, args, warn)
    return out


class _Args:
    """The argument list and the position of the next one, for flags that take theirs."""

    def __init__(self, argv: list[str]):
        self.argv, self.k = argv, 0

    def value(self, name: str, value: str | None) -> str:
        """The flag's value: after `=`, else the next argument."""
        if value is not None:
            return value
        if self.k >= len(self.argv):
            raise XlaFlagError(f"--{name} needs a value")
        self.k += 1
        return self.argv[self.k - 1]

    def boolean(self, name: str, value: str | None) -> bool:
        """The flag's truth: after `=`, else the next argument when it is one, else true."""
        if value is not None:
            return _bool(name, value)
        if self.k < len(self.argv) and self.argv[self.k].strip().lower() in _TRUE:
            self.k += 1
            return _TRUE[self.argv[self.k - 1].strip().lower()]
        return True


def _translate_flag(arg: str, name: str, value: str | None, args: _Args, warn) -> list[str]:
    """hlo-run's arguments for one run_hlo_module flag `arg` (its value taken from `args`)."""
    if name == "platform":
        return ["--platform", _platform(args.value(name, value), PLATFORM_NAMES)]
    if name in ("reference_platform", "reference-platform"):
        return ["--reference-platform", _platform(args.value(name, value), REFERENCE_NAMES)]
    if name == "input_module":
        return [args.value(name, value)]
    if name == "input_format":
        fmt = args.value(name, value).strip().lower()
        if fmt not in ("hlo", "pb", "pbtxt", "snapshot", "stablehlo", "mhlo"):
            raise XlaFlagError(f"--input_format={fmt}: expected hlo, pb, pbtxt, snapshot, stablehlo or mhlo")
        return ["--input-format", fmt]
    if name in _VALUE_FLAGS:
        return [_VALUE_FLAGS[name], args.value(name, value)]
    if name in _BOOL_FLAGS:
        on, off = _BOOL_FLAGS[name]
        flag = on if args.boolean(name, value) else off
        return [] if flag is None else [flag]
    if name.startswith("xla_"):
        warn(f"ignoring XLA debug option --{name} (hlo-run does not read it)")
        return []
    return [arg]  # click names it as an unknown option


def _platform(value: str, names: dict[str, str]) -> str:
    """Our platform name for `value`; an unknown name is passed on for click's usage error."""
    return names.get(value.strip().lower(), value)
