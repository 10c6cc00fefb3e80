"""The README and docs/ point only at things that exist: every relative link resolves (its anchor
too), every repository path written in backticks (`src/...`, `tests/...`, `bench/...`,
`testdata/...`, `docs/...`, or a package path such as `hlo_common/interpreter/custom_call.py`) is
there, every folder of the README's map of the code is there, and the README links every doc."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
REPO_DIRS = ("src/", "tests/", "bench/", "testdata/", "docs/")
PACKAGES = ("hlo_common/", "hlo_opt/", "hlo_codegen/", "hlo_run/")
GENERATED = {"bench/results/"}  # written by `make bench-gpu`, not kept in the repository


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def dangling_links(page: Path) -> list[str]:
    out = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            out.append(f"{page.name}: link to {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{page.name}: link to {target}: no heading with that anchor")
    return out


def missing_code_paths(page: Path) -> list[str]:
    out = []
    for token in CODE.findall(FENCE.sub("", page.read_text())):
        token = token.rstrip(".,;:")
        if any(c in token for c in "<>*{}$|") or token.startswith("-") or token in GENERATED:
            continue  # a pattern or a placeholder, not a path
        if token.startswith(REPO_DIRS):
            path = ROOT / token
        elif token.startswith(PACKAGES):
            path = ROOT / "src" / token
        else:
            continue
        if not path.exists():
            out.append(f"{page.name}: `{token}` does not exist")
    return out


def map_paths(readme: str) -> list[str]:
    """The folders of the README's map of the code, nested ones joined to their parent."""
    section = readme.split("## The map of the code", 1)[1]
    block = FENCE.search(section).group(0).splitlines()[1:-1]
    paths, parent = [], ""
    for line in block:
        first = line.split()[0] if line.strip() else ""
        if not first.endswith("/"):
            continue  # a continuation line of the description
        if line.startswith("  "):
            paths.append(parent + first)
        else:
            parent = first
            paths.append(first)
    return paths


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_and_paths_resolve(page: Path) -> None:
    assert dangling_links(page) + missing_code_paths(page) == []


def test_the_map_of_the_code_names_existing_folders() -> None:
    paths = map_paths((ROOT / "README.md").read_text())
    assert "src/hlo_common/gpu/" in paths and "src/hlo_opt/fusion/" in paths and "bench/" in paths
    assert [p for p in paths if not (ROOT / p).is_dir()] == []


def test_the_readme_links_every_doc() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall((ROOT / "README.md").read_text())}
    assert DOCS and [d.name for d in DOCS if d.resolve() not in linked] == []


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title here\n[ok](page.md#title-here) [bad](nowhere.md) [anchor](page.md#nope)\n"
                    "`src/no_such_file.py` `hlo_common/no_such.py` `src/hlo_common/` `a-flag`\n")
    assert [m.split(": ", 1)[1] for m in dangling_links(page)] == [
        "link to nowhere.md: no such file", "link to page.md#nope: no heading with that anchor"]
    assert missing_code_paths(page) == ["page.md: `src/no_such_file.py` does not exist",
                                        "page.md: `hlo_common/no_such.py` does not exist"]
    readme = "## The map of the code\n\n```\nsrc/a/      x\n  b/        y\n            more\nc/  z\n```\n"
    assert map_paths(readme) == ["src/a/", "src/a/b/", "c/"]
