"""Which keys each Lua script call touched, seen by Redis ``MONITOR`` (issue 13: every key a
script touches must arrive in its KEYS).

MONITOR shows the commands a script runs, from the client ``lua``. Redis runs a script
atomically, so its inner commands are never interleaved with another client's: they form one
run of ``lua`` lines, next to their EVAL/EVALSHA line. Whether that run comes before or
after the call's line depends on the Redis version (7.0 feeds the monitors once a command
has run, so the inner commands come first); a probe script tells which.
"""

from __future__ import annotations

import hashlib
import re
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from secrets import token_hex
from types import TracebackType

import redis

# One MONITOR line: "<time> [<db> <client>] "arg" "arg" ..."; the arguments are quoted the
# way sdscatrepr does (\\, \", \n, \r, \t, \a, \b, \xHH).
_LINE = re.compile(rb"^\+?[\d.]+ \[\d+ ([^\]]*)\] (.*)$")
_ARG = re.compile(rb'"((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(rb"\\(x[0-9a-fA-F]{2}|.)")
_ESCAPED = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b"}
_CALLS = {b"EVAL", b"EVALSHA", b"EVAL_RO", b"EVALSHA_RO"}

# Runs one inner command and touches no key: it shows where a script's lines go.
PROBE = "return redis.call('ECHO', ARGV[1])"
PROBE_SHA = hashlib.sha1(PROBE.encode()).hexdigest()


def _unescape(match: re.Match[bytes]) -> bytes:
    code = match.group(1)
    if code.startswith(b"x") and len(code) == 3:
        return bytes([int(code[1:], 16)])
    return _ESCAPED.get(code, code)


def parse(line: bytes) -> tuple[bool, list[bytes]] | None:
    """(run by a script, arguments) of one MONITOR line; None for anything else."""
    found = _LINE.match(line)
    if found is None:
        return None
    args = [_ESCAPE.sub(_unescape, a) for a in _ARG.findall(found.group(2))]
    return found.group(1) == b"lua", args


@dataclass
class ScriptCall:
    sha: str
    keys: list[bytes]
    inner: list[list[bytes]] = field(default_factory=list)


class NodeMonitor:
    """A MONITOR connection to one node. Redis buffers what it feeds a monitor without a limit
    (a monitor counts as a normal client), so the lines are read once the workload is done."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout=30)
        self.reader = self.sock.makefile("rb")
        self.sock.sendall(b"MONITOR\r\n")
        assert self.reader.readline() == b"+OK\r\n"
        self.client = redis.Redis(host=host, port=port)
        # The keys as bytes, as the inner commands and KEYS are.
        self.client.set_response_callback("COMMAND GETKEYS", lambda reply, **_: reply)

    def lines(self) -> Iterator[tuple[bool, list[bytes]]]:
        """Every line fed so far: ends at a marker sent now, behind whatever was run before."""
        marker = f"monitor-end-{token_hex(8)}".encode()
        self.client.echo(marker)
        while True:
            raw = self.reader.readline()
            assert raw, f"MONITOR on {self.host}:{self.port} closed early"
            parsed = parse(raw.rstrip(b"\r\n"))
            if parsed is None:
                continue
            if not parsed[0] and parsed[1] == [b"ECHO", marker]:
                return
            yield parsed

    def close(self) -> None:
        self.reader.close()
        self.sock.close()
        self.client.close()


def inner_first(monitor: NodeMonitor) -> bool:
    """Whether this server shows a script's inner commands before its EVAL line."""
    mark = token_hex(8).encode()
    monitor.client.eval(PROBE, 0, mark)
    order = [
        lua
        for lua, args in monitor.lines()
        if args and args[-1] == mark and args[0].upper() in (b"ECHO", b"EVAL")
    ]
    assert sorted(order) == [False, True], f"the probe was not seen as expected: {order}"
    return order[0]


def script_calls(
    lines: Iterable[tuple[bool, list[bytes]]], inner_before: bool
) -> tuple[list[ScriptCall], int]:
    """Every script call with its inner commands; and how many script lines matched no call."""
    calls: list[ScriptCall] = []
    pending: list[list[bytes]] = []  # inner commands waiting for their call (inner_before)
    current: ScriptCall | None = None  # the call whose inner commands follow (not inner_before)
    stray = 0
    for lua, args in lines:
        if lua:
            if inner_before:
                pending.append(args)
            elif current is not None:
                current.inner.append(args)
            else:
                stray += 1
            continue
        current = None
        if args and args[0].upper() in _CALLS and len(args) >= 3:
            numkeys = int(args[2])
            command = args[0].upper()
            sha = (
                args[1].decode().lower()
                if command.startswith(b"EVALSHA")
                else hashlib.sha1(args[1]).hexdigest()
            )
            current = ScriptCall(sha, args[3 : 3 + numkeys])
            calls.append(current)
            if inner_before:
                current.inner, pending = pending, []
                current = None
        elif pending:
            stray += len(pending)
            pending = []
    return calls, stray + len(pending)


def keys_of(
    client: redis.Redis, commands: Iterable[list[bytes]]
) -> dict[tuple[bytes, ...], list[bytes]]:
    """The keys of each command, as the server parses them (COMMAND GETKEYS)."""
    unique = list(dict.fromkeys(tuple(c) for c in commands))
    found: dict[tuple[bytes, ...], list[bytes]] = {}
    for start in range(0, len(unique), 1000):
        batch = unique[start : start + 1000]
        pipe = client.pipeline(transaction=False)
        for command in batch:
            pipe.execute_command("COMMAND GETKEYS", *command)  # type: ignore[no-untyped-call]
        for command, reply in zip(batch, pipe.execute(raise_on_error=False), strict=True):
            # An error: a command without keys (TIME, ECHO...).
            found[command] = [] if isinstance(reply, Exception) else list(reply)
    return found


def pattern(key: bytes, prefix: str) -> str:
    """A key without its lock or queue base, its variable parts as ``*`` (``a:*``, ``names``,
    ``j:*:corrupt``), so that a violation reads the same in every run."""
    text = key.decode(errors="replace")
    based = re.match(re.escape(prefix) + r":\{[^}]*\}:(.*)$", text)
    rest = based.group(1) if based else text
    parts = rest.split(":")
    general = [parts[0]] + [p if p in ("corrupt", "swept") else "*" for p in parts[1:]]
    out = ":".join(general)
    while "*:*" in out:
        out = out.replace("*:*", "*")
    return out


class Monitoring:
    """MONITOR on every given node, for a ``with`` block; ``calls`` once it has ended."""

    def __init__(self, nodes: Iterable[tuple[str, int]]) -> None:
        self.monitors = [NodeMonitor(host, port) for host, port in nodes]
        self.inner_before = {inner_first(m) for m in self.monitors}
        assert len(self.inner_before) == 1, "the nodes disagree on MONITOR's order"
        self.calls: list[ScriptCall] = []
        self.stray = 0

    @property
    def order(self) -> str:
        if True in self.inner_before:
            return "a script's inner commands before its call"
        return "a script's call, then its inner commands"

    def __enter__(self) -> Monitoring:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc is None:
                before = True in self.inner_before
                for monitor in self.monitors:
                    calls, stray = script_calls(monitor.lines(), before)
                    self.calls += calls
                    self.stray += stray
        finally:
            for monitor in self.monitors:
                monitor.close()

    def violations(
        self, names: dict[str, str], prefix: str
    ) -> tuple[dict[str, set[str]], set[str]]:
        """{script name: patterns of the keys it touched outside its KEYS}, and the names of
        the scripts called (an unknown script is named ``?<sha>``)."""
        client = self.monitors[0].client
        keys = keys_of(client, (c for call in self.calls for c in call.inner))
        found: dict[str, set[str]] = {}
        seen: set[str] = set()
        for call in self.calls:
            if call.sha == PROBE_SHA:
                continue
            name = names.get(call.sha, f"?{call.sha[:12]}")
            seen.add(name)
            declared = set(call.keys)
            for command in call.inner:
                for key in keys[tuple(command)]:
                    if key not in declared:
                        found.setdefault(name, set()).add(pattern(key, prefix))
        return found, seen
