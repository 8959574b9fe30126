"""One environment variable set (or unset) for a block: engines started inside read it at spawn."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator


@contextlib.contextmanager
def temporary_env(name: str, value: str | None) -> Iterator[None]:
    """`name` = `value` inside the block (None: unset), restored after it."""
    old = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
