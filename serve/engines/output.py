"""What an engine's child processes print, kept so a failed start can name its own cause.

vLLM starts its EngineCore (and, on CPU or with tensor parallelism, worker processes under it) as
child processes that inherit this process's stdout and stderr. When one of them fails, the cause
is the traceback it prints there; the parent only learns "Engine core initialization failed. See
root cause above". In a Ray worker those streams are Ray's log files, which the console never shows
unless Ray forwards worker logs (`-v`). vLLM has no API that returns the child's exception.

So while an engine starts, file descriptors 1 and 2 are pipes: children started then inherit
them, a thread per pipe writes everything through to where the streams went before (the
terminal, Ray's log files) and keeps the last lines, and the streams are put back as soon as the
start returns. The children keep writing through the pipes for as long as they live (a later
fatal error of the engine is kept too). `root_cause` finds the exception line of the last
traceback in those lines, skipping vLLM's pointers ("See root cause above", "See stack trace for
root cause") to the traceback that holds it.

A pydantic validation error (vLLM checks its ModelConfig, CacheConfig, ... with pydantic) heads its
message with "1 validation error for ModelConfig", which names nothing: the cause keeps what follows
instead, each error's field and message ("ModelConfig: Model architectures ['Foo'] are not supported
for now. ..."), without pydantic's input echo, its link, or vLLM's list of every architecture it knows.
"""
from __future__ import annotations

import collections
import contextlib
import os
import re
import sys
import threading
from typing import Iterable, Iterator

KEPT_LINES = 400  # per engine: a worker's traceback and the core's after it fit
_REDIRECT = threading.Lock()  # fds 1 and 2 are the process's: one engine start redirects them at a time

# vLLM's log prefix: "(EngineCore pid=12) ERROR 11-25 11:36:17 [core.py:1510] " (the process part optional)
# Ray prefixes what a worker prints with its actor and pid, once per process it passed through and in colour
# on a terminal: "\x1b[36m(ServeReplica:app:LLMServer:m pid=6745)\x1b[0m (EngineCore pid=7306) ERROR 11-28 ... [core.py:1330]"
_PREFIX = re.compile(r"^(?:\x1b\[[\d;]*m)*(?:\([^()]*? pid=\d+\)(?:\x1b\[[\d;]*m)*\s?)*"
                     r"((DEBUG|INFO|WARNING|ERROR|CRITICAL) [\d-]+ [\d:.]+ \[[^\]]*\]\s?)?")
_POINTERS = ("see root cause above", "see stack trace for root cause", "failed core proc")
# vLLM's own words when the cause is in a child process's output, not in the exception
_POINTER_WORDS = ("root cause", "failed core proc", "background process")
# Teardown after a failed start, not its cause: vLLM's Ray executor kills its workers at exit from a Ray job
# that is already gone (vllm-project/vllm#45318, #45328); on an H200 this buried the engine's own error.
_TEARDOWN = ("actorhandlenotfounderror",)
# pydantic's header: "1 validation error for ModelConfig" (after "pydantic_core._pydantic_core.ValidationError: ")
_VALIDATION = re.compile(r"^(?:(?:[\w.]+\.)?(\w+): )?(\d+) validation errors? for ([\w.\[\], ]+?)\s*$")
_LIST = re.compile(r"dict_keys\(\[([^\]]*)\]\)|\[((?:'[^']*', ){8,}'[^']*')\]")
MAX_MESSAGE = 400  # characters of one validation error kept
_TRACEBACK = "Traceback (most recent call last)"


class ChildOutput:
    """The last lines child processes wrote to the fds 1 and 2 they inherited inside `capture()`."""

    def __init__(self, keep: int = KEPT_LINES):
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def capture(self) -> Iterator["ChildOutput"]:
        """Inside the block, fds 1 and 2 are pipes teed to where they went before (see the module doc)."""
        with _REDIRECT:
            restore: list[tuple[int, int]] = []
            try:
                for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
                    try:
                        if stream is not None:
                            stream.flush()
                        original = os.dup(fd)
                    except (OSError, ValueError):  # a closed or absent stream: nothing to tee
                        continue
                    read_end, write_end = os.pipe()
                    threading.Thread(target=self._tee, args=(read_end, os.dup(original)), daemon=True,
                                     name=f"engine-output-{fd}").start()
                    os.dup2(write_end, fd)
                    os.close(write_end)  # the children (and fd `fd` until restored) hold the write end now
                    restore.append((fd, original))
                yield self
            finally:
                for stream in (sys.stdout, sys.stderr):
                    with contextlib.suppress(Exception):
                        if stream is not None:
                            stream.flush()
                for fd, original in restore:
                    os.dup2(original, fd)
                    os.close(original)

    def _tee(self, read_end: int, out: int) -> None:
        partial = b""
        try:
            while True:
                data = os.read(read_end, 65536)
                if not data:
                    break
                with contextlib.suppress(OSError):
                    os.write(out, data)
                *complete, partial = (partial + data).split(b"\n")
                self._keep(complete)
            if partial:
                self._keep([partial])
        finally:
            os.close(read_end)
            os.close(out)

    def _keep(self, raw: list[bytes]) -> None:
        # a progress bar redraws its line after each "\r": keep what it showed last
        lines = [next((seg for seg in reversed(line.decode("utf-8", "replace").split("\r")) if seg), "") for line in raw]
        with self._lock:
            self.lines.extend(lines)

    def tail(self, n: int = 40) -> list[str]:
        """The last n lines, reaching back to the start of the last traceback when it began earlier:
        an engine whose model runs inside EngineCore (serve/engines/cpu_layout.py) fails with a
        traceback of 60 to 150 lines (vLLM's tracing wraps each frame), whose head says where it
        began. At most 3n lines: a longer traceback keeps its first lines, then says how many are
        left out, then its end; one that began more than 6n lines back is not this failure's."""
        with self._lock:
            lines = list(self.lines)
        last = lines[-n:]
        if any(_TRACEBACK in line for line in last):
            return last
        start = next((i for i in range(len(lines) - 1, -1, -1) if _TRACEBACK in lines[i]), None)
        if start is None or len(lines) - start > 6 * n:
            return last
        if len(lines) - start <= 3 * n:
            return lines[start:]
        head, end = lines[start:start + 3], lines[len(lines) - (3 * n - 4):]
        return [*head, f"... ({len(lines) - start - len(head) - len(end)} lines left out)", *end]

    def root_cause(self) -> str | None:
        with self._lock:
            return root_cause(list(self.lines))


def _strip(line: str) -> str:
    return _PREFIX.sub("", line, count=1)


def _tidy(message: str) -> str:
    """One pydantic error message without its input echo, its kind prefix or a list of hundreds of names."""
    cut = message.find(" [type=")
    message = (message[:cut] if cut >= 0 else message).strip()
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix):]

    def count(m: re.Match) -> str:
        names = (m.group(1) or m.group(2) or "").split(",")
        return f"[{len(names)} names]"

    message = _LIST.sub(count, message)
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 3] + "..."


def validation_message(text: str) -> str | None:
    """pydantic's "N validation error(s) for Model" text as one line that keeps what is wrong:
    "ValidationError: ModelConfig: <field>: <message>; ..." (None: not such a text)."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    head = _VALIDATION.match(lines[0].strip()) if lines else None
    if head is None:
        return None
    kind, model = head.group(1) or "ValidationError", head.group(3)
    errors: list[str] = []
    field = None
    for line in lines[1:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("For further information visit"):
            continue
        if not line[0].isspace():  # a field's path heads its message (none for a model-level check)
            field = stripped
            continue
        msg = _tidy(stripped)
        errors.append(f"{field}: {msg}" if field else msg)
        field = None
    if not errors:
        return None
    return f"{kind}: {model}: " + "; ".join(errors)


def _exception_of(block: list[str]) -> str | None:
    """The exception line ending a traceback block: its first line not indented (frames are), with
    up to two indented lines right after it (a multi-line message); a pydantic validation error with
    every error it lists (validation_message)."""
    for i, line in enumerate(block):
        if line and not line[0].isspace():
            head = _VALIDATION.match(line.strip())
            if head is not None:  # each error: its field, its message, pydantic's link
                found = validation_message("\n".join(block[i:i + 1 + 3 * int(head.group(2))]))
                if found:
                    return found
            more = []
            for nxt in block[i + 1:i + 3]:
                if nxt[:1] not in (" ", "\t") or nxt.strip().startswith("File "):
                    break
                more.append(nxt.strip())
            return " ".join([line.strip(), *more])
    return None


def root_cause(lines: Iterable[str]) -> str | None:
    """The exception line of the last traceback in `lines` that is not one of vLLM's pointers to
    another traceback; None when there is no traceback."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for raw in lines:
        line = _strip(raw)
        if line.startswith("Traceback (most recent call last)"):
            current = []
            blocks.append(current)
        elif current is not None:
            if line.startswith(("The above exception", "During handling of the above")):
                current = None  # a chained exception: the next "Traceback" line opens its block
                continue
            if line.strip() or current:
                current.append(line)
    causes = [c for c in (_exception_of(b) for b in blocks) if c]
    for cause in reversed(causes):
        if not any(p in cause.lower() for p in (*_POINTERS, *_TEARDOWN)):
            return cause
    return causes[-1] if causes else None


def cause_of(error: BaseException, output: ChildOutput, own: tuple[type, ...] = ()) -> str:
    """One line: why an engine did not start. The engine's processes' traceback when vLLM's
    exception only points there; else the exception's first line (with its type, unless it is one
    of `own`: errors whose message already says it all)."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    cause = output.root_cause() if any(w in first.lower() for w in _POINTER_WORDS) else None
    if cause is None and _VALIDATION.match(first):  # pydantic's header names nothing: its errors do
        cause = validation_message(f"{type(error).__name__}: {text}")
    return cause or (first if isinstance(error, own) else f"{type(error).__name__}: {first}")
