"""A downloader reads its fetch tool's output line by line; the tool is waiting at a license prompt on stdin.

Scenario: DatasetFetcher.fetch runs the dataset CLI (a `python -c` stand-in) with stdin=PIPE and
stdout=PIPE and reads `for line in proc.stdout:` for the "saved to" line. The CLI prints two
progress lines, then asks `Accept the dataset license? [y/N] ` with `input()` (no newline) and
reads stdin. The parent never writes or closes stdin (it meant to pass `--yes`); the child waits
for input, the parent waits for a line the child will print only after the answer.

Mechanism: an interactive prompt on a pipe: child blocked reading stdin whose write end the parent
holds, parent blocked reading the child's stdout (a two-pipe cycle between parent and child).
Truth: culprit DatasetFetcher.fetch (never answers or closes the child's stdin); the child is a
victim. Fix: pass `--yes` / `stdin=subprocess.DEVNULL`, or write the answer and close stdin.
"""
import os
import subprocess
import sys

import ray

CLI = (
    "import sys\n"
    "print('resolving dataset imagenet-mini', flush=True)\n"
    "print('found 3 files, 12 MB', flush=True)\n"
    "ans = input('Accept the dataset license? [y/N] ')\n"
    "if ans.strip().lower() != 'y':\n"
    "    sys.exit(3)\n"
    "print('saved to /tmp/imagenet-mini', flush=True)\n"
)


@ray.remote(num_cpus=0.1)
class DatasetFetcher:
    def fetch(self, name: str) -> str:
        proc = subprocess.Popen([sys.executable, "-c", CLI, name], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        seen = []
        for line in proc.stdout:
            seen.append(line.strip())
            if line.startswith("saved to"):
                break
        proc.wait()
        return seen[-1]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    f = DatasetFetcher.remote()
    ref = f.fetch.remote("imagenet-mini")
    print("READY fetching", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
