"""Cluster addresses: the default-port rule, a fast reachability check, the dashboard URL.

Ray's own clients wait 30-40 s for a GCS that is not there; a responder should learn in two
seconds that the address is wrong. Every call here is bounded.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

from debug_hang.errors import UnreachableError, UsageError
from debug_hang.timeouts import call_with_timeout

DEFAULT_GCS_PORT = 6379  # Ray's default; an address without a port means this port
# A healthy GCS accepts a TCP connection in milliseconds; 3 s covers a loaded head node.
CONNECT_TIMEOUT_S = 3.0
# Reading the dashboard URL from the GCS is one key-value read.
GCS_READ_TIMEOUT_S = 5.0

_HOSTPORT = re.compile(r"^(?P<host>\[[0-9a-fA-F:]+\]|[A-Za-z0-9._-]+)(?::(?P<port>\d{1,5}))?$")


@dataclass(frozen=True)
class ClusterAddress:
    """A GCS address (`host:port`) and, once known, the dashboard's HTTP URL."""

    host: str
    port: int
    dashboard_url: str | None = None

    @property
    def gcs(self) -> str:
        return f"{self.host}:{self.port}"


def parse_address(raw: str | None) -> ClusterAddress:
    """Parse ADDRESS as the seed did: `$RAY_ADDRESS` when empty, port 6379 when none is given.

    Accepts `host`, `host:port`, `ray://host:port` (client port ignored: the GCS port is assumed
    6379 then) and `http://host:port` (a dashboard URL: the GCS is then assumed on 6379).
    """
    text = (raw or os.environ.get("RAY_ADDRESS") or "").strip()
    if not text:
        raise UsageError("no cluster address: pass ADDRESS or set RAY_ADDRESS (host or host:port)")
    if text == "auto":
        text = "127.0.0.1"
    dashboard_url = None
    if text.startswith(("http://", "https://")):
        dashboard_url = text.rstrip("/")
        text = re.sub(r"^https?://", "", text).split("/", 1)[0]
        host = text.rsplit(":", 1)[0] if ":" in text else text
        return ClusterAddress(host=host, port=DEFAULT_GCS_PORT, dashboard_url=dashboard_url)
    if text.startswith("ray://"):
        text = text[len("ray://") :].split(":", 1)[0]
    match = _HOSTPORT.match(text)
    if not match:
        raise UsageError(f"invalid address {text!r}: expected host or host:port")
    port = int(match.group("port") or DEFAULT_GCS_PORT)
    if not 0 < port < 65536:
        raise UsageError(f"invalid port in address {text!r}")
    return ClusterAddress(host=match.group("host").strip("[]"), port=port)


def check_reachable(address: ClusterAddress, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise UnreachableError within `timeout_s` when nothing listens at the GCS address.

    For a dashboard URL (http://host:port) the dashboard port is checked instead.
    """
    host, port, what = address.host, address.port, f"the Ray GCS at {address.gcs}"
    if address.dashboard_url:
        netloc = re.sub(r"^https?://", "", address.dashboard_url).split("/", 1)[0]
        port = int(netloc.rsplit(":", 1)[1]) if ":" in netloc else 80
        what = f"the Ray dashboard at {address.dashboard_url}"
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as exc:
        raise UnreachableError(
            f"cannot reach {what} ({exc.strerror or exc}); "
            f"an address without a port means port {DEFAULT_GCS_PORT} — pass host:port if the "
            "head uses another one, and run this where the head's port is reachable"
        ) from None


def resolve_dashboard(address: ClusterAddress, timeout_s: float = GCS_READ_TIMEOUT_S) -> ClusterAddress:
    """Return `address` with its dashboard URL, read from the GCS (bounded by `timeout_s`)."""
    if address.dashboard_url:
        return address

    def read() -> str | None:
        from ray._private import ray_constants
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        client = GcsClient(address=address.gcs)
        value = client.internal_kv_get(
            ray_constants.DASHBOARD_ADDRESS.encode(),
            namespace=ray_constants.KV_NAMESPACE_DASHBOARD,
            timeout=timeout_s,
        )
        return value.decode() if value else None

    try:
        url = call_with_timeout(read, timeout_s + 1.0, what=f"reading the dashboard address from {address.gcs}")
    except TimeoutError as exc:
        raise UnreachableError(f"{exc}: the GCS at {address.gcs} accepts connections but does not answer") from None
    except Exception as exc:  # noqa: BLE001 - Ray raises several unrelated types here
        raise UnreachableError(f"the GCS at {address.gcs} did not answer: {exc}") from None
    if not url:
        raise UnreachableError(
            f"the cluster at {address.gcs} has no dashboard: start the head with ray[default] "
            "installed (the State API is served by the dashboard)"
        )
    if not url.startswith("http"):
        url = "http://" + url
    return ClusterAddress(host=address.host, port=address.port, dashboard_url=url)
