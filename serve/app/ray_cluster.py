"""Finding and joining Ray clusters safely: Ray's own token authentication kept on, stale
address files detected in a second instead of retried forever.

Authentication (Ray >= 2.5x): a new local cluster started by `ray.init()` turns token auth on and
writes a token to ~/.ray/auth_token. `ray start --head` turns it on only if a token already
exists, and `ray.init(address=<explicit>)` never turns it on by itself. So:
- before `ray start --head` we make sure a token exists and ask for token mode (`start_env`);
- to join a cluster at an explicit address, provide its token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH,
  or ~/.ray/auth_token — `ray get-auth-token` on the head prints it); `prepare_auth` then sets
  RAY_AUTH_MODE=token. An explicit RAY_AUTH_MODE (tests set `disabled`) is always respected.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

AUTH_MODE = "RAY_AUTH_MODE"


class StaleRayAddressError(ConnectionError):
    """The Ray address file names a cluster that no longer answers."""


def token_path() -> Path:
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


def token_provided() -> bool:
    """A token the user gave us: RAY_AUTH_TOKEN, or a non-empty token file."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    p = token_path()
    return p.is_file() and p.stat().st_size > 0


def ensure_token() -> Path:
    """Make sure a token exists for a cluster we start ourselves (Ray's own generator, mode 0600)."""
    p = token_path()
    if not os.environ.get("RAY_AUTH_TOKEN") and not (p.is_file() and p.stat().st_size > 0):
        from ray._private.authentication.authentication_token_generator import generate_new_authentication_token

        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(generate_new_authentication_token())
    return p


def prepare_auth(address: str | None) -> str:
    """Set RAY_AUTH_MODE for this process before ray.init; never disables. Returns the mode in effect
    ('' = Ray decides: token for a new local cluster, the token's presence for 'auto')."""
    mode = os.environ.get(AUTH_MODE, "")
    if mode:
        return mode.lower()
    if address and address not in ("auto", "local") and token_provided():
        _enable_token_auth()
        return "token"
    return ""


def _enable_token_auth() -> None:
    # Setting the variable is not enough once Ray is imported: its C++ config is cached and must be
    # re-read, else this process sends no token and the cluster answers InvalidAuthToken.
    os.environ[AUTH_MODE] = "token"
    _refresh_ray_config()


def _refresh_ray_config() -> None:
    from ray._raylet import Config

    Config.initialize("")


def start_env() -> dict[str, str]:
    """Environment for `ray start --head`: token auth on (with a token) unless explicitly disabled."""
    env = dict(os.environ)
    if env.get(AUTH_MODE, "").lower() != "disabled":
        ensure_token()
        # Only the child's environment: this process then joins with address="auto", where Ray
        # itself finds the token and turns token mode on (refreshing its cached config).
        env[AUTH_MODE] = "token"
    return env


def address_file() -> Path:
    from ray._common.utils import get_ray_address_file

    return Path(get_ray_address_file(None))


def gcs_answers(address: str, timeout_s: float = 2.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def live_local_address() -> str | None:
    """The address in Ray's address file if that cluster answers; None if there is none.
    Raises StaleRayAddressError when the file names a dead cluster (Ray would retry it for minutes)."""
    if os.environ.get("RAY_ADDRESS"):
        address = os.environ["RAY_ADDRESS"]
        source = "RAY_ADDRESS"
    else:
        f = address_file()
        if not f.is_file():
            return None
        address = f.read_text(encoding="utf-8").strip()
        source = str(f)
        if not address:
            return None
    if address.startswith("ray://") or gcs_answers(address):
        return address
    raise StaleRayAddressError(f"{source} names Ray cluster {address}, which does not answer (stale; "
                               f"`ray stop` or remove the file)")


def forget_stale_address() -> None:
    """Drop a stale address file so Ray starts or finds the right cluster (the file is Ray's cache)."""
    try:
        live_local_address()
    except StaleRayAddressError:
        if os.environ.get("RAY_ADDRESS"):
            raise  # the user named it: say so rather than start something else
        address_file().unlink(missing_ok=True)
