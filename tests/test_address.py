"""The dashboard address read from the GCS: the raw gRPC call agrees with Ray's protobufs and client."""

from __future__ import annotations

import time

import pytest
from conftest import LocalCluster

from debug_hang.collect.address import (
    _read_dashboard_grpc,
    _read_dashboard_ray,
    kv_get_request,
    kv_get_value,
    parse_address,
    resolve_dashboard,
)
from debug_hang.errors import UnreachableError

gcs_service_pb2 = pytest.importorskip("ray.core.generated.gcs_service_pb2")


@pytest.mark.unit
@pytest.mark.parametrize("key,namespace", [(b"dashboard", b"dashboard"), (b"", b""), (b"k" * 300, b"n" * 20000)])
def test_the_request_is_byte_for_byte_rays_own(key: bytes, namespace: bytes) -> None:
    ours = kv_get_request(key, namespace)
    theirs = gcs_service_pb2.InternalKVGetRequest(key=key, namespace=namespace).SerializeToString()
    assert ours == theirs


@pytest.mark.unit
@pytest.mark.parametrize("code,message,value", [(0, "", b"127.0.0.1:8265"), (0, "", b""), (17, "key not found", b""),
                                                (5, "x" * 500, b"v" * 70000)])
def test_replies_serialized_by_ray_are_read(code: int, message: str, value: bytes) -> None:
    reply = gcs_service_pb2.InternalKVGetReply(status=gcs_service_pb2.GcsStatus(code=code, message=message), value=value)
    got_code, got_value = kv_get_value(reply.SerializeToString())
    assert got_code == code and (got_value or b"") == value


@pytest.mark.unit
@pytest.mark.parametrize("junk", [b"\x12\x10short", b"\x0a", b"\x0b\x00", b"\xff" * 12])
def test_a_reply_that_is_not_one_is_refused(junk: bytes) -> None:
    with pytest.raises(ValueError):
        kv_get_value(junk)


@pytest.mark.integration
def test_both_paths_read_the_same_dashboard_of_a_live_cluster(ray_cluster: LocalCluster) -> None:
    assert _read_dashboard_grpc(ray_cluster.gcs, 5.0) == _read_dashboard_ray(ray_cluster.gcs, 5.0)
    resolved = resolve_dashboard(parse_address(ray_cluster.gcs))
    assert resolved.dashboard_url == ray_cluster.dashboard


@pytest.mark.unit
def test_a_port_that_accepts_but_never_answers_fails_within_the_timeout(silent_port: int) -> None:
    start = time.monotonic()
    with pytest.raises(UnreachableError, match="does not answer|did not answer"):
        resolve_dashboard(parse_address(f"127.0.0.1:{silent_port}"), timeout_s=1.0)
    assert time.monotonic() - start < 4.0
