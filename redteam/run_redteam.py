"""Run each red-team scenario on a loopback cluster and diagnose it like a user would.

Usage: python redteam/run_redteam.py PORT NAME [NAME...]   (outputs /tmp/rt_<name>; a name given
again runs again, into /tmp/rt_<name>.2, .3, ...). RT_OUT_DIR=/tmp/rt5 puts them under
/tmp/rt5/rt_<name> instead (sessions running side by side keep their outputs apart).

A scenario file may carry header comments read here (never by the tool):
  # redteam-settle: 25          seconds to wait after READY and quiet before diagnosing
                                (default 8; 25 for names starting with "healthy")
  # redteam-ray-start: ARGS     extra `ray start` arguments (shell-split), e.g.
                                --resources='{"accel":2}'; scenarios with the same ARGS share a cluster
Scenarios that do not share ARGS get a cluster each, in the order given.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ray.job_submission import JobSubmissionClient

from debug_hang import localcluster

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT_DIR = os.environ.get("RT_OUT_DIR") or "/tmp"


def header(name: str, key: str) -> str | None:
    m = re.search(rf"^# redteam-{key}: *(.+)$", (HERE / f"{name}.py").read_text(), re.M)
    return m.group(1).strip() if m else None


def settle_of(name: str) -> float:
    value = header(name, "settle")
    return float(value) if value else (25.0 if name.startswith("healthy") else 8.0)


def summary(out: str) -> str:
    try:
        d = json.loads(Path(out, "diagnosis.json").read_text())
    except (OSError, ValueError) as e:
        return f"(no diagnosis.json: {e})"
    causes = [{"pattern": rc.get("pattern"), "confidence": rc.get("confidence"),
               "culprits": [f"{c.get('name') or c.get('class_name')}:{c.get('pid')}" for c in rc.get("culprits") or []]}
              for rc in d.get("root_causes") or []]
    return json.dumps({"verdict": d.get("verdict"), "causes": causes}, default=str)[:1500]


def extra_evidence(cluster: localcluster.LocalCluster, job_id: str, out: str) -> None:
    """Evidence the tool did not necessarily collect, for the people fixing it (never read by the tool):
    two `py-spy dump --locals` rounds 3 s apart of every process the tool dumped, and the dashboard's
    Serve and Data endpoints."""
    try:
        procs = json.loads(Path(out, "stacks.json").read_text()).get("processes") or []
    except (OSError, ValueError):
        procs = []
    pids = sorted({int(p["pid"]) for p in procs if p.get("pid")})
    spy = str(Path(sys.executable).parent / "py-spy")
    with open(Path(out, "redteam_locals.txt"), "w") as fh:
        for round_ in range(2):
            for pid in pids:
                try:
                    r = subprocess.run([spy, "dump", "--locals", "--pid", str(pid)], capture_output=True,
                                       text=True, timeout=15)
                    fh.write(f"=== round {round_} pid {pid}\n{r.stdout}{r.stderr}\n")
                except subprocess.TimeoutExpired:
                    fh.write(f"=== round {round_} pid {pid}: timeout\n")
            time.sleep(3)
    serve_logs = Path(cluster.temp_dir, "session_latest", "logs", "serve")
    if serve_logs.is_dir():
        subprocess.run(["cp", "-r", str(serve_logs), str(Path(out, "redteam_serve_logs"))], timeout=30)
    for name, path in (("serve_applications", "/api/serve/applications/"), ("data_datasets", f"/api/data/datasets/{job_id}")):
        try:
            with urllib.request.urlopen(cluster.dashboard + path, timeout=10) as resp:
                Path(out, f"redteam_{name}.json").write_bytes(resp.read())
        except OSError as e:
            Path(out, f"redteam_{name}.json").write_text(json.dumps({"error": str(e)}))


def run_one(cluster: localcluster.LocalCluster, client: JobSubmissionClient, name: str, out: str) -> None:
    sub = localcluster.submit_job(client, entrypoint=f"python {name}.py", runtime_env={"working_dir": str(HERE)})
    try:
        localcluster.wait_for(lambda s=sub: "READY" in client.get_job_logs(s)
                              or client.get_job_status(s).is_terminal(), 180, name)
        job_id = str(client.get_job_info(sub).job_id)
        localcluster.wait_quiet(cluster, job_id, quiet_s=3, max_s=20)
        time.sleep(settle_of(name))
        subprocess.run(["rm", "-rf", out])
        t0 = time.monotonic()
        r = subprocess.run([str(ROOT / "scripts/diagnose_ray_hang.sh"), cluster.gcs, out, "--job-id", job_id],
                           env=cluster.env(), capture_output=True, text=True, timeout=300)
        print(f"=== {name} rc={r.returncode} {time.monotonic()-t0:.0f}s status={client.get_job_status(sub)}")
        print(r.stdout[-2500:], r.stderr[-800:], flush=True)
        print(f"--- {name} summary: {summary(out)}", flush=True)
        Path(out, "job_driver_log.txt").write_text(client.get_job_logs(sub)[-20000:])
        extra_evidence(cluster, job_id, out)
    except Exception as e:  # noqa: BLE001
        print(f"=== {name} FAILED {e}: {client.get_job_logs(sub)[-800:]}", flush=True)
    finally:
        localcluster.stop_job(cluster, localcluster.SubmittedJob(sub, None))


def main() -> None:
    port, names = int(sys.argv[1]), sys.argv[2:]
    Path(OUT_DIR).mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(header(name, "ray-start") or "", []).append(name)
    for extra, members in groups.items():
        try:
            cluster = localcluster.start(port, extra=shlex.split(extra))
        except Exception as e:  # noqa: BLE001 - report and go on with the next group
            print(f"=== {' '.join(members)} FAILED to start a cluster with {extra!r}: {e}", flush=True)
            continue
        try:
            client = JobSubmissionClient(cluster.dashboard)
            seen: dict[str, int] = {}
            for name in members:
                seen[name] = seen.get(name, 0) + 1
                try:
                    out = str(Path(OUT_DIR, f"rt_{name}" + (f".{seen[name]}" if seen[name] > 1 else "")))
                    run_one(cluster, client, name, out)
                except Exception as e:  # noqa: BLE001 - a submission refused under load: report, go on
                    print(f"=== {name} FAILED to submit: {e}"[:800], flush=True)
        finally:
            localcluster.stop(cluster)


if __name__ == "__main__":
    main()
