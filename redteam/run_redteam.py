"""Run each red-team scenario on a loopback cluster and diagnose it like a user would.

Usage: python redteam/run_redteam.py PORT NAME [NAME...]   (outputs /tmp/rt_<name>)
"""
import subprocess
import sys
import time
from pathlib import Path

from ray.job_submission import JobSubmissionClient

from debug_hang import localcluster

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

def main() -> None:
    port, names = int(sys.argv[1]), sys.argv[2:]
    cluster = localcluster.start(port)
    try:
        client = JobSubmissionClient(cluster.dashboard)
        for name in names:
            sub = client.submit_job(entrypoint=f"python {name}.py", runtime_env={"working_dir": str(HERE)})
            try:
                localcluster.wait_for(lambda s=sub: "READY" in client.get_job_logs(s)
                                      or client.get_job_status(s).is_terminal(), 120, name)
                job_id = str(client.get_job_info(sub).job_id)
                localcluster.wait_quiet(cluster, job_id, quiet_s=3, max_s=20)
                time.sleep(8 if not name.startswith("healthy") else 25)
                out = f"/tmp/rt_{name}"
                subprocess.run(["rm", "-rf", out])
                t0 = time.monotonic()
                r = subprocess.run([str(ROOT / "scripts/diagnose_ray_hang.sh"), cluster.gcs, out, "--job-id", job_id],
                                   env=cluster.env(), capture_output=True, text=True, timeout=200)
                print(f"=== {name} rc={r.returncode} {time.monotonic()-t0:.0f}s status={client.get_job_status(sub)}")
                print(r.stdout[-2500:], r.stderr[-800:], flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"=== {name} FAILED {e}: {client.get_job_logs(sub)[-800:]}", flush=True)
            finally:
                localcluster.stop_job(cluster, localcluster.SubmittedJob(sub, None))
    finally:
        localcluster.stop(cluster)

if __name__ == "__main__":
    main()
