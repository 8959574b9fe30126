"""Where a run folder's files live, behind one small interface (`RunStorage`).

- `LocalStorage`: a folder on this machine's disk (temp file + rename: atomic parts).
- `ArrowStorage` (sim/runs/storage_objects.py): a prefix in any file system pyarrow.fs opens (s3://, gs://, abfs://, hdfs://) or,
  through fsspec, any other (`pyarrow.fs.PyFileSystem(FSSpecHandler(...))`). Object stores have no
  rename, but an object appears whole or not at all when its upload completes: parts and the
  manifest go up in one PUT under their final name, so a reader never sees half of one and a crash
  before the PUT leaves nothing. Other file systems (HDFS) get temp name + move, as on local disk.
  Credentials come from each store's standard environment variables and files (AWS_*,
  GOOGLE_APPLICATION_CREDENTIALS, ...); they are never written anywhere by esc-eval.
- `ShippedStorage` (sim/runs/storage_server.py): a worker on another node reaching a local run folder
  on the driver's disk through a writer actor pinned to the driver's node.

`open_storage` and `StorageSpec` (runs/open.py) pick one of them for a location.

Keys are '/'-separated paths relative to the run folder ("dialogues/part-....parquet").
Names starting with '.' are private (temp files, markers, caches) and never listed.
"""
from __future__ import annotations

import abc
import os
import posixpath
import re
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# URI schemes of object stores: one PUT creates an object atomically, and there is no rename.
OBJECT_STORE_SCHEMES = {"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "azure", "oss", "r2", "memory"}
CHECK_HINT = "check the endpoint, the bucket and the store's credentials in the environment or its config files"
# Query parameters that can carry secrets in a storage URI (pyarrow accepts some of them).
_SECRET_QUERY = re.compile(r"(key|secret|token|password|credential|signature|sig)", re.IGNORECASE)


class RunFolderError(ValueError):
    """A run folder cannot be used as given (the message names the folder or URI)."""


def is_uri(location: str | os.PathLike[str]) -> bool:
    """A storage URI (s3://bucket/prefix, gs://..., hdfs://...) rather than a local path. file:// is local."""
    text = str(location)
    scheme = text.split("://", 1)[0] if "://" in text else ""
    return bool(scheme) and scheme.lower() != "file" and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme) is not None


def local_path(location: str | os.PathLike[str]) -> Path:
    text = str(location)
    return Path(text[len("file://"):]) if text.startswith("file://") else Path(text)


def redact_uri(location: str | os.PathLike[str]) -> str:
    """The location with any user:password and secret-looking query values removed (for messages
    and manifests)."""
    text = str(location)
    if not is_uri(text):
        return text
    parts = urlsplit(text)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    query = urlencode([(k, "***" if _SECRET_QUERY.search(k) else v) for k, v in parse_qsl(parts.query)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def location_name(location: str | os.PathLike[str]) -> str:
    """The last path component of a folder's location (a label for reports and the viewer)."""
    text = str(location)
    if is_uri(text):
        return redact_uri(text).split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    path = local_path(text)
    return path.resolve().name or str(path)


def join_location(location: str | os.PathLike[str], *names: str) -> str:
    """A location inside another (a report folder inside a run folder), keeping a URI's query."""
    text = str(location)
    if not is_uri(text):
        return str(local_path(text).joinpath(*names))
    parts = urlsplit(text)
    return urlunsplit((parts.scheme, parts.netloc, posixpath.join(parts.path or "/", *names), parts.query, parts.fragment))


class Appender(abc.ABC):
    """An append-only file kept open by one writer (turn-checkpoint logs)."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...


class RunStorage(abc.ABC):
    """The files of one run folder. A worker reopens the driver's from a `StorageSpec` (runs/open.py)."""

    location: str  # what the user gave: a path or a URI (secrets redacted when shown)
    # How often a writer sends its buffered turn checkpoints: 0 = at the end of every event-loop
    # pass (a local append costs microseconds); stores where each send is a network round trip
    # batch them (a crash then loses at most this many seconds of turns, which are played again).
    checkpoint_interval_s: float = 0.0
    supports_append: bool = False

    @abc.abstractmethod
    def write(self, key: str, data: bytes, *, durable: bool = True) -> None:
        """Create or replace `key` atomically: a reader sees the old content or the new, never half.
        durable=False skips fsync on local disk (a process crash is survived, a power loss may not be)."""

    @abc.abstractmethod
    def read(self, key: str) -> bytes:
        """The whole content of `key` (FileNotFoundError if absent)."""

    def read_from(self, key: str, offset: int) -> bytes:
        """The bytes of `key` from `offset` on (b"" if absent)."""
        try:
            return self.read(key)[offset:]
        except FileNotFoundError:
            return b""

    @abc.abstractmethod
    def source(self, key: str) -> Any:
        """Something pyarrow readers open (a path string or a pyarrow NativeFile)."""

    @abc.abstractmethod
    def list(self, folder: str, suffix: str = "") -> list[str]:
        """Sorted keys of the files directly in `folder` whose name ends with `suffix` (private names skipped)."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove `key` (no error if it is already gone)."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool: ...

    def size(self, key: str) -> int:
        return len(self.read(key))

    def open_appender(self, key: str) -> Appender:
        raise NotImplementedError(f"{type(self).__name__} has no appendable files")

    def dataset(self, keys: list[str]) -> Any:
        """A pyarrow dataset over these Parquet files (streamed scans, filters)."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        return ds.dataset([pa.BufferReader(self.read(k)) for k in keys], format="parquet")

    def is_folder(self) -> bool:
        """The run folder exists (something was written there)."""
        return True

    def check_writable(self) -> None:
        """Fail with one line naming the location if nothing can be written there (before any work)."""

    @property
    def local_root(self) -> Path | None:
        """The folder on this machine's disk, for a local run folder; None for any other store."""
        return None


class LocalStorage(RunStorage):
    supports_append = True

    def __init__(self, root: str | os.PathLike[str]):
        self.root = local_path(root)
        self.location = str(self.root)

    @property
    def local_root(self) -> Path:
        return self.root

    def _path(self, key: str) -> Path:
        return self.root / key

    def write(self, key: str, data: bytes, *, durable: bool = True) -> None:
        atomic_write_bytes(self._path(key), data, fsync=durable)

    def read(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def read_from(self, key: str, offset: int) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                f.seek(offset)
                return f.read()
        except FileNotFoundError:
            return b""

    def source(self, key: str) -> str:
        return str(self._path(key))

    def list(self, folder: str, suffix: str = "") -> list[str]:
        try:
            with os.scandir(self._path(folder)) as it:
                names = [e.name for e in it if not e.name.startswith(".") and e.name.endswith(suffix) and e.is_file()]
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [f"{folder}/{n}" if folder else n for n in sorted(names)]

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def size(self, key: str) -> int:
        return self._path(key).stat().st_size

    def open_appender(self, key: str) -> Appender:
        return _FileAppender(self._path(key))

    def dataset(self, keys: list[str]) -> Any:
        import pyarrow.dataset as ds

        return ds.dataset([str(self._path(k)) for k in keys], format="parquet")

    def is_folder(self) -> bool:
        return self.root.is_dir()

    def refuse_unwritable(self) -> None:
        """What check_writable would find, found without creating or writing anything."""
        existing = next(p for p in (self.root, *self.root.parents) if p.exists())  # "/" exists
        if not existing.is_dir():
            raise RunFolderError(f"output folder {self.root} is not writable: {existing} is a file, not a folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise RunFolderError(f"output folder {self.root} is not writable: permission denied on {existing}")

    def check_writable(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-test-{uuid.uuid4().hex}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise RunFolderError(f"output folder {self.root} is not writable: {e.strerror or e}") from e


class _FileAppender(Appender):
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, data: bytes) -> None:
        written = 0
        while written < len(data):
            written += os.write(self.fd, data[written:])

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def atomic_write_bytes(path: Path, data: bytes, fsync: bool = True) -> None:
    """Write via a temp file + rename: readers never see half a file. fsync=False keeps that
    guarantee against a process crash (not a power loss) at a fraction of the cost."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def as_location(location: str | os.PathLike[str]) -> str | Path:
    """A URI stays a string (Path would fold its '//'); a local location becomes a Path."""
    return str(location) if is_uri(location) else local_path(location)
