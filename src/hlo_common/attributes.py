"""Typed HLO attribute values and the table of how each attribute is parsed and printed.

`ATTR_KINDS` maps an attribute's text name to its kind; the parser reads a value of that kind and
the printer writes it back canonically (XLA's spelling, defaults omitted where XLA omits them).
Attributes not in the table are kept as `RawAttr` text and printed as they came.

    >>> str(Window.parse("size=3x3 stride=2x2 pad=1_1x1_1"))
    '{size=3x3 stride=2x2 pad=1_1x1_1}'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RawAttr:
    """An attribute this project keeps as text (e.g. `replica_groups=[2,2]<=[4]`)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class WindowDim:
    size: int
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    window_dilation: int = 1  # rhs_dilate
    base_dilation: int = 1  # lhs_dilate
    window_reversal: bool = False


@dataclass(frozen=True)
class Window:
    dims: tuple[WindowDim, ...]

    @staticmethod
    def parse(text: str) -> Window:
        fields: dict[str, list[str]] = {}
        for part in text.split():
            key, _, val = part.partition("=")
            if key not in ("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
                raise ValueError(f"unknown window field '{key}'")
            fields[key] = val.split("x") if val else []
        rank = len(fields.get("size", []))
        for key, vals in fields.items():
            if len(vals) != rank:
                raise ValueError(f"window field '{key}' has {len(vals)} entries, size has {rank}")

        def ints(key, default):
            return [int(v) for v in fields[key]] if key in fields else [default] * rank

        size, stride = ints("size", 1), ints("stride", 1)
        lhs, rhs, rev = ints("lhs_dilate", 1), ints("rhs_dilate", 1), ints("rhs_reversal", 0)
        pads = []
        for p in fields.get("pad", ["0_0"] * rank):
            lo, _, hi = p.partition("_")
            pads.append((int(lo), int(hi)))
        dims = tuple(
            WindowDim(size[i], stride[i], pads[i][0], pads[i][1], rhs[i], lhs[i], bool(rev[i]))
            for i in range(rank)
        )
        return Window(dims)

    def __str__(self) -> str:
        if not self.dims:
            return "{}"
        d = self.dims
        parts = ["size=" + "x".join(str(w.size) for w in d)]
        if any(w.stride != 1 for w in d):
            parts.append("stride=" + "x".join(str(w.stride) for w in d))
        if any(w.padding_low or w.padding_high for w in d):
            parts.append("pad=" + "x".join(f"{w.padding_low}_{w.padding_high}" for w in d))
        if any(w.base_dilation != 1 for w in d):
            parts.append("lhs_dilate=" + "x".join(str(w.base_dilation) for w in d))
        if any(w.window_dilation != 1 for w in d):
            parts.append("rhs_dilate=" + "x".join(str(w.window_dilation) for w in d))
        if any(w.window_reversal for w in d):
            parts.append("rhs_reversal=" + "x".join(str(int(w.window_reversal)) for w in d))
        return "{" + " ".join(parts) + "}"


@dataclass(frozen=True)
class ConvDimensionNumbers:
    """`b01f_01io->b01f`: batch/feature/spatial positions of input, kernel and output."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]
    text: str

    @staticmethod
    def parse(text: str) -> ConvDimensionNumbers:
        lhs, arrow, out = text.partition("->")
        inp, us, ker = lhs.partition("_")
        if not arrow or not us:
            raise ValueError(f"malformed dim_labels '{text}'")
        nsp = len(inp) - 2
        if len(ker) != nsp + 2 or len(out) != nsp + 2 or nsp < 0:
            raise ValueError(f"dim_labels '{text}' has inconsistent ranks")

        def spatial(s):
            pos = {}
            for i, c in enumerate(s):
                if c.isdigit():
                    pos[int(c)] = i
                elif c.isalpha() and c not in "bfio":
                    # XLA allows letters beyond 9 spatial dims; keep digits only here.
                    raise ValueError(f"unsupported dim label '{c}' in '{text}'")
            if sorted(pos) != list(range(nsp)):
                raise ValueError(f"dim_labels '{text}' must name spatial dims 0..{nsp - 1}")
            return tuple(pos[k] for k in range(nsp))

        for part, letters in ((inp, "bf"), (ker, "io"), (out, "bf")):
            for ch in letters:
                if part.count(ch) != 1:
                    raise ValueError(f"dim_labels '{text}': '{part}' needs exactly one '{ch}'")
        return ConvDimensionNumbers(
            inp.index("b"), inp.index("f"), spatial(inp), ker.index("i"), ker.index("o"), spatial(ker),
            out.index("b"), out.index("f"), spatial(out), text,
        )

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class SliceSpec:
    """`slice={[0:2], [1:8:2]}` as (start, limit, stride) per dimension."""

    dims: tuple[tuple[int, int, int], ...]

    def __str__(self) -> str:
        parts = []
        for s, l, st in self.dims:
            parts.append(f"[{s}:{l}]" if st == 1 else f"[{s}:{l}:{st}]")
        return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class PaddingConfig:
    """`padding=0_0x1_2_1` as (low, high, interior) per dimension."""

    dims: tuple[tuple[int, int, int], ...]

    @staticmethod
    def parse(text: str) -> PaddingConfig:
        dims = []
        for part in text.split("x"):
            vals = [int(v) for v in _split_signed(part)]
            if len(vals) == 2:
                vals.append(0)
            if len(vals) != 3:
                raise ValueError(f"malformed padding '{text}'")
            dims.append(tuple(vals))
        return PaddingConfig(tuple(dims))

    def __str__(self) -> str:
        return "x".join(f"{lo}_{hi}" + (f"_{it}" if it else "") for lo, hi, it in self.dims)


def _split_signed(part: str) -> list[str]:
    # "-1_2_0" -> ["-1", "2", "0"]; negative numbers keep their sign.
    return [p for p in part.split("_")]


# Kind of every attribute the parser types. Order = canonical print order of opcode-specific
# attributes (roughly XLA's); computation attributes and the common ones come after these.
ATTR_KINDS: dict[str, str] = {
    "kind": "word",
    "iota_dimension": "int",
    "index": "int",
    "slice": "slice",
    "dynamic_slice_sizes": "ints",
    "padding": "padding",
    "window": "window",
    "dim_labels": "dim_labels",
    "lhs_batch_dims": "ints",
    "lhs_contracting_dims": "ints",
    "rhs_batch_dims": "ints",
    "rhs_contracting_dims": "ints",
    "lhs_ragged_dims": "ints",
    "rhs_group_dims": "ints",
    "feature_group_count": "int",
    "batch_group_count": "int",
    "dimensions": "ints",
    "direction": "word",
    "type": "word",
    "offset_dims": "ints",
    "collapsed_slice_dims": "ints",
    "start_index_map": "ints",
    "operand_batching_dims": "ints",
    "start_indices_batching_dims": "ints",
    "update_window_dims": "ints",
    "inserted_window_dims": "ints",
    "scatter_dims_to_operand_dims": "ints",
    "input_batching_dims": "ints",
    "scatter_indices_batching_dims": "ints",
    "index_vector_dim": "int",
    "slice_sizes": "ints",
    "indices_are_sorted": "bool",
    "unique_indices": "bool",
    "is_stable": "bool",
    "k": "int",
    "largest": "bool",
    "exponent_bits": "int",
    "mantissa_bits": "int",
    "distribution": "word",
    "algorithm": "word",
    "fft_type": "word",
    "fft_length": "ints",
    "epsilon": "float",
    "feature_index": "int",
    "left_side": "bool",
    "lower": "bool",
    "unit_diagonal": "bool",
    "transpose_a": "word",
    "delta": "int",
    "channel_id": "int",
    "custom_call_target": "string",
    "custom_call_has_side_effect": "bool",
    "api_version": "word",
    "operand_layout_constraints": "shapes",
    "is_host_transfer": "bool",
    "use_global_device_ids": "bool",
    "constrain_layout": "bool",
    "is_composite": "bool",
    "infeed_config": "string",
    "outfeed_config": "string",
}

# Attributes whose value names called computations.
COMPUTATION_ATTR_KINDS = {
    "calls": "comp_or_comps",
    "to_apply": "comp",
    "condition": "comp",
    "body": "comp",
    "select": "comp",
    "scatter": "comp",
    "true_computation": "comp",
    "false_computation": "comp",
    "branch_computations": "comps",
    "called_computations": "comps",
}

# Common attributes printed after opcode-specific ones, in this order.
COMMON_ATTR_ORDER = (
    "sharding", "frontend_attributes", "origin", "statistics", "control-predecessors",
    "metadata", "backend_config",
)

_ORDER = {name: i for i, name in enumerate(ATTR_KINDS)}


def attr_sort_key(name: str) -> tuple[int, int, str]:
    """Canonical order: typed attributes in table order, then others alphabetically."""
    if name in _ORDER:
        return (0, _ORDER[name], name)
    return (1, 0, name)


def quote_string(s: str) -> str:
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{out}"'


def format_attr_value(kind: str, value) -> str:
    if kind == "ints":
        return "{" + ",".join(str(v) for v in value) + "}"
    if kind == "int":
        return str(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        return format_float_attr(value)
    if kind == "string":
        return quote_string(value)
    if kind == "shapes":
        return "{" + ", ".join(str(s) for s in value) + "}"
    return str(value)


def format_float_attr(v: float) -> str:
    text = repr(float(v))
    if text.endswith(".0"):
        text = text[:-2]
    return text
