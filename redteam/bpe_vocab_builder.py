"""BPE vocabulary training in pure Python: logged warm-up, then minutes of silent merges (healthy).

Scenario: a tokenizer-training task counts word frequencies over a synthetic corpus (logging
each of 20 shards), then learns 80 BPE merges in pure Python: each merge counts all adjacent
symbol pairs over the vocabulary (a hot loop in one function, holding the GIL, 100 % CPU) and
rewrites the words. No output until the end (~4-5 min on this machine); the driver waits in
ray.get.

Mechanism: none -- a healthy pure-Python loop that looks like a spin: py-spy shows the thread
active with the GIL in every sample, in the same two or three lines (_pair_counts / _merge);
what advances is loop state (`merges` length, the merge index `m`), visible only in locals.
Truth: NOT hung. Expected no-hang or inconclusive ("busy in a loop, cannot tell from the stacks"),
never hang / busy-loop.
"""
# redteam-settle: 25
import collections
import os

import ray


def _pair_counts(vocab: dict[tuple[str, ...], int]) -> collections.Counter:
    pairs: collections.Counter = collections.Counter()
    for word, freq in vocab.items():
        for a, b in zip(word, word[1:], strict=False):
            pairs[a, b] += freq
    return pairs


def _merge(vocab: dict[tuple[str, ...], int], pair: tuple[str, str]) -> dict[tuple[str, ...], int]:
    out: dict[tuple[str, ...], int] = {}
    joined = pair[0] + pair[1]
    for word, freq in vocab.items():
        i, new = 0, []
        while i < len(word):
            if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
                new.append(joined)
                i += 2
            else:
                new.append(word[i])
                i += 1
        out[tuple(new)] = out.get(tuple(new), 0) + freq
    return out


@ray.remote(num_cpus=1)
def train_bpe(shards: int, num_merges: int) -> int:
    import random
    rng = random.Random(0)  # noqa: S311 - a synthetic corpus, not cryptography
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    counts: collections.Counter = collections.Counter()
    for s in range(shards):
        for _ in range(20_000):
            counts["".join(rng.choice(letters[: 8 + s % 18]) for _ in range(rng.randint(3, 11)))] += 1
        print(f"shard {s}: {len(counts)} distinct words", flush=True)
    vocab = {tuple(w) + ("</w>",): f for w, f in counts.items()}
    print(f"READY learning {num_merges} merges over {len(vocab)} words", flush=True)
    merges = []
    for _m in range(num_merges):
        pairs = _pair_counts(vocab)
        if not pairs:
            break
        best = max(pairs, key=pairs.__getitem__)
        vocab = _merge(vocab, best)
        merges.append(best)
    return len(merges)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    print(ray.get(train_bpe.remote(20, 80)))


if __name__ == "__main__":
    main()
