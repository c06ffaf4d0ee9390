"""Every example in README.md and docs/*.md runs.

The ```bash / ```shell / ```console blocks and the ```python blocks of each document are extracted
and run in order, in one temporary folder per document: the shell blocks with ``bash -e`` (so a
sequence -- ``ledger init``, ``fit --ledger``, ``ledger show`` -- runs as a sequence), the Python
blocks in one namespace per document (a block may use what an earlier one defined).  ```console
blocks run their ``$ `` lines.

Two HTML comments, invisible on the rendered page, sit next to the examples they concern:

* ``<!-- docs-test: skip (reason) -->`` right before a block: the block is not run (installing
  packages, a Spark cluster, machines on a network, a benchmark of many minutes).  The reason is
  required and is shown in the test's output.
* ``<!-- docs-test: setup`` ... ``-->`` around one or more blocks: hidden blocks that are run but not
  shown -- the small input files and variables an example assumes (``patients.csv``, ``X``), made
  from the bundled data sets.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL, PYTHON = ("bash", "shell", "sh", "console"), ("python", "py")
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*(?:\((?P<reason>.*)\))?\s*-->")
SETUP = re.compile(r"<!--\s*docs-test:\s*setup\b")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)")
SHELL_TIMEOUT = 240  # seconds for one shell block: the examples use small data

# Examples known to fail, each with who fixes it: the doc's test is expected to fail (xfail, not strict)
# until the fix is merged, and then passes.  Keep this list short and remove entries as fixes land.
KNOWN_BROKEN: dict[str, str] = {}  # doc -> why it is expected to fail (empty: every example runs)


@dataclass
class Block:
    doc: str
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    skip: str | None = None  # the reason, when marked skip
    hidden: bool = False  # inside a setup comment

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def extract(path: Path) -> list[Block]:
    """The shell and Python blocks of one Markdown file, in order, with their markers."""
    return blocks_of(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))


def blocks_of(doc: str, text: str) -> list[Block]:
    lines = text.splitlines()
    blocks, skip, hidden, i = [], None, False, 0
    while i < len(lines):
        line = lines[i]
        marker = SKIP.search(line)
        if marker:
            reason = (marker.group("reason") or "").strip()
            if not reason:
                raise AssertionError(f"{doc}:{i + 1}: 'docs-test: skip' needs a reason: (why)")
            skip = reason
        elif SETUP.search(line):
            hidden = True
        elif hidden and line.strip() == "-->":
            hidden = False
        fence = FENCE.match(line)
        if fence:
            start, indent, lang = i, fence.group("indent"), fence.group("lang").lower()
            body = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
                i += 1
            if lang in SHELL + PYTHON:
                blocks.append(Block(doc, start + 1, lang, "\n".join(body) + "\n", skip, hidden))
            skip = None
        i += 1
    return blocks


def _shell_code(block: Block) -> str:
    if block.lang != "console":
        return block.code
    return "\n".join(line[2:] for line in block.code.splitlines() if line.startswith("$ ")) + "\n"


def _environment() -> dict:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    env["MPLBACKEND"] = "Agg"
    env["COLUMNS"] = "200"
    return env


RUNNABLE = {str(p.relative_to(ROOT)): extract(p) for p in DOCS}
RUNNABLE = {doc: blocks for doc, blocks in RUNNABLE.items() if any(b.skip is None for b in blocks)}


def test_the_markers_are_read():
    """A skip marker applies to the next block only; a setup comment hides the blocks inside it."""
    text = (
        "<!-- docs-test: skip (needs a cluster) -->\n```bash\nspark-submit job.py\n```\n"
        "<!-- docs-test: setup\n```python\nX = 1\n```\n-->\n"
        "```python\nprint(X)\n```\n```text\nnot run\n```\n"
        "```console\n$ privclust datasets\noutput line\n```\n"
    )
    blocks = blocks_of("example.md", text)
    assert [(b.lang, b.skip, b.hidden) for b in blocks] == [
        ("bash", "needs a cluster", False),
        ("python", None, True),
        ("python", None, False),
        ("console", None, False),
    ]
    assert _shell_code(blocks[-1]) == "privclust datasets\n"


@pytest.mark.slow
@pytest.mark.parametrize("doc", sorted(RUNNABLE))
def test_doc_examples_run(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = _environment()
    namespace: dict = {"__name__": "__docs__"}
    skipped, failures = [], []
    for block in RUNNABLE[doc]:
        if block.skip is not None:
            skipped.append(f"{block.where} ({block.skip})")
            continue
        if block.lang in PYTHON:
            try:
                exec(compile(block.code, block.where, "exec"), namespace)
            except Exception as exc:
                failures.append(f"the Python example at {block.where} fails: {type(exc).__name__}: {exc}")
            continue
        try:
            done = subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", _shell_code(block)],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=SHELL_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            failures.append(f"the shell example at {block.where} ran past {SHELL_TIMEOUT} s")
            continue
        if done.returncode != 0:
            failures.append(
                f"the shell example at {block.where} fails (exit code {done.returncode}):\n{block.code}"
                f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
            )
    if skipped:
        print("skipped, as marked in the docs: " + "; ".join(skipped))
    if failures and doc in KNOWN_BROKEN:
        print("\n\n".join(failures))
        pytest.xfail(f"known broken: {KNOWN_BROKEN[doc]}; " + "; ".join(f.splitlines()[0] for f in failures))
    assert not failures, "\n\n".join(failures)
