"""A program that hangs on its own lock: `Cache.refresh` holds a non-reentrant lock and calls
`Cache.get`, which takes the same lock again. interrupted.py records it."""

import threading
import time


class Cache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, int] = {}

    def get(self, key: str) -> int:
        with self._lock:  # second acquire by the same thread: blocks forever
            return self._data.get(key, 0)

    def refresh(self) -> None:
        with self._lock:
            self._data["step"] = self.get("step") + 1


def heartbeat() -> None:
    while True:
        time.sleep(0.5)


def main() -> None:
    threading.Thread(target=heartbeat, name="Thread-1 (heartbeat)", daemon=True).start()
    print("ready", flush=True)
    Cache().refresh()


if __name__ == "__main__":
    main()
