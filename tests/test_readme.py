"""The README's code blocks run as a user would paste them, on the simulator (issue 30).

How each fenced block of README.md is treated (the README follows this; a block that does not
fails here):

- ```` ```python ````: a script. Each block runs alone, in a fresh interpreter (a subprocess with
  this checkout first on ``PYTHONPATH``), in a temporary folder. It must exit with status 0 and
  print no traceback.
- ```` ```ipython ````: one notebook cell, as pasted. All such blocks run in one real kernel
  (nbclient), in the README's order, so a cell may use what an earlier one made, as in a notebook.
  A cell must raise nothing and write nothing to stderr (the magic reports a failed stream there).
- ```` ```sh ````: not run (they install things, or read a real key). The two set-up commands,
  ``make demo`` and ``make test``, must be in one of them.
- ``<!-- not run: REASON -->`` on the line before a ``python`` or ``ipython`` fence: that block is
  not run (it needs a real gateway or key). Every other such block runs: none is skipped silently.
- Any other fence (none, ``text``, ``bash``...) fails: a new block has to say how it is run.

The environment has no ``NITO_API_KEY``, ``NITO_BASE_URL`` or ``NITO_MODEL``, so only ``sim/``
models can answer, and the simulator runs as fast as it can (``NITO_SIM_TPS=0``). A block that
fails is reported with its line in the README, its first line and the error.

The README's relative links (and their ``#anchors``) must lead to files and headings that exist.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

RUN_AS_SCRIPT = "python"
RUN_AS_CELL = "ipython"
NOT_RUN_LANGUAGES = ("sh",)
NOT_RUN_MARKER = re.compile(r"^<!--\s*not run:\s*(\S.*?)\s*-->$")
FENCE = re.compile(r"^```(.*)$")
SCRIPT_TIMEOUT_S = 120


@dataclass(frozen=True)
class Block:
    language: str
    source: str
    line: int  # the README line of its first line of code (1-based)
    not_run: str | None  # the reason given by a <!-- not run: ... --> marker

    @property
    def first_line(self) -> str:
        lines = self.source.strip().splitlines()
        return lines[0] if lines else ""

    def __str__(self) -> str:
        return f"README.md line {self.line}, ```{self.language} block starting {self.first_line!r}"


def fenced_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        language = opening.group(1).strip()
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN_MARKER.match(before)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        if end is None:
            raise AssertionError(f"README.md line {i + 1}: a ``` fence that is never closed")
        blocks.append(
            Block(
                language,
                "\n".join(lines[i + 1 : end]) + "\n",
                i + 2,
                marker.group(1) if marker else None,
            )
        )
        i = end + 1
    return blocks


BLOCKS = fenced_blocks(README.read_text(encoding="utf-8"))
SCRIPTS = [b for b in BLOCKS if b.language == RUN_AS_SCRIPT and b.not_run is None]
CELLS = [b for b in BLOCKS if b.language == RUN_AS_CELL and b.not_run is None]


def readme_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NITO_API_KEY", "NITO_BASE_URL", "NITO_MODEL")
    }
    env["NITO_SIM_TPS"] = "0"
    env["NITO_SIM_TTFT_MS"] = "0"
    env["MPLBACKEND"] = "Agg"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


# -- what the README holds ---------------------------------------------------------------------


def test_every_block_says_how_it_is_run() -> None:
    known = (RUN_AS_SCRIPT, RUN_AS_CELL, *NOT_RUN_LANGUAGES)
    unknown = [str(b) for b in BLOCKS if b.language not in known]
    assert not unknown, (
        f"fences must be one of {', '.join(known)} (see tests/test_readme.py): {unknown}"
    )
    pointless = [
        str(b)
        for b in BLOCKS
        if b.not_run is not None and b.language not in (RUN_AS_SCRIPT, RUN_AS_CELL)
    ]
    assert not pointless, f"a not-run marker before a block that is never run: {pointless}"
    assert SCRIPTS and CELLS


def test_the_two_set_up_commands_are_there() -> None:
    shell = "\n".join(b.source for b in BLOCKS if b.language == "sh")
    for command in ("make demo", "make test"):
        assert re.search(rf"^{command}\b", shell, re.MULTILINE), (
            f"`{command}` is not in a ```sh block"
        )
        target = command.split()[1]
        makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), (
            f"the Makefile has no `{target}` target"
        )


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors_of(markdown: str) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    in_fence = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading and not in_fence:
            slug = github_slug(heading.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def prose_of(markdown: str) -> str:
    """The text outside code: fenced blocks and inline code spans removed."""
    without_fences = re.sub(r"^```.*?^```[ \t]*$", "", markdown, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", without_fences)


def test_relative_links_lead_to_files_and_headings_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", prose_of(text))
    assert targets
    broken = []
    for target in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        file = (README.parent / path) if path else README
        if not file.exists():
            broken.append(f"{target}: no file {path}")
        elif (
            anchor
            and file.suffix == ".md"
            and anchor not in anchors_of(file.read_text(encoding="utf-8"))
        ):
            broken.append(f"{target}: no heading #{anchor} in {path or 'README.md'}")
    assert not broken, "README links that lead nowhere:\n" + "\n".join(broken)


# -- running them ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.spawns
@pytest.mark.parametrize("block", SCRIPTS, ids=[f"line{b.line}" for b in SCRIPTS])
def test_python_block_runs_as_a_script(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(block.source, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=readme_env(),
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
    )
    error = done.stderr.strip()
    if done.returncode != 0 or "Traceback (most recent call last)" in error:
        last = error.splitlines()[-1] if error else f"exit status {done.returncode}"
        pytest.fail(f"{block} does not run as pasted: {last}\n\n{error[-3000:]}", pytrace=False)


@pytest.mark.slow
@pytest.mark.spawns
def test_ipython_blocks_run_as_cells_of_one_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbformat
    from nbclient import NotebookClient

    for name, value in readme_env().items():
        monkeypatch.setenv(name, value)  # the kernel inherits this process's environment
    for name in ("NITO_API_KEY", "NITO_BASE_URL", "NITO_MODEL"):
        monkeypatch.delenv(name, raising=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(block.source.rstrip("\n")) for block in CELLS]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(
        nb,
        timeout=SCRIPT_TIMEOUT_S,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    failures = []
    for block, cell in zip(CELLS, nb.cells, strict=True):
        outputs = cell.get("outputs", [])
        errors = [f"{o['ename']}: {o['evalue']}" for o in outputs if o["output_type"] == "error"]
        stderr = "".join(
            o["text"] for o in outputs if o["output_type"] == "stream" and o["name"] == "stderr"
        ).strip()
        if errors or stderr:
            failures.append(f"{block} does not run as a cell: {(errors or [stderr])[0]}")
    assert not failures, "\n".join(failures)
