"""Cluster addresses: the default-port rule, a fast reachability check, the dashboard URL.

Ray's own clients wait 30-40 s for a GCS that is not there; a responder should learn in two
seconds that the address is wrong. Every call here is bounded.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
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


# Where the GCS keeps the dashboard's address (ray._private.ray_constants DASHBOARD_ADDRESS and
# KV_NAMESPACE_DASHBOARD), and the one GCS method read for it (gcs_service.proto).
DASHBOARD_KEY = b"dashboard"
DASHBOARD_NAMESPACE = b"dashboard"
KV_GET_METHOD = "/ray.rpc.InternalKVGcsService/InternalKVGet"


def _field(number: int, value: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2)."""
    out, n = bytearray([number << 3 | 2]), len(value)
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + value


def kv_get_request(key: bytes, namespace: bytes) -> bytes:
    """InternalKVGetRequest{key = 1, namespace = 2}, serialized as protobuf does (empty fields
    left out; tests/test_address.py checks it against Ray's generated classes)."""
    return (_field(1, key) if key else b"") + (_field(2, namespace) if namespace else b"")


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    """(value, next offset) of the protobuf varint at `buf[i:]`."""
    result = shift = 0
    while i < len(buf) and shift < 64:
        byte = buf[i]
        result, shift, i = result | (byte & 0x7F) << shift, shift + 7, i + 1
        if not byte & 0x80:
            return result, i
    raise ValueError("truncated varint")


def iter_fields(buf: bytes, fixed: bool = False) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of a serialized protobuf message, in order (a repeated
    field once per element): varints as int, length-delimited fields as bytes. Fixed-width fields
    (doubles, fixed32/64) are skipped when `fixed`, refused otherwise."""
    i = 0
    while i < len(buf):
        tag, i = _varint(buf, i)
        wire, number = tag & 7, tag >> 3
        if wire == 0:
            value, i = _varint(buf, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(buf, i)
            if i + size > len(buf):
                raise ValueError("truncated field")
            yield number, buf[i:i + size]
            i += size
        elif fixed and wire in (1, 5):
            i += 8 if wire == 1 else 4
            if i > len(buf):
                raise ValueError("truncated field")
        else:
            raise ValueError(f"unexpected wire type {wire} in field {number}")


def _fields(buf: bytes) -> dict[int, int | bytes]:
    """{field number: value} of a serialized protobuf message of varint and length-delimited
    fields (the last one wins, as protobuf does for singular fields)."""
    return dict(iter_fields(buf))


def kv_get_value(reply: bytes) -> tuple[int, bytes | None]:
    """(status code, value) of a serialized InternalKVGetReply{GcsStatus status = 1 {int32 code =
    1; string message = 2}, bytes value = 2}; raises ValueError on anything else."""
    fields = _fields(reply)
    status, value = fields.get(1, b""), fields.get(2)
    if not isinstance(status, bytes) or not (value is None or isinstance(value, bytes)):
        raise ValueError("not an InternalKVGetReply")
    code = _fields(status).get(1, 0)
    if not isinstance(code, int):
        raise ValueError("not a GcsStatus")
    return code, value


def grpc_call(gcs: str, method: str, request: bytes, timeout_s: float) -> bytes:
    """One raw unary gRPC call to the GCS: serialized request in, serialized reply out (grpc is
    imported in ~50 ms where Ray's client takes ~250 ms to import: this is on every diagnosis'
    critical path)."""
    import grpc  # type: ignore[import-untyped]

    channel = grpc.insecure_channel(gcs, options=[("grpc.enable_http_proxy", 0)])
    try:
        reply: bytes = channel.unary_unary(method)(request, timeout=timeout_s)
    finally:
        channel.close()
    return reply


def kv_get(gcs: str, key: bytes, namespace: bytes, timeout_s: float) -> bytes | None:
    """The value of one key of the GCS's internal key-value store (None when it is not set)."""
    code, value = kv_get_value(grpc_call(gcs, KV_GET_METHOD, kv_get_request(key, namespace), timeout_s))
    if code == 17:  # NotFound (src/ray/common/status.h): the key is not set
        return None
    if code != 0:
        raise ValueError(f"GCS status {code}")
    return value


# GetAllNodeInfoReply{GcsStatus status = 1; repeated GcsNodeInfo node_info_list = 2; ...} and, in
# GcsNodeInfo, bytes node_id = 1 and string raylet_socket_name = 3 (gcs.proto; the same numbers in
# every Ray 2.x, checked against Ray's generated classes in tests/test_address.py).
NODE_INFO_METHOD = "/ray.rpc.NodeInfoGcsService/GetAllNodeInfo"


def node_info_reply(gcs: str, timeout_s: float) -> bytes:
    """The GCS's serialized node table (an empty request asks for every node)."""
    return grpc_call(gcs, NODE_INFO_METHOD, b"", timeout_s)


def raylet_sockets(reply: bytes) -> dict[str, str]:
    """{raylet socket path: node id (hex)} of every node in a serialized GetAllNodeInfoReply."""
    out: dict[str, str] = {}
    for number, value in iter_fields(reply, fixed=True):
        if number != 2 or not isinstance(value, bytes):
            continue
        node = dict(iter_fields(value, fixed=True))
        node_id, socket_name = node.get(1), node.get(3)
        if isinstance(node_id, bytes) and isinstance(socket_name, bytes) and node_id and socket_name:
            out[socket_name.decode("utf-8", "replace")] = node_id.hex()
    return out


def _read_dashboard_grpc(gcs: str, timeout_s: float) -> str | None:
    """The dashboard address from the GCS by one raw gRPC call."""
    value = kv_get(gcs, DASHBOARD_KEY, DASHBOARD_NAMESPACE, timeout_s)
    return value.decode() if value else None


def _read_dashboard_ray(gcs: str, timeout_s: float) -> str | None:
    """The same read through Ray's own GCS client (handles what the raw call does not: auth)."""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]

    value = GcsClient(address=gcs).internal_kv_get(DASHBOARD_KEY, namespace=DASHBOARD_NAMESPACE, timeout=timeout_s)
    return value.decode() if value else None


def resolve_dashboard(address: ClusterAddress, timeout_s: float = GCS_READ_TIMEOUT_S) -> ClusterAddress:
    """Return `address` with its dashboard URL, read from the GCS (bounded by `timeout_s`)."""
    if address.dashboard_url:
        return address

    def read() -> str | None:
        try:
            return _read_dashboard_grpc(address.gcs, timeout_s)
        except Exception:  # noqa: BLE001 - any surprise (auth, a changed message): Ray's own client decides
            return _read_dashboard_ray(address.gcs, timeout_s)

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
