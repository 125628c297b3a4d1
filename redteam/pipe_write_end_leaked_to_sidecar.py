"""A pipe's write end leaks into a long-lived forked sidecar: the parent's read-to-EOF never ends.

Scenario: a ResultCollector actor creates `r, w = os.pipe()`, then starts its metrics sidecar
(`multiprocessing` fork context: a loop that waits on a stop Event and wakes every few seconds),
then forks the scoring child, which writes its results into `w` and exits. The parent closes its
own copy of `w` and reads until end-of-file (`while chunk := os.read(r, 65536)`). The sidecar was
forked while `w` was open, so it inherited a copy of the write end and never closes it: the
parent's read never sees EOF although the writer finished long ago. The sidecar is alive (wakes
every 5 s) but never writes the pipe.

Mechanism: a read on a pipe whose writer exited, kept open by a write end inherited (leaked over
fork) into an unrelated live process that will never write or close it.
Truth: hang; culprit the leaked write end — the sidecar holds it (pid of the sidecar in the pipe's
writers), created by ResultCollector starting the sidecar before the pipe was private (fix: close
`w` in the sidecar / create the pipe after starting it / use a length or sentinel instead of EOF).
The parent's `os.read` is the visible wait; naming the sidecar as an idle poller that will finish
is wrong.
"""
import multiprocessing as mp
import os
import time

import ray


def _sidecar(stop):
    while not stop.wait(5):
        pass


@ray.remote(num_cpus=0.1)
class ResultCollector:
    def collect(self):
        r, w = os.pipe()
        ctx = mp.get_context("fork")
        self.stop = ctx.Event()
        self.sidecar = ctx.Process(target=_sidecar, args=(self.stop,), name="metrics-sidecar", daemon=True)
        self.sidecar.start()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            for i in range(200):
                os.write(w, f"score {i} {i * 0.5}\n".encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        print("READY: scorer exited; reading results to EOF", flush=True)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
            time.sleep(0.01)
        return data.count(b"\n")


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    c = ResultCollector.remote()
    print(ray.get(c.collect.remote()))


if __name__ == "__main__":
    main()
