"""Synthetic transformer stacks for hlo-opt's speed benchmark: N pre-LayerNorm layers in one module.

    .venv/bin/python bench/make_transformer_stack.py --layers 8 > stack.hlo
    .venv/bin/python bench/make_transformer_stack.py --instructions 10000 -o stack10k.hlo

Each layer is `testdata/transformer_layer.hlo` (jax's pre-optimization HLO of one layer:
LayerNorm, multi-head attention with softmax, LayerNorm, a GELU MLP; batch 2, sequence 256,
d_model 512, 8 heads), stamped N times into one entry computation: layer i reads layer i-1's
result, has its own ten weight parameters and its own reducer computations, and its names carry
the suffix `_l<i>`. 161 instructions per layer, so 2.5k, 5k, 10k and 20k instructions are 16,
31, 62 and 124 layers.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent.parent / "testdata" / "transformer_layer.hlo"
_DEF = re.compile(r"^\s*(?:ROOT\s+)?([\w.\-]+)\s*=")
_COMP = re.compile(r"^(ENTRY\s+)?([\w.\-]+)\s*\{\s*$")
_TOKEN = re.compile(r"[A-Za-z_][\w.\-]*")
_PARAM = re.compile(r"parameter\((\d+)\)")


def _blocks(text: str) -> tuple[list[tuple[str, list[str]]], tuple[str, list[str]]]:
    """(regions, entry): each a (computation name, body lines) pair, from the template's text."""
    regions, entry, current, lines = [], None, None, []
    for line in text.splitlines():
        m = _COMP.match(line)
        if m:
            current, lines = (m.group(2), bool(m.group(1))), []
        elif line.strip() == "}" and current is not None:
            if current[1]:
                entry = (current[0], lines)
            else:
                regions.append((current[0], lines))
            current = None
        elif current is not None and line.strip():
            lines.append(line)
    if entry is None:
        raise ValueError("the template has no ENTRY computation")
    return regions, entry


def _renamer(names: set[str], suffix: str, extra: dict[str, str]):
    def rename(line: str) -> str:
        def one(m: re.Match) -> str:
            tok = m.group(0)
            if tok in extra:
                return extra[tok]
            return tok + suffix if tok in names else tok
        return _TOKEN.sub(one, line)
    return rename


def layers_for(instructions: int, per_layer: int) -> int:
    return max(1, round(instructions / per_layer))


def transformer_stack(layers: int, template: str | None = None) -> str:
    """HLO text of `layers` chained copies of the template layer."""
    regions, (_, entry_lines) = _blocks(template if template is not None else TEMPLATE.read_text())
    names = {m.group(1) for _, body in regions for line in body if (m := _DEF.match(line))}
    names |= {m.group(1) for line in entry_lines if (m := _DEF.match(line))}
    names |= {name for name, _ in regions}
    params = [(m.group(1), int(_PARAM.search(line).group(1))) for line in entry_lines
              if "parameter(" in line and (m := _DEF.match(line))]
    activation = next(name for name, number in params if number == 0)
    weights = sorted(number for _, number in params if number != 0)
    root = next(_DEF.match(line).group(1) for line in entry_lines if line.strip().startswith("ROOT"))
    out_regions, out_entry, previous = [], [], None
    for i in range(layers):
        suffix = f"_l{i}"
        extra = {activation: previous} if previous is not None else {}
        rename = _renamer(names, suffix, extra)
        for name, body in regions:
            out_regions.append(f"{name}{suffix} {{\n" + "\n".join(rename(line) for line in body) + "\n}\n")
        for line in entry_lines:
            m = _DEF.match(line)
            if m and m.group(1) == activation and previous is not None:
                continue  # layer i reads layer i-1's result instead of a parameter
            if "parameter(" in line and m and m.group(1) != activation:
                k = weights.index(int(_PARAM.search(line).group(1)))
                line = _PARAM.sub(f"parameter({1 + i * len(weights) + k})", line)
            if line.strip().startswith("ROOT") and i != layers - 1:
                line = line.replace("ROOT ", "", 1)
            out_entry.append(rename(line))
        previous = root + suffix
    return (f"HloModule transformer_stack_{layers}\n\n" + "\n".join(out_regions) + "\nENTRY main {\n"
            + "\n".join(out_entry) + "\n}\n")


def instructions_per_layer(template: str | None = None) -> int:
    regions, (_, entry_lines) = _blocks(template if template is not None else TEMPLATE.read_text())
    return sum(len(body) for _, body in regions) + len(entry_lines) - 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--layers", type=int)
    group.add_argument("--instructions", type=int, help="about this many instructions")
    ap.add_argument("-o", "--output", type=Path)
    opts = ap.parse_args()
    layers = opts.layers or layers_for(opts.instructions, instructions_per_layer())
    text = transformer_stack(layers)
    if opts.output:
        opts.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
