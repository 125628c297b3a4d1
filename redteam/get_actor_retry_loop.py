"""Driver polls ray.get_actor() in a retry loop for a named actor created in another namespace.

Mechanism: a detached-style 'feature_store' actor is created with namespace='features'; the driver
(namespace default anonymous) looks it up with ray.get_actor('feature_store') every 0.5 s, catching
ValueError, forever. The actor is alive and idle. Truth: culprit = the driver (wrong namespace in
the lookup); nothing is blocked in Ray; it is a client-side poll loop.
"""
import os
import time

import ray


@ray.remote(num_cpus=0.1)
class FeatureStore:
    def get(self, k):
        return k

def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    FeatureStore.options(name="feature_store", namespace="features", lifetime=None).remote()
    print("READY: driver polls ray.get_actor('feature_store') (actor is in namespace 'features')", flush=True)
    while True:
        try:
            store = ray.get_actor("feature_store")
            break
        except ValueError:
            time.sleep(0.5)
    print(ray.get(store.get.remote(1)))

if __name__ == "__main__":
    main()
