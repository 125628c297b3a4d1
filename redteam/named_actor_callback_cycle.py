"""A scheduler waits for a worker that reports progress back to the scheduler: an actor call cycle.

Mechanism: Scheduler (a default actor: one call at a time) is registered by name. Its dispatch()
sends a job to a Worker and waits for it with ray.get. Worker.run() finds the scheduler by name
(ray.get_actor("scheduler")) and calls report_progress() with ray.get every few items; that call
is queued behind the running dispatch(), which waits for run(), which waits for report_progress():
neither can move. The first dispatch has no progress to report (small job) and returns.
Truth: a cycle Scheduler.dispatch -> Worker.run -> Scheduler.report_progress (queued); culprits
Scheduler and Worker (the synchronous callback into a busy single-threaded actor); fix: do not
ray.get the callback (fire and forget), make Scheduler threaded/async (max_concurrency>1), or have
dispatch poll without blocking the actor.
"""
import os
import time

import ray

REPORT_EVERY = 5


@ray.remote(num_cpus=0.1)
class Scheduler:
    def __init__(self):
        self.progress = {}

    def dispatch(self, worker, job_id, items):
        return ray.get(worker.run.remote(job_id, items))

    def report_progress(self, job_id, done):
        self.progress[job_id] = done
        return True


@ray.remote(num_cpus=0.1)
class Worker:
    def run(self, job_id, items):
        scheduler = ray.get_actor("scheduler")
        out = []
        for i, item in enumerate(items, 1):
            out.append(item * item)
            if i % REPORT_EVERY == 0:
                ray.get(scheduler.report_progress.remote(job_id, i))
        return sum(out)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    scheduler = Scheduler.options(name="scheduler").remote()
    worker = Worker.remote()
    print("job 1:", ray.get(scheduler.dispatch.remote(worker, 1, list(range(3)))), flush=True)
    stuck = scheduler.dispatch.remote(worker, 2, list(range(20)))
    time.sleep(2)
    print("READY: driver -> Scheduler.dispatch -> Worker.run -> Scheduler.report_progress (queued)", flush=True)
    print("job 2:", ray.get(stuck), flush=True)


if __name__ == "__main__":
    main()
