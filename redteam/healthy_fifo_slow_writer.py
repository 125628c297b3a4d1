"""A feature exporter opens a named pipe for reading; the writer task prepares its rows first (slow), then opens it.

Scenario: FeatureSink.drain creates `<root>/run-7/features.fifo` and opens it for reading; open()
of a FIFO blocks until a writer opens it. The producer task (same path helper) first loads its
rows from a slow upstream, one page every 2 s for about two minutes, and only then opens the FIFO
and writes them. While it loads, the sink sits in the kernel (fifo_open) and nobody has the write
end open yet.

Mechanism: a blocking open() of a FIFO whose writer is still running (a slow writer, no hang).
Truth: healthy (no-hang, or inconclusive while the writer has not opened it yet); never a hang.
"""
# redteam-settle: 25
import os
import tempfile
import time

import ray


def fifo_path(root: str, run_id: int) -> str:
    return os.path.join(root, f"run-{run_id}", "features.fifo")


@ray.remote(num_cpus=0.1)
class FeatureSink:
    def prepare(self, root: str, run_id: int) -> str:
        self.path = fifo_path(root, run_id)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        os.mkfifo(self.path)
        return self.path

    def drain(self) -> int:
        with open(self.path) as fifo:
            return sum(1 for _ in fifo)


def fetch_page(page: int) -> list[str]:
    time.sleep(2.0)  # a slow upstream
    return [f"{page},{i},{i * 0.5}\n" for i in range(100)]


@ray.remote(num_cpus=0.1)
def produce(root: str, run_id: int, pages: int) -> int:
    rows = []
    for page in range(pages):
        rows.extend(fetch_page(page))
    with open(fifo_path(root, run_id), "w") as out:
        out.writelines(rows)
    return len(rows)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    root = tempfile.mkdtemp(prefix="features_")
    sink = FeatureSink.remote()
    ray.get(sink.prepare.remote(root, 7))
    rows = sink.drain.remote()
    written = produce.remote(root, 7, 60)
    print("READY draining", flush=True)
    print(ray.get(rows), ray.get(written))


if __name__ == "__main__":
    main()
