"""A healthy downloader in a fixed back-off, waiting for an API quota: it logs every attempt.

Scenario
    A ``Fetcher`` actor pulls a dataset manifest from a rate-limited API. The API answers "quota
    exhausted" for the first attempts, so ``fetch_manifest`` sleeps a fixed 3 s between attempts and
    prints ``attempt N: quota exhausted, retrying`` each time; attempt 30 succeeds (about 90 s), the
    job then ends successfully. The driver waits in ``ray.get`` for the manifest.

Mechanism
    Nothing is wrong: the retry loop ends. In any window of a second or two the actor is idle in
    ``time.sleep`` inside a loop (the stack of a poll that never ends), writes nothing, finishes no
    task and often logs nothing. What moves is its log: a fresh line that repeats the previous one
    with the next attempt number.

What misleads
    The stack is exactly a poll loop (``time.sleep`` in a ``for`` loop of job code) and every
    signal of the short window is silent, so it reads as ``poll-never-satisfied``. Wrong to call
    it a hang: the last log lines, written seconds ago, count. (A poll that never succeeds and
    logs its attempts looks the same; only a longer watch tells them apart.)

Expected diagnosis
    ``inconclusive``: the poll-loop reading is named, but the Fetcher "last logged an advancing
    counter" (``attempt 4 ... → attempt 5 ...``) seconds before the window: it may still be
    working; diagnose again in a minute. Never ``hang``.
"""

import os
import time

import ray

EXPECTED = {
    "verdict": "inconclusive",
    # no false alarm either way: a second round of samples may see the attempt counter advance (no-hang)
    "verdicts": ["inconclusive", "no-hang"],
    "pattern": None,
    "culprits": [],
    "notes": "healthy: Fetcher.fetch_manifest retries a rate-limited API with a fixed 3 s sleep, "
    "logging 'attempt N: quota exhausted, retrying'; attempt 30 succeeds (~90 s). Stack = a poll "
    "loop; the fresh advancing log lines are the only sign of life.",
}

SUCCEEDS_AT = 30
BACKOFF_S = 3.0


@ray.remote(num_cpus=0.1)
class Fetcher:
    def _try(self, attempt: int) -> dict | None:
        return {"files": 128} if attempt >= SUCCEEDS_AT else None

    def fetch_manifest(self) -> dict:
        attempt = 0
        while True:
            attempt += 1
            manifest = self._try(attempt)
            if manifest is not None:
                return manifest
            print(f"attempt {attempt}: quota exhausted, retrying", flush=True)
            if attempt == 2:
                print("READY: Fetcher in a 3 s back-off, attempt 30 succeeds", flush=True)
            time.sleep(BACKOFF_S)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    fetcher = Fetcher.remote()
    print(f"manifest: {ray.get(fetcher.fetch_manifest.remote())}", flush=True)


if __name__ == "__main__":
    main()
