"""The scenario file format (documented in conformance/README.md): parsing and payload building.

A scenario file is a sequence of `directive: argument` lines; `scenario: <id>` starts a new
scenario, `#` starts a comment line. Payload expressions are a tiny, safe subset of Python:
string/bytes literals, ints, `+`, `*`, lists and the helpers in `FUNCTIONS`.
"""

from __future__ import annotations

import ast
import json
import re
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

SCENARIO_DIR: Final = Path(__file__).resolve().parent / "scenarios"
ID_RE: Final = re.compile(r"[a-z0-9][a-z0-9_.-]{0,47}")
DEFAULT_DAEMON: Final = "shared"
DEFAULT_CONN: Final = "a"

# Directives that send bytes (each is one step followed by a collect window).
SEND_KINDS: Final = frozenset(
    {"send", "send_split", "send_raw", "identify", "auth", "pub", "dpub", "mpub"}
)
ACTION_KINDS: Final = SEND_KINDS | {"conn", "shutdown_write", "close", "sleep", "expect"}
HEADER_KINDS: Final = frozenset({"doc", "flags", "daemon", "window", "order"})
_EXPR_START: Final = re.compile(r"""^(?:[bB]?["']|\[|(?:i32|body|mpub|unhex|json)\()""")
_SUBST: Final = re.compile(r"\$(topic(?::(\d+))?|id(\d*))")


class ScenarioError(ValueError):
    """A scenario file is malformed (the message names the file and line)."""


@dataclass(frozen=True)
class Step:
    kind: str
    arg: str
    line: int
    source: str  # the line as written, for transcripts

    @property
    def is_send(self) -> bool:
        return self.kind in SEND_KINDS


@dataclass
class Scenario:
    id: str
    path: Path
    line: int
    doc: str = ""
    flags: tuple[str, ...] = ()
    daemon: str = DEFAULT_DAEMON
    window: float | None = None
    # "any": a step's events on one connection are compared as a set, and an `expect:` takes
    # the first unchecked event it matches (the nsqd's own order is a race between goroutines)
    any_order: bool = False
    steps: list[Step] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def group(self) -> tuple[tuple[str, ...], str]:
        """Scenarios with the same group share one daemon per target."""
        return (self.flags, self.daemon)

    def topic(self, length: int | None = None) -> str:
        """This scenario's own topic name (its id), padded with 'x' or cut to `length`."""
        if length is None:
            return self.id
        if length <= len(self.id):
            return self.id[:length]
        return (self.id + ".").ljust(length, "x")


# ---------------------------------------------------------------------------------------------
# payload expressions


def _i32(n: int) -> bytes:
    return struct.pack(">I" if n >= 2**31 else ">i", n)


def _body(data: bytes) -> bytes:
    return _i32(len(data)) + data


def _mpub(messages: list[bytes]) -> bytes:
    parts = b"".join(_body(m) for m in messages)
    return _i32(4 + len(parts)) + _i32(len(messages)) + parts


def _unhex(text: bytes) -> bytes:
    return bytes.fromhex(text.decode())


def _json(text: bytes) -> bytes:
    """Re-encode JSON compactly (fails at parse time on invalid JSON: use a plain string then)."""
    return json.dumps(json.loads(text), separators=(",", ":")).encode()


FUNCTIONS: Final[dict[str, Callable[..., bytes]]] = {
    "i32": _i32,
    "body": _body,
    "mpub": _mpub,
    "unhex": _unhex,
    "json": _json,
}

Value = bytes | int | list[bytes]


def _eval(node: ast.AST) -> Value:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value.encode("utf-8")
        if isinstance(node.value, bytes | int) and not isinstance(node.value, bool):
            return node.value
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = _eval(node.operand)
        if isinstance(operand, int):
            return -operand
    elif isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Add) and type(left) is type(right):
            return left + right  # type: ignore[operator]
        if isinstance(node.op, ast.Mult) and isinstance(right, int):
            return left * right  # bytes, list or int times an int
    elif isinstance(node, ast.List | ast.Tuple):
        items = [_eval(e) for e in node.elts]
        if all(isinstance(i, bytes) for i in items):
            return items  # type: ignore[return-value]
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and not node.keywords
    ):
        return FUNCTIONS[node.func.id](*[_eval(a) for a in node.args])
    raise ValueError(f"unsupported expression: {ast.unparse(node)}")


# suite.py runs scenarios in threads, and CPython 3.11's ast keeps its recursion depth in
# state the threads share: two parses at once can fail with "SystemError: AST constructor
# recursion depth mismatch" (python/cpython#106905); one parse at a time
_PARSING: Final = threading.Lock()


def eval_expr(text: str) -> Value:
    try:
        with _PARSING:
            tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"bad expression {text!r}: {exc.msg}") from exc
    return _eval(tree.body)


def is_expr(text: str) -> bool:
    return bool(_EXPR_START.match(text.strip()))


def payload(text: str) -> bytes:
    """A message body: an expression if it looks like one, else the text itself (UTF-8)."""
    if is_expr(text):
        value = eval_expr(text)
        if not isinstance(value, bytes):
            raise ValueError(f"payload must be bytes, got {type(value).__name__}: {text!r}")
        return value
    return text.encode("utf-8")


def build_bytes(kind: str, arg: str) -> bytes:
    """The exact bytes a send-type step puts on the wire (after `$` substitution)."""
    if kind in ("send", "send_split"):
        m = re.fullmatch(r"IDENTIFY (\{.*)", arg)
        if m:
            return b"IDENTIFY\n" + _body(m.group(1).encode())
        if is_expr(arg):
            return payload(arg)
        return arg.encode("utf-8") + b"\n"
    if kind == "send_raw":
        if is_expr(arg):
            return payload(arg)
        return bytes.fromhex(arg.replace(" ", ""))
    if kind in ("identify", "auth"):
        # JSON text is taken literally (it may be a JSON string or array); only a bytes literal
        # or a helper call is evaluated.
        data = payload(arg) if re.match(r"[bB][\"']|\w+\(", arg) else arg.encode("utf-8")
        return kind.upper().encode() + b"\n" + _body(data)
    if kind == "pub":
        topic, _, rest = arg.partition(" ")
        return f"PUB {topic}\n".encode() + _body(payload(rest))
    if kind == "dpub":
        topic, delay, rest = [*arg.split(" ", 2), "", ""][:3]
        return f"DPUB {topic} {delay}\n".encode() + _body(payload(rest))
    if kind == "mpub":
        topic, _, rest = arg.partition(" ")
        if is_expr(rest):
            value = eval_expr(rest)
            if not isinstance(value, list):
                raise ValueError(f"mpub wants a list of bodies, got {rest!r}")
            messages = value
        else:
            messages = [w.encode() for w in rest.split()]
        return f"MPUB {topic}\n".encode() + _mpub(messages)
    raise ValueError(f"{kind} does not send bytes")


def substitute(text: str, scenario: Scenario, id_for: Callable[[int | None], str]) -> str:
    """Replace `$topic`, `$topic:N`, `$id` (last message ID on this connection) and `$idN`."""

    def repl(m: re.Match[str]) -> str:
        if m.group(1).startswith("topic"):
            return scenario.topic(int(m.group(2)) if m.group(2) else None)
        return id_for(int(m.group(3)) if m.group(3) else None)

    return _SUBST.sub(repl, text)


def parse_duration(text: str) -> float:
    """'250ms', '1.5s' or '2s' -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*", text)
    if not m:
        raise ValueError(f"bad duration {text!r} (want e.g. 250ms or 1.5s)")
    value = float(m.group(1))
    return value / 1000.0 if m.group(2) == "ms" else value


# ---------------------------------------------------------------------------------------------
# files


def _check_step(step: Step, scenario: Scenario) -> None:
    """Fail at load time on anything that would fail at run time."""
    if step.is_send:
        build_bytes(step.kind, substitute(step.arg, scenario, lambda n: "0" * 16))
    elif step.kind == "sleep":
        parse_duration(step.arg)
    elif step.kind == "conn" and not re.fullmatch(r"[a-z][a-z0-9_]*", step.arg):
        raise ValueError(f"bad connection name {step.arg!r}")
    elif step.kind == "expect":
        from .expect import parse_expectation  # local import: expect imports this module

        parse_expectation(step.arg)
    elif step.kind in ("shutdown_write", "close") and step.arg:
        raise ValueError(f"{step.kind} takes no argument")


def parse_text(text: str, path: Path) -> list[Scenario]:
    scenarios: list[Scenario] = []
    current: Scenario | None = None
    # flags/daemon/window lines before the first scenario are the file's defaults
    defaults = Scenario("defaults", path, 0)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        directive, sep, arg = line.partition(":")
        directive = directive.strip()
        arg = arg.strip() if sep else ""
        where = f"{path.name}:{lineno}"
        if not sep and directive not in ("shutdown_write", "close"):
            raise ScenarioError(f"{where}: expected 'directive: argument', got {line!r}")
        if directive == "scenario":
            if not ID_RE.fullmatch(arg):
                raise ScenarioError(f"{where}: bad scenario id {arg!r} (want {ID_RE.pattern})")
            current = Scenario(
                arg,
                path,
                lineno,
                flags=defaults.flags,
                daemon=defaults.daemon,
                window=defaults.window,
            )
            scenarios.append(current)
            continue
        if current is None and directive not in HEADER_KINDS - {"doc"}:
            raise ScenarioError(f"{where}: {directive!r} before the first 'scenario:'")
        target = defaults if current is None else current
        try:
            if directive == "doc":
                target.doc = (target.doc + " " + arg).strip()
            elif directive in HEADER_KINDS and target.steps:
                raise ValueError(f"{directive} must come before the scenario's first step")
            elif directive == "flags":
                target.flags = tuple(sorted(arg.split()))
            elif directive == "daemon":
                target.daemon = arg
            elif directive == "window":
                target.window = parse_duration(arg)
            elif directive == "order":
                if arg not in ("any", "arrival"):
                    raise ValueError(f"order is 'any' or 'arrival', got {arg!r}")
                target.any_order = arg == "any"
            elif directive in ACTION_KINDS:
                step = Step(directive, arg, lineno, line)
                _check_step(step, target)
                target.steps.append(step)
            else:
                raise ValueError(f"unknown directive {directive!r}")
        except ValueError as exc:
            raise ScenarioError(f"{where}: {exc}") from exc
    return scenarios


def load_scenarios(paths: Iterable[Path] | None = None) -> list[Scenario]:
    """Every scenario in the given files (default: scenarios/*.txt), ids checked unique."""
    files = sorted(SCENARIO_DIR.glob("*.txt")) if paths is None else list(paths)
    scenarios: list[Scenario] = []
    seen: dict[str, Scenario] = {}
    for path in files:
        for sc in parse_text(path.read_text(encoding="utf-8"), path):
            if sc.id in seen:
                raise ScenarioError(
                    f"{sc.where}: duplicate scenario id {sc.id!r} ({seen[sc.id].where})"
                )
            if not sc.steps:
                raise ScenarioError(f"{sc.where}: scenario {sc.id!r} has no steps")
            seen[sc.id] = sc
            scenarios.append(sc)
    return scenarios
