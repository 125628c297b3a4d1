"""Uploader and server both wait to read from one TCP connection: the server reads to EOF, the client awaits a reply.

Scenario: BlobSink (an actor) accepts one connection and reads until the peer closes
(`while chunk := conn.recv(...)`), then replies with the SHA-256 of what it got. The `upload`
task connects, sends its 2 MB payload with sendall() and waits for the digest with recv() —
it never half-closes its write side (no `shutdown(SHUT_WR)`), so the server never sees EOF.
Both sit in recv() on the two ends of one loopback connection; the driver waits on both.

Mechanism: a framing deadlock on a socket: each end waits to read from the other (a wait-for
cycle through one connection, peer processes of the same job).
Truth: culprit the protocol between `upload` (never signals end of data) and BlobSink.serve_one
(reads to EOF); a right diagnosis names both ends of the same connection, waiting on each other.
Fix: length-prefix the payload, or `sock.shutdown(socket.SHUT_WR)` after sendall.
"""
import hashlib
import os
import socket

import ray


@ray.remote(num_cpus=0.1)
class BlobSink:
    def __init__(self):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(4)

    def address(self):
        return self.srv.getsockname()

    def serve_one(self) -> int:
        conn, _ = self.srv.accept()
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
        data = b"".join(chunks)
        conn.sendall(hashlib.sha256(data).hexdigest().encode())
        conn.close()
        return len(data)


@ray.remote(num_cpus=0.1)
def upload(address, size: int) -> str:
    s = socket.create_connection(tuple(address))
    s.sendall(os.urandom(size))
    digest = s.recv(64)
    s.close()
    return digest.decode()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    sink = BlobSink.remote()
    address = ray.get(sink.address.remote())
    served = sink.serve_one.remote()
    sent = upload.remote(address, 2 << 20)
    print("READY uploading", flush=True)
    print(ray.get([served, sent]))


if __name__ == "__main__":
    main()
