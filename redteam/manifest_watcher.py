"""Healthy: the driver watches a folder for shard files that a writer actor produces; no Ray call links them.

Scenario: the driver starts ShardWriter.write_all (fire and forget: the ref is kept, never
waited on) and then polls the output folder every 5 s until 30 shards exist, logging nothing.
The writer compresses generated data (zlib level 9, a few seconds per shard here) and writes one
file per shard. The driver's stack is the same sleep line in every sample; the only progress is
the writer's CPU and the files appearing.
Truth: no hang (the writer works; the driver's condition — the file count — grows every few seconds).
"""
# redteam-settle: 25
import os
import tempfile
import time
import zlib

import ray


@ray.remote(num_cpus=1)
class ShardWriter:
    def write_all(self, out: str, shards: int) -> int:
        for shard in range(shards):
            blob = b"".join(str(i * shard).encode() for i in range(600_000))
            with open(os.path.join(out, f"part-{shard:04d}.z"), "wb") as fh:
                fh.write(zlib.compress(blob * 4, 9))
        return shards


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    out = tempfile.mkdtemp(prefix="manifest_")
    writer = ShardWriter.remote()
    pending = writer.write_all.remote(out, 30)
    print("READY watching", out, flush=True)
    while len(os.listdir(out)) < 30:
        time.sleep(5)
    print("all shards written", ray.get(pending))


if __name__ == "__main__":
    main()
