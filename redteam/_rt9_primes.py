"""Helper for healthy_async_process_pool_score.py (a module, so the process pool can pickle the function)."""
import time


def count_primes(seconds):
    end = time.time() + seconds
    n, found, chunk = 2, 0, 0
    while time.time() < end:
        for k in range(n, n + 2000):
            if all(k % d for d in range(2, int(k ** 0.5) + 1)):
                found += 1
        n += 2000
        chunk += 1
    return found, chunk
