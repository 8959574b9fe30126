"""One process that runs a command line's `main` many times, one argument list at a time: a benchmark
client started as its user starts it (its own process, its own imports), imported once however many
runs it makes. vLLM's client imports vLLM (15-30 s on these CPUs before it sends a request), which a
new process per run paid again for every run of the cross-check.

The process reads one JSON argument list per line on stdin, sets sys.argv, calls `main()` and answers
with a line `@@done {"rc": ..., "s": ...}` on stdout; between runs it waits on stdin and uses no CPU.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

LOOP = r"""
import json as _json, sys as _sys, time as _time, traceback as _tb
print("@@ready", flush=True)
for _line in _sys.stdin:
    _sys.argv = [PROG, *_json.loads(_line)]
    _t0, _rc = _time.monotonic(), 0
    try:
        main()
    except SystemExit as _e:
        _rc = _e.code if isinstance(_e.code, int) else (0 if _e.code is None else 1)
    except BaseException:
        _tb.print_exc()
        _rc = 1
    _sys.stderr.flush()
    print("\n@@done " + _json.dumps({"rc": _rc, "s": round(_time.monotonic() - _t0, 2)}), flush=True)
"""


class CommandSession:
    """`prelude` is Python that leaves a `main()` reading sys.argv (e.g. sim/bench/serve/vllm_cli.py PRELUDE)."""

    def __init__(self, name: str, prelude: str, prog: str, log: Path, env: dict | None = None, preexec_fn=None):
        self.name, self.log_path = name, log
        self.log = open(log, "w")
        self.proc = subprocess.Popen([sys.executable, "-c", f"PROG = {prog!r}\n{prelude}\n{LOOP}"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, env=env, preexec_fn=preexec_fn)

    def _read_until(self, marker: str, timeout_s: float) -> tuple[str, list[str]]:
        timer = threading.Timer(timeout_s, self.proc.kill)  # a hung run ends the process, and so this read
        timer.start()
        lines: list[str] = []
        try:
            for line in self.proc.stdout:
                if line.startswith(marker):
                    return line[len(marker):].strip(), lines
                lines.append(line)
        finally:
            timer.cancel()
        raise AssertionError(f"{self.name} ended before {marker!r}: {''.join(lines)[-2000:]}\n{self.tail()}")

    def tail(self) -> str:
        self.log.flush()
        return self.log_path.read_text()[-3000:]

    def ready(self, timeout_s: float = 300) -> None:
        self._read_until("@@ready", timeout_s)

    def run(self, args: list[str], timeout_s: float = 300) -> dict:
        """One run of `main` with these arguments: {"rc", "s", "stdout"}."""
        self.proc.stdin.write(json.dumps([str(a) for a in args]) + "\n")
        self.proc.stdin.flush()
        done, lines = self._read_until("@@done ", timeout_s)
        return {**json.loads(done), "stdout": "".join(lines)}

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except Exception:  # noqa: BLE001 - a stuck client is killed
            self.proc.kill()
        self.log.close()

    def __enter__(self) -> CommandSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
