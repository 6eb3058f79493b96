"""Docs that run: every ```python block of README.md and docs/*.md, and the links between them.

Each page's ``python`` blocks run in order in one fresh namespace (a page may load the model once
at its top), with the working directory a temporary folder (nothing is written into the checkout)
and ``HF_HUB_OFFLINE=1``: one test per page, named after the file.  A block whose info string says
``requires=MOD[,MOD...]`` (```` ```python requires=vllm ````) is skipped unless each module is
importable (so later blocks must not use names only such a block defines); what cannot run here
at all (shell commands, GPU-only code) belongs in a ```` ```bash ```` or ```` ```text ```` block.  A block that
raises fails its page's test, with the traceback's line numbers those of the markdown file.

The pages load the real model and generate, together some minutes on two cores: ``make test-slow``
runs them (the ``minutes`` marker); the link check is instant and runs in ``make test``.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*?)[ \t]*$")
_OPTION = re.compile(r"(?P<key>[A-Za-z_][\w-]*)=(?P<value>\S+)")
_KNOWN_OPTIONS = {"requires"}


@dataclass(frozen=True)
class Block:
    """One fenced code block: its info string, its code and the line (1-based) of its first code line."""

    page: Path
    line: int
    info: str
    code: str

    @property
    def language(self) -> str:
        return self.info.split()[0] if self.info.split() else ""

    @property
    def options(self) -> dict[str, str]:
        """``key=value`` words after the language; an unknown key is an error (a typo would skip silently)."""
        words = self.info.split()[1:]
        opts = {}
        for w in words:
            m = _OPTION.fullmatch(w)
            if m is None or m["key"] not in _KNOWN_OPTIONS:
                raise ValueError(f"{self.page.name}:{self.line - 1}: unknown option {w!r} in ```{self.info} "
                                 f"(known: {', '.join(sorted(_KNOWN_OPTIONS))}=...)")
            opts[m["key"]] = m["value"]
        return opts

    @property
    def requires(self) -> tuple[str, ...]:
        return tuple(x for x in self.options.get("requires", "").split(",") if x)


def code_blocks(text: str, page: Path = Path("<text>")) -> list[Block]:
    """The fenced code blocks of a markdown text, in order (CommonMark's fences: three or more
    backticks or tildes, closed by at least as many of the same; an unclosed block runs to the end)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        fence, indent, start = m["fence"], len(m["indent"]), i + 1
        j = start
        while j < len(lines):
            close = _FENCE.match(lines[j])
            if close and close["fence"][0] == fence[0] and len(close["fence"]) >= len(fence) and not close["info"]:
                break
            j += 1
        body = [ln[indent:] if ln[:indent].strip() == "" else ln.lstrip() for ln in lines[start:j]]
        blocks.append(Block(page, start + 1, m["info"], "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def python_blocks(page: Path) -> list[Block]:
    """The blocks whose info string starts with ``python``."""
    return [b for b in code_blocks(page.read_text(encoding="utf-8"), page) if b.language.startswith("python")]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def run_blocks(blocks: list[Block], namespace: dict) -> list[str]:
    """Run ``blocks`` in order in ``namespace``; returns why blocks were skipped (one line each).
    A block that raises propagates its exception."""
    skipped: list[str] = []
    for block in blocks:
        missing = [m for m in block.requires if not _importable(m)]
        if missing:
            skipped.append(f"{block.page.name}:{block.line}: needs {', '.join(missing)}")
            continue
        # blank lines in front so tracebacks give the markdown file's own line numbers; dont_inherit:
        # not this file's `from __future__ import annotations` (pydantic models in the docs need real ones)
        code = compile("\n" * (block.line - 1) + block.code, str(block.page), "exec", dont_inherit=True)
        exec(code, namespace)  # noqa: S102 - running the docs is the point
    return skipped


RUNNABLE = [p for p in PAGES if python_blocks(p)]


@pytest.mark.slow
@pytest.mark.minutes
@pytest.mark.parametrize("page", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_page_runs(page: Path, tmp_path, monkeypatch):
    from structgen.errors import ModelNotFound

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the page's namespace is a module's, registered while it runs, as a script's would be (pydantic
    # and pickle look classes' modules up in sys.modules)
    module = types.ModuleType("structgen_docs_" + re.sub(r"\W", "_", page.stem))
    module.__file__ = str(page)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    try:
        skipped = run_blocks(python_blocks(page), module.__dict__)
    except ModelNotFound as e:
        pytest.skip(str(e))
    if skipped and len(skipped) == len(python_blocks(page)):
        pytest.skip("; ".join(skipped))


def test_every_page_with_code_is_collected():
    assert ROOT / "README.md" in RUNNABLE
    for page in PAGES:
        for block in python_blocks(page):
            assert block.options is not None  # raises on an unknown option
            compile(block.code, f"{page.name}:{block.line}", "exec")  # at least valid Python, here and now


def test_the_runner_fails_when_a_block_raises(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```python\nx = 1\n```\n\n"
                    "```python requires=no_such_module_xyz\nimport no_such_module_xyz\n```\n\n"
                    "```python\nassert x == 2, 'x is 1'\n```\n")
    blocks = python_blocks(page)
    assert [b.line for b in blocks] == [4, 8, 12] and blocks[1].requires == ("no_such_module_xyz",)
    with pytest.raises(AssertionError, match="x is 1") as info:
        run_blocks(blocks, {})
    assert info.traceback[-1].lineno + 1 == 12  # the markdown file's line (pytest counts from 0)
    assert run_blocks(blocks[:2], {}) == ["page.md:8: needs no_such_module_xyz"]


def test_fences_and_info_strings():
    text = ("````markdown\n```python\nnot code\n```\n````\n\n"
            "~~~python requires=a,b\ny = 2\n~~~\n   ```py\n   z = 3\n   ```\n")
    blocks = code_blocks(text)
    assert [(b.info, b.code) for b in blocks] == [("markdown", "```python\nnot code\n```\n"),
                                                  ("python requires=a,b", "y = 2\n"), ("py", "z = 3\n")]
    assert blocks[1].requires == ("a", "b")
    with pytest.raises(ValueError, match="unknown option"):
        _ = Block(Path("p.md"), 2, "python requires-vllm", "").options


# --------------------------------------------------------------------------------------- links

_LINK = re.compile(r"(?<!\!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_IMAGE = re.compile(r"!\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans."""
    out, fence = [], None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m["fence"]
            continue
        if fence is not None:
            if m and m["fence"][0] == fence[0] and len(m["fence"]) >= len(fence) and not m["info"]:
                fence = None
            continue
        out.append(re.sub(r"(`+).*?\1", "", line))
    return "\n".join(out)


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a page: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    anchors = set()
    for line in _prose(page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m[1].lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


def links(page: Path) -> list[str]:
    prose = _prose(page.read_text(encoding="utf-8"))
    return [m["target"] for rx in (_LINK, _IMAGE) for m in rx.finditer(prose)]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_point_to_files_that_exist(page: Path):
    bad = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            if "github.com" in target and "/blob/" in target:
                bad.append(f"{target}: a link into this repository must be relative")
            continue
        path, _, anchor = target.partition("#")
        if path.startswith("/"):
            bad.append(f"{target}: absolute path; make it relative to {page.name}")
            continue
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file {os.path.relpath(dest, ROOT)}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {os.path.relpath(dest, ROOT)}")
    assert not bad, f"{page.name}:\n" + "\n".join(bad)


def test_readme_links_every_topic_page():
    readme = set(links(ROOT / "README.md"))
    topics = {p for p in PAGES if p.parent.name == "docs"}
    unlinked = [p.name for p in topics if f"docs/{p.name}" not in readme]
    assert not unlinked, f"README.md links none of: {', '.join(unlinked)}"
