"""Hostile HLO text on all three tools (issue 22 item 10): truncations, token and semantic
mutations, bytes that are not text, sizes and depths past the limits. Each case: exit 1, one line
naming FILE:LINE:COL (or the file), no traceback, no file written (`-o` given, never created)."""

from __future__ import annotations

import pytest

from hostile_lib import GOOD, TOOLS, assert_refused, folder_state, invoke

# cuts inside GOOD (byte offsets), each giving a located parse error
CUTS = (16, 49, 93, 126, 203, 269, 302, 368, 423, 456)

# (id, a change of GOOD: (old, new), the error's place and words as a regex)
MUTATIONS = [
    ("unknown-opcode", ("add(m, b)", "addd(m, b)"), r"m\.hlo:17:22: unknown opcode 'addd'"),
    ("attribute-typo", ("direction=LT", "direction=LT, typ=TOTALORDER"),
     r"m\.hlo:12:47: unexpected attribute 'typ'.*did you mean 'type'"),
    ("missing-required", (", dimensions={0}, to_apply", ", to_apply"),
     r"m\.hlo:15:\d+: attribute 'dimensions' is expected but not seen"),
    ("negative-dim", ("q = f32[4]{0}", "q = f32[-4]{0}"), r"m\.hlo:11:\d+: "),
    ("huge-shape", ("q = f32[4]{0}", "q = f32[4294967296,4294967296,16]"), r"m\.hlo:11:\d+: .*2\^63|bytes"),
    ("int64-overflow", ("q = f32[4]{0}", "q = f32[99999999999999999999]"), r"m\.hlo:11:\d+: "),
    ("unknown-type", ("q = f32[4]{0}", "q = f33[4]{0}"), r"m\.hlo:11:\d+: "),
    ("undefined-operand", ("select(c, p, q)", "select(c, p, nope)"), r"m\.hlo:13:\d+: .*nope"),
    ("duplicate-name", ("  z = f32[] constant(0)", "  m = f32[] constant(0)"), r"m\.hlo:14:3: .*'m'.*twice"),
    ("operand-count", ("add(m, b)", "add(m)"), r"m\.hlo:17:\d+: 'add' expects 2 operands"),
    ("shape-mismatch", ("ROOT o = f32[4]{0} add(m, b)", "ROOT o = f32[5]{0} add(m, b)"), r"m\.hlo:17:\d+: "),
    ("constant-range", ("z = f32[] constant(0)", "z = s8[] constant(300)"), r"m\.hlo:14:\d+: .*300"),
    ("parameter-number", ("q = f32[4]{0} parameter(1)", "q = f32[4]{0} parameter(-1)"), r"m\.hlo:11:\d+: "),
    ("unbalanced-brace", ("ROOT s = f32[] add(x, y)\n}", "ROOT s = f32[] add(x, y)\n"), r"m\.hlo:\d+:\d+: "),
    ("two-entries", ("add_f {", "ENTRY add_f {"), r"m\.hlo:\d+:\d+: "),
    ("bad-layout", ("p = f32[4]{0}", "p = f32[4]{7}"), r"m\.hlo:10:\d+: "),
    ("undefined-computation", ("to_apply=add_f", "to_apply=add_g"), r"m\.hlo:15:\d+: .*add_g"),
    ("bad-direction", ("direction=LT", "direction=LESS"), r"m\.hlo:12:\d+: "),
    ("self-call", ("ROOT s = f32[] add(x, y)", "ROOT s = f32[] call(x, y), to_apply=add_f"),
     r"m\.hlo:6:\d+: "),
    ("dynamic-shape", ("q = f32[4]{0} parameter(1)", "q = f32[?]{0} parameter(1)"), r"m\.hlo:\d+:\d+: "),
]


@pytest.fixture
def folder(tmp_path):
    return tmp_path


def _refused_without_output(tool, text: bytes, place: str, folder, capsys, monkeypatch, name="m.hlo"):
    path = folder / name
    path.write_bytes(text)
    before = folder_state(folder)
    out_flag = "--output" if tool == "hlo-run" else "-o"
    extra = [] if tool == "hlo-run" else [out_flag, str(folder / "out")]
    result = invoke(tool, [str(path), *extra], capsys, monkeypatch)
    assert_refused(result, tool, place)
    assert folder_state(folder) == before  # nothing written, nothing left behind


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("cut", CUTS)
def test_truncated_text(tool, cut, folder, capsys, monkeypatch):
    _refused_without_output(tool, GOOD[:cut].encode(), r"m\.hlo:\d+:\d+: ", folder, capsys, monkeypatch)


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("mid, change, place", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_mutated_text(tool, mid, change, place, folder, capsys, monkeypatch):
    old, new = change
    assert old in GOOD
    _refused_without_output(tool, GOOD.replace(old, new, 1).encode(), place, folder, capsys, monkeypatch)


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("data, place", [
    (b"", r"m\.hlo: empty input"),
    (b"\xef\xbb\xbf  \n", r"m\.hlo: empty input"),
    (GOOD.encode()[:100] + b"\0" + GOOD.encode()[100:], r"m\.hlo:\d+:\d+: binary input"),
    (GOOD.replace("add_f", "add_\xe9", 1).encode("latin-1"), r"m\.hlo:3:5: not UTF-8"),
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)), r"m\.hlo:\d+:\d+: (binary input|not UTF-8)"),
], ids=["empty", "bom-only", "nul", "latin1", "png"])
def test_bytes_that_are_not_hlo_text(tool, data, place, folder, capsys, monkeypatch):
    _refused_without_output(tool, data, place, folder, capsys, monkeypatch)


@pytest.mark.parametrize("tool", TOOLS)
def test_calls_nested_past_the_limit(tool, folder, capsys, monkeypatch):
    depth = 300
    comps = ["c0 {\n  p = f32[] parameter(0)\n  ROOT r = f32[] negate(p)\n}\n"]
    for k in range(1, depth):
        comps.append(f"c{k} {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=c{k - 1}\n}}\n")
    comps.append("ENTRY e {\n  p = f32[] parameter(0)\n"
                 f"  ROOT r = f32[] call(p), to_apply=c{depth - 1}\n}}\n")
    text = "HloModule deep\n\n" + "\n".join(comps)
    _refused_without_output(tool, text.encode(), r"m\.hlo:\d+:\d+: computations nest more than 128 deep",
                            folder, capsys, monkeypatch)


@pytest.mark.parametrize("tool", TOOLS)
def test_expressions_nested_past_the_limit(tool, folder, capsys, monkeypatch):
    expr = "p"
    for _ in range(3000):
        expr = f"f32[] negate({expr})"
    text = f"HloModule deep\nENTRY e {{\n  p = f32[] parameter(0)\n  ROOT r = {expr}\n}}\n"
    _refused_without_output(tool, text.encode(), r"m\.hlo:\d+:\d+: .*nested too deeply", folder, capsys,
                            monkeypatch)


@pytest.mark.parametrize("tool", TOOLS)
def test_stdin_that_is_binary(tool, capsys, monkeypatch):
    result = invoke(tool, ["-"], capsys, monkeypatch, stdin=b"\0\0\0\0")
    assert_refused(result, tool, r"<stdin>:1:1: binary input")


@pytest.mark.parametrize("tool", TOOLS)
def test_dev_zero_as_input(tool, capsys, monkeypatch):
    result = invoke(tool, ["/dev/zero"], capsys, monkeypatch)
    assert_refused(result, tool, r"/dev/zero:1:1: binary input")
