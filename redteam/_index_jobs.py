"""Pool functions for inverted_index_builder.py (a ProcessPoolExecutor needs them importable)."""
import collections
import zlib


def build_postings(shard: int, inbox) -> int:
    postings: dict[int, list[int]] = collections.defaultdict(list)
    while True:
        batch = inbox.get()
        if batch is None:
            return len(postings)
        for doc_id, text in batch:
            for word in text.split():
                postings[zlib.crc32(word.encode()) % 4096].append(doc_id)


def read_shard(shard: int, outbox, docs: int) -> int:
    for start in range(0, docs, 50):
        outbox.put([(shard * 100_000 + d, f"token{d % 97} token{d % 13} shard{shard}")
                    for d in range(start, min(docs, start + 50))])
    outbox.put(None)
    return docs
