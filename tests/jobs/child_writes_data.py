"""A healthy job whose actor's children write data files through their stdout (not a hang: no EXPECTED).

An ``Exporter`` actor runs three children and waits for them, the way export steps do:
  - ``gen | sh -c "gzip -9 -c > OUT/big.csv.gz"``: a Python generator pipes CSV rows into gzip,
    run by a shell whose redirect makes gzip's stdout the compressed data file (binary);
  - a Python child whose stdout is ``OUT/rows.csv``: rows of a dataset (text, and the job's data:
    user emails, amounts);
  - a Python child that inherits the worker's stdout (its .out file under the session's log
    folder) and logs ``exported chunk N/...`` lines: a real log.
All run for RUN_SECONDS and end; the driver waits on the actor's call in ray.get.
Usage: python child_writes_data.py OUT_DIR [RUN_SECONDS]
"""

import os
import shlex
import subprocess
import sys

import ray

GEN = r"""
import sys, time, random
rnd = random.Random(7)
end = time.time() + float(sys.argv[1])
out = sys.stdout
while time.time() < end:
    out.write("".join(f"{rnd.randrange(10**9)},{rnd.random():.6f},{rnd.choice('abcdefgh')}\n" for _ in range(2000)))
    out.flush()
    time.sleep(0.02)
"""
ROWS = r"""
import sys, time
end = time.time() + float(sys.argv[1])
n = 0
while time.time() < end:
    for _ in range(50):
        print(f"{n},user{n}@customer-data.example,{n * 37 % 1000}.{n % 100:02d},DATAROW", flush=True)
        n += 1
    time.sleep(0.05)
"""
LOGGER = r"""
import sys, time
end = time.time() + float(sys.argv[1])
n = 0
while time.time() < end:
    n += 1
    print(f"exported chunk {n}/100000", flush=True)
    time.sleep(0.2)
"""


@ray.remote(num_cpus=0.1)
class Exporter:
    def run(self, out_dir: str, seconds: float) -> int:
        secs = str(seconds)
        with open(os.path.join(out_dir, "rows.csv"), "wb") as rows_out:
            gen = subprocess.Popen([sys.executable, "-c", GEN, secs], stdout=subprocess.PIPE)
            gzip = subprocess.Popen(f"gzip -9 -c > {shlex.quote(os.path.join(out_dir, 'big.csv.gz'))}", shell=True,
                                    stdin=gen.stdout)
            assert gen.stdout is not None
            gen.stdout.close()  # gzip holds the read end
            rows = subprocess.Popen([sys.executable, "-c", ROWS, secs], stdout=rows_out)
            logger = subprocess.Popen([sys.executable, "-c", LOGGER, secs])  # the worker's own stdout
            print("READY", flush=True)
            return sum(p.wait() for p in (logger, rows, gen, gzip))


def main() -> None:
    out_dir = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    exporter = Exporter.remote()
    print("READY", flush=True)
    print(f"exit codes sum {ray.get(exporter.run.remote(out_dir, seconds))}", flush=True)


if __name__ == "__main__":
    main()
