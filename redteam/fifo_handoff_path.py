"""A feature exporter opens a named pipe for reading; the writer task wrote to a different path (run id padded).

Scenario: FeatureSink.drain creates `<root>/run-7/features.fifo` (os.mkfifo) and opens it for
reading; open() of a FIFO blocks until some process opens it for writing. The producer task
builds its path with `f"run-{run_id:03d}"` → `<root>/run-007/features.fifo`, creates that
directory, writes its rows to a regular file there and finishes (SUCCEEDED). Nobody will ever
open the FIFO for writing: the sink's thread stays in open(), in the kernel (fifo_open).

Mechanism: a blocking open() of a FIFO with no writer; the only writer of the job finished
after writing elsewhere (path mismatch).
Truth: culprit the producer task's path (`run-{run_id:03d}` vs `run-{run_id}`), a finished task;
FeatureSink is the victim. Fix: one helper builds the path for both ends; open the FIFO with
O_NONBLOCK and a timeout, or check the writer's output.
"""
import os
import tempfile

import ray


@ray.remote(num_cpus=0.1)
class FeatureSink:
    def prepare(self, root: str, run_id: int) -> str:
        d = os.path.join(root, f"run-{run_id}")
        os.makedirs(d, exist_ok=True)
        self.path = os.path.join(d, "features.fifo")
        os.mkfifo(self.path)
        return self.path

    def drain(self) -> int:
        with open(self.path) as fifo:
            return sum(1 for _ in fifo)


@ray.remote(num_cpus=0.1)
def produce(root: str, run_id: int) -> str:
    d = os.path.join(root, f"run-{run_id:03d}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "features.fifo")
    with open(path, "w") as out:
        for i in range(1000):
            out.write(f"{i},{i * 0.5}\n")
    return path


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    root = tempfile.mkdtemp(prefix="features_")
    sink = FeatureSink.remote()
    ray.get(sink.prepare.remote(root, 7))
    rows = sink.drain.remote()
    print("producer wrote", ray.get(produce.remote(root, 7)))
    print("READY draining", flush=True)
    print(ray.get(rows))


if __name__ == "__main__":
    main()
