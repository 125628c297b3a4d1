"""An actor's constructor registers with a coordinator that calls back into the actor being built.

Scenario: a ShardServer's `__init__` registers itself with a Registry actor (`ray.get(registry.
register.remote(me, name))`, `me` = its own handle from the runtime context). Registry.register
"health-checks" the new member before accepting it: `ray.get(server.ping.remote())`. A call to an
actor runs only after its constructor has returned, and the constructor waits for register: the
ping sits queued on ShardServer (PENDING_ARGS/queued, the actor is still in creation), Registry's
thread in ray.get, ShardServer's creation task in ray.get. The driver waits in ray.get on
ShardServer.ready.

Mechanism: a wait-for cycle through actor creation: ShardServer.__init__ → Registry.register →
ShardServer.ping, which cannot start before __init__ returns.
Truth: culprit ShardServer.__init__ (the blocking handshake in the constructor; Registry.register is
its victim). Fix: register from a method after construction (or make the health check
asynchronous / not call back into a member that is still being created).
"""
import os

import ray


@ray.remote(num_cpus=0.25)
class Registry:
    def __init__(self):
        self.members = {}

    def register(self, server, name):
        print(f"registry: health-checking {name} before accepting it", flush=True)
        assert ray.get(server.ping.remote()) == "pong"
        self.members[name] = server
        return len(self.members)


@ray.remote(num_cpus=0.25)
class ShardServer:
    def __init__(self, registry, name):
        me = ray.get_runtime_context().current_actor
        print(f"{name}: registering with the registry", flush=True)
        self.slot = ray.get(registry.register.remote(me, name))
        self.name = name

    def ping(self):
        return "pong"

    def ready(self):
        return self.slot


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    reg = Registry.remote()
    srv = ShardServer.remote(reg, "shard-0")
    ref = srv.ready.remote()
    print("READY: driver -> ShardServer.ready (its __init__ registers with a registry that pings it)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
