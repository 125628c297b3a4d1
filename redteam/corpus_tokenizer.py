"""Corpus tokenizer whose one thread pool runs out of workers waiting on its own sub-jobs.

Scenario: a preprocessing job tokenizes a corpus before pre-training. CorpusTokenizer keeps one
ThreadPoolExecutor (4 workers) "to bound the threads". encode_corpus() submits one job per
document; a document job splits itself into paragraphs and maps them onto the *same* pool
(_map_paragraphs), waiting with concurrent.futures.wait(). With more documents than workers, all 4
workers end up running document jobs that wait for paragraph jobs queued behind the remaining
documents: no worker is ever free to run them. The actor's method waits in as_completed(); the
driver in ray.get.

Mechanism: a thread pool waiting on itself (nested submission into a bounded executor); the
wait is two calls below the pool job (_encode_document -> _map_paragraphs -> wait).
Truth: culprit CorpusTokenizer (its pool: every ThreadPoolExecutor worker waits in
concurrent.futures.wait on futures of the same pool whose work items are still queued).
Fix: run paragraphs inline in the document job, or give paragraph jobs their own executor.
"""
import concurrent.futures as cf
import os
import re
import zlib

import ray

WORD = re.compile(r"\w+")


@ray.remote(num_cpus=0.2, max_concurrency=2)
class CorpusTokenizer:
    def __init__(self, workers: int = 4, vocab_size: int = 50_000):
        self.pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tokenize")
        self.vocab_size = vocab_size

    def _encode_paragraph(self, text: str) -> list[int]:
        return [zlib.crc32(w.lower().encode()) % self.vocab_size for w in WORD.findall(text)]

    def _map_paragraphs(self, paragraphs: list[str]) -> list[list[int]]:
        futures = [self.pool.submit(self._encode_paragraph, p) for p in paragraphs]
        cf.wait(futures)
        return [f.result() for f in futures]

    def _encode_document(self, doc: str) -> list[int]:
        ids: list[int] = []
        for chunk in self._map_paragraphs([p for p in doc.split("\n\n") if p.strip()]):
            ids.extend(chunk)
        return ids

    def encode_corpus(self, docs: list[str]) -> dict[str, int]:
        lengths: dict[int, int] = {}
        jobs = {self.pool.submit(self._encode_document, d): i for i, d in enumerate(docs)}
        for fut in cf.as_completed(jobs):
            lengths[jobs[fut]] = len(fut.result())
        return {"documents": len(lengths), "tokens": sum(lengths.values())}


def synthetic_corpus(n: int) -> list[str]:
    para = "The quick brown fox jumps over the lazy dog while the model learns tokens. " * 20
    return ["\n\n".join(f"{para} section {i}.{j}" for j in range(8)) for i in range(n)]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    tok = CorpusTokenizer.remote()
    ref = tok.encode_corpus.remote(synthetic_corpus(64))
    print("READY tokenizing 64 documents", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
