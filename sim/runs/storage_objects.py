"""Run folders in object storage and other remote file systems, through pyarrow.fs (and fsspec).

Object stores have no rename, but an object appears whole or not at all when its upload
completes: parts and the manifest go up in one PUT under their final name, so a reader never sees
half of one and a crash before the PUT leaves nothing. Other file systems (HDFS) get temp name +
move, as on local disk. Credentials come from each store's standard environment variables and
files; they are never written anywhere by esc-eval.
"""
from __future__ import annotations

import os
import posixpath
import uuid
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from esc_eval.sim.runs.storage import CHECK_HINT, OBJECT_STORE_SCHEMES, RunFolderError, RunStorage, redact_uri


class ArrowStorage(RunStorage):
    """A run folder in a pyarrow (or fsspec) file system, named by a URI."""

    checkpoint_interval_s = 1.0

    def __init__(self, location: str):
        self.location = location
        self.fs, self.root, self.object_store = _open_filesystem(location)

    def _full(self, key: str) -> str:
        return f"{self.root}/{key}" if key else self.root

    def _error(self, what: str, e: BaseException) -> RunFolderError:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return RunFolderError(f"{redact_uri(self.location)}: {what}: {text}")

    def write(self, key: str, data: bytes, *, durable: bool = True) -> None:
        full = self._full(key)
        if self.object_store:
            with self.fs.open_output_stream(full) as f:  # one object, visible only once complete
                f.write(data)
            return
        parent = posixpath.dirname(full)
        self.fs.create_dir(parent, recursive=True)
        tmp = posixpath.join(parent, f".{posixpath.basename(full)}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            with self.fs.open_output_stream(tmp) as f:
                f.write(data)
            self.fs.move(tmp, full)
        except BaseException:
            try:
                self.fs.delete_file(tmp)
            except Exception:  # noqa: BLE001 - best effort: a private name readers skip anyway
                pass
            raise

    def read(self, key: str) -> bytes:
        with self.fs.open_input_stream(self._full(key)) as f:
            return f.read()

    def read_from(self, key: str, offset: int) -> bytes:
        try:
            with self.fs.open_input_file(self._full(key)) as f:
                size = f.size()
                return f.read_at(size - offset, offset) if size > offset else b""
        except FileNotFoundError:
            return b""

    def source(self, key: str) -> Any:
        return self.fs.open_input_file(self._full(key))

    def dataset(self, keys: list[str]) -> Any:
        import pyarrow.dataset as ds

        return ds.dataset([self._full(k) for k in keys], format="parquet", filesystem=self.fs)

    def list(self, folder: str, suffix: str = "") -> list[str]:
        import pyarrow.fs as pafs

        infos = self.fs.get_file_info(pafs.FileSelector(self._full(folder), allow_not_found=True, recursive=False))
        names = [i.base_name for i in infos if i.type == pafs.FileType.File]
        return [f"{folder}/{n}" if folder else n for n in sorted(names)
                if not n.startswith(".") and n.endswith(suffix)]

    def delete(self, key: str) -> None:
        try:
            self.fs.delete_file(self._full(key))
        except FileNotFoundError:
            pass

    def exists(self, key: str) -> bool:
        import pyarrow.fs as pafs

        return self.fs.get_file_info(self._full(key)).type != pafs.FileType.NotFound

    def size(self, key: str) -> int:
        info = self.fs.get_file_info(self._full(key))
        if info.size is None:
            raise FileNotFoundError(key)
        return int(info.size)

    def is_folder(self) -> bool:
        import pyarrow.fs as pafs

        try:
            if self.exists("manifest.json"):
                return True
            infos = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True, recursive=False))
        except OSError as e:
            raise self._error(f"cannot be read ({CHECK_HINT})", e) from e
        return bool(infos)

    def check_writable(self) -> None:
        import pyarrow.fs as pafs

        bucket = self.root.split("/", 1)[0]
        try:
            if self.object_store and bucket:
                info = self.fs.get_file_info(bucket)
                if info.type == pafs.FileType.NotFound:
                    raise RunFolderError(f"{redact_uri(self.location)}: bucket {bucket!r} does not exist "
                                         f"(create it first; esc-eval never creates buckets)")
            probe = f".write-test-{uuid.uuid4().hex}"
            with self.fs.open_output_stream(self._full(probe)) as f:
                f.write(b"probe")  # not empty: an empty upload is a zero-part multipart upload S3 refuses
            self.fs.delete_file(self._full(probe))
        except RunFolderError:
            raise
        except (OSError, ValueError) as e:
            raise self._error(f"not writable ({CHECK_HINT})", e) from e


def _open_filesystem(location: str):
    """(file system, root path inside it, object store?) for a URI: pyarrow's own file systems
    first (S3 with short timeouts, so an unreachable endpoint fails in seconds), then fsspec's."""
    import pyarrow.fs as pafs

    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    object_store = scheme in OBJECT_STORE_SCHEMES
    try:
        if scheme in ("s3", "s3a"):
            return _s3(parts), (parts.netloc.rsplit("@", 1)[-1] + parts.path).rstrip("/"), True
        fs, root = pafs.FileSystem.from_uri(location)
        return fs, root.rstrip("/"), object_store or fs.type_name in ("s3", "gcs", "abfs")
    except (ValueError, OSError) as e:  # pyarrow's ArrowInvalid is a ValueError
        if "Unrecognized filesystem type" not in str(e) and "not supported" not in str(e).lower():
            raise RunFolderError(f"{redact_uri(location)}: cannot open: {str(e).splitlines()[0]}") from e
    try:
        import fsspec
    except ImportError as e:
        raise RunFolderError(f"{redact_uri(location)}: no file system for {scheme}:// (pyarrow has none; "
                             f"install fsspec and its {scheme} implementation)") from e
    try:
        fs, root = fsspec.core.url_to_fs(location)
    except (ImportError, ValueError) as e:
        raise RunFolderError(f"{redact_uri(location)}: no file system for {scheme}:// ({e})") from e
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), str(root).rstrip("/"), object_store


def _s3(parts):
    """An S3 file system from an s3:// URI. Query parameters as pyarrow's (region, scheme,
    endpoint_override, ...); the endpoint also from AWS_ENDPOINT_URL(_S3); credentials only from
    the standard places (env, ~/.aws, instance roles), never from the URI's user part."""
    import pyarrow.fs as pafs

    if parts.username or parts.password:
        raise RunFolderError(f"{redact_uri(urlunsplit(parts))}: put S3 credentials in the environment "
                             f"(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or ~/.aws, not in the URI")
    query = dict(parse_qsl(parts.query))
    kwargs: dict[str, Any] = {
        # Fail fast on a wrong endpoint instead of the SDK's long retries (the store's own retries
        # still apply to throttling once connected).
        "connect_timeout": float(query.pop("connect_timeout", 5)),
        "request_timeout": float(query.pop("request_timeout", 60)),
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=int(query.pop("max_attempts", 3))),
        # Small objects (parts, checkpoint segments, the manifest) go up in one PutObject instead of a
        # three-request multipart upload; large ones still use multipart.
        "allow_delayed_open": True,
    }
    endpoint = query.pop("endpoint_override", None) or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        ep = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
        kwargs["endpoint_override"] = ep.netloc or endpoint
        if ep.scheme:
            kwargs["scheme"] = ep.scheme
    for name in ("region", "scheme"):
        if name in query:
            kwargs[name] = query.pop(name)
    if "force_virtual_addressing" in query:
        kwargs["force_virtual_addressing"] = query.pop("force_virtual_addressing").lower() in ("1", "true")
    if query:
        raise RunFolderError(f"{redact_uri(urlunsplit(parts))}: unknown S3 URI parameter(s): {', '.join(sorted(query))}")
    return pafs.S3FileSystem(**kwargs)
