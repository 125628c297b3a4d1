"""A document pipeline: the parser stage raises on one malformed record; the embedder waits forever.

Mechanism: Parser.run() reads records and puts each parsed document into a bounded
ray.util.queue.Queue; Embedder.consume() takes `expected` documents from it. Record 6 of the
batch has no "text" key: Parser.run raises KeyError after five puts, its actor stays ALIVE and
idle, and nobody fetches run()'s result, so the error only reaches the driver log as an
"Unhandled error". Embedder sits in queue.get() (no timeout, no sentinel) for the sixth document;
the driver waits in ray.get on the embedder.
Truth: culprit Parser (Parser.run FAILED: KeyError: 'text' at `doc = {"id": rec["id"], "body":
rec["text"].strip()}`); the embedder and the driver are victims. Fix: catch per record (or put an
error/sentinel into the queue in a finally block) and fetch run()'s result; give get() a timeout.
"""
import os
import time

import ray
from ray.util.queue import Queue

RECORDS = [{"id": i, "text": f"  document number {i} about topic {i % 3}  "} for i in range(12)]
RECORDS[5] = {"id": 5, "txt": "a record written by the old exporter"}  # the malformed one


@ray.remote(num_cpus=0.1)
class Parser:
    def __init__(self, queue):
        self.queue = queue

    def run(self, records):
        for rec in records:
            doc = {"id": rec["id"], "body": rec["text"].strip()}
            self.queue.put(doc)
            print(f"[parser] queued document {doc['id']}", flush=True)
        return len(records)


@ray.remote(num_cpus=0.1)
class Embedder:
    def __init__(self, queue):
        self.queue = queue

    def consume(self, expected):
        vectors = []
        for _ in range(expected):
            doc = self.queue.get()
            vectors.append([len(doc["body"]), sum(map(ord, doc["body"])) % 97])
        return len(vectors)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    queue = Queue(maxsize=4)
    parser, embedder = Parser.remote(queue), Embedder.remote(queue)
    done = embedder.consume.remote(len(RECORDS))
    parser.run.remote(RECORDS)  # fire and forget: its result (and error) is never fetched
    time.sleep(3)
    print("READY: driver -> Embedder.consume -> queue.get (Parser.run raised on record 5)", flush=True)
    print("embedded", ray.get(done), flush=True)


if __name__ == "__main__":
    main()
