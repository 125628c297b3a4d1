"""A parent joins its worker process before sending it the config the worker waits for on a Pipe.

Scenario: ShardConverter.convert (a sync actor) converts a shard in a forked child
(`multiprocessing`, fork context) so a crash cannot take the actor down. It makes
`parent_conn, child_conn = mp.Pipe()`, starts the child, and the child's first line is
`cfg = conn.recv()` (the conversion settings). After a refactor the parent sends them only after
`proc.join()` ("send the settings once the worker is up" became "once it is done"): the child waits
in `Connection.recv` for bytes only the parent would send, the parent waits in `Process.join`
(os.waitpid) for the child to exit.
Mechanism: a parent/child wait cycle over a multiprocessing Pipe: the joiner is the only sender.
Truth: hang; culprit ShardConverter, its `proc.join()` line (before `parent_conn.send(cfg)`); the
child (in `conn.recv()`) is the victim. Fix: send before join (and join with a timeout).
Driver in ray.get(convert).
"""
import multiprocessing as mp
import os

import ray


def convert_worker(conn, shard):
    cfg = conn.recv()
    rows = [(shard, i, i * cfg["scale"]) for i in range(cfg["rows"])]
    conn.send(len(rows))
    conn.close()


@ray.remote(num_cpus=0.1)
class ShardConverter:
    def convert(self, shard):
        ctx = mp.get_context("fork")
        parent_conn, child_conn = ctx.Pipe()
        proc = ctx.Process(target=convert_worker, args=(child_conn, shard), name=f"convert-{shard}")
        proc.start()
        cfg = {"scale": 3, "rows": 10_000}
        proc.join()
        parent_conn.send(cfg)
        return parent_conn.recv()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    conv = ShardConverter.remote()
    ref = conv.convert.remote(7)
    print("READY: driver -> ShardConverter.convert (joins the child before sending its config)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
