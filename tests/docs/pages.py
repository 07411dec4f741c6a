"""The examples of the README and the docs/ pages, read from their markdown: fenced code blocks
with the markers that say how each shell block is run, and the tables whose example column runs.

Markers are HTML comments (invisible on GitHub and in the site):

- `<!-- docs-test: daemon [FLAGS] -->` anywhere on a page: the test starts our nsqd with FLAGS
  for that page, listening on what the page calls 127.0.0.1:4150 and :4151;
- `<!-- not run: REASON -->` right above a block: the block is not run, and is listed with its
  reason by tests/docs/test_examples.py (nothing is skipped without one);
- `<!-- run: background -->` right above a block: it starts something that keeps running (a
  daemon); the test waits until every address it listens on accepts, and stops it with the page;
- `<!-- run: table -->` right above a table: the last column's `code` of each row runs in order.

A block's language says what it is: `sh`/`bash` (run, exit status 0 expected), `console`
(`$ ` commands, each followed by the output it must print; `...` stands for any text), or
another language (`python`, `yaml`, `json`, `http`, `text`), which is no shell and not run."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHELL = frozenset({"sh", "bash", "console"})
NOT_SHELL = frozenset({"python", "yaml", "json", "http", "text"})

_MARKER = re.compile(r"<!--\s*(not run|run|docs-test):\s*(.*?)\s*-->")
_CELL_CODE = re.compile(r"`([^`]+)`")


def pages() -> list[Path]:
    """README.md and every page of docs/, in that order."""
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


@dataclass
class Block:
    """One fenced code block: its language, text, line and marker (`not run`, `run`, or '')."""

    page: str
    line: int
    lang: str
    text: str
    marker: str = ""
    detail: str = ""

    @property
    def shell(self) -> bool:
        return self.lang in SHELL

    @property
    def first_command(self) -> str:
        """The block's first line without its comment."""
        return self.text.strip().splitlines()[0].split("  #")[0].strip()


@dataclass
class Table:
    """A table marked `run: table`: the header's `H=...` and each row's example command."""

    page: str
    line: int
    setup: str
    commands: list[str] = field(default_factory=list)


@dataclass
class Page:
    path: Path
    daemon_flags: list[str] | None = None
    blocks: list[Block] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)

    @property
    def name(self) -> str:
        path = self.path.resolve()
        return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else path.name

    @property
    def runnable(self) -> list[Block]:
        return [b for b in self.blocks if b.shell and b.marker != "not run"]


def read(path: Path) -> Page:
    """Parse one page; a fence without a language, or of one neither shell nor listed in
    NOT_SHELL, raises ValueError (every block must say what it is)."""
    page = Page(path)
    lines = path.read_text().splitlines()
    pending: tuple[str, str, int] | None = None  # the last marker, until a block or table
    i = 0
    while i < len(lines):
        line = lines[i]
        found = _MARKER.search(line)
        if found and found.group(1) == "docs-test":
            words = found.group(2).split()
            if words[:1] != ["daemon"]:
                raise ValueError(f"{page.name}:{i + 1}: unknown docs-test marker {line!r}")
            page.daemon_flags = words[1:]
        elif found:
            pending = (found.group(1), found.group(2), i + 1)
        elif line.startswith("```"):
            lang = line[3:].strip()
            if lang not in SHELL | NOT_SHELL:
                raise ValueError(f"{page.name}:{i + 1}: code block language {lang!r} unknown")
            end = lines.index("```", i + 1)
            marker, detail = _take(pending, "block")
            body = "\n".join(lines[i + 1 : end]) + "\n"
            page.blocks.append(Block(page.name, i + 1, lang, body, marker, detail))
            pending, i = None, end
        elif line.startswith("|") and pending is not None:
            marker, detail = _take(pending, "table")
            if (marker, detail) != ("run", "table"):
                raise ValueError(f"{page.name}:{i + 1}: marker {pending} above a table")
            end = i
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            page.tables.append(_table(page.name, i + 1, lines[i:end]))
            pending, i = None, end
        elif line.strip() and pending is not None and not line.startswith("<!--"):
            raise ValueError(f"{page.name}:{pending[2]}: marker not right above a block")
        i += 1
    return page


def _take(pending: tuple[str, str, int] | None, what: str) -> tuple[str, str]:
    if pending is None:
        return "", ""
    kind, detail, _ = pending
    if kind == "not run" and not detail:
        raise ValueError(f"a `not run` marker above a {what} gives no reason")
    return kind, detail


def _table(page: str, line: int, rows: list[str]) -> Table:
    header = _cells(rows[0])[-1]
    setup = _CELL_CODE.search(header)
    table = Table(page, line, setup.group(1) if setup else "")
    for row in rows[2:]:
        code = _CELL_CODE.findall(_cells(row)[-1])
        if len(code) != 1:
            raise ValueError(f"{page}:{line}: a row's example is not one `code` span: {row}")
        table.commands.append(code[0])
    return table


def _cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def console_steps(block: Block) -> list[tuple[str, str]]:
    """A console block's (command, expected output) pairs; a command line ending in `\\`
    goes on on the next line."""
    steps: list[tuple[str, list[str]]] = []
    continued = False
    for line in block.text.splitlines():
        if continued:
            steps[-1] = (steps[-1][0] + "\n" + line, steps[-1][1])
        elif line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        else:
            raise ValueError(f"{block.page}:{block.line}: console output before any `$ ` line")
        continued = line.endswith("\\") and not steps[-1][1]
    return [(cmd, "\n".join(out)) for cmd, out in steps]


def output_matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is ``expected`` where each `...` stands for any text (trailing
    blanks of each line and of the whole ignored)."""
    norm = "\n".join(line.rstrip() for line in actual.rstrip().splitlines())
    pattern = ".*?".join(re.escape(part) for part in expected.rstrip().split("..."))
    return re.fullmatch(pattern, norm, re.DOTALL) is not None
