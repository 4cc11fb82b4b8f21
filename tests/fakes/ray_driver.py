"""The Ray job the Ray feed's tests watch: ``python ray_driver.py GCS_ADDRESS MODE ...``.

``mismatch N``: N ``Trainer`` actors, set up the way verl's worker groups are (verl-style
names ``<prefix>Trainer_0:<local rank>``, ``RANK``/``WORLD_SIZE``/``RAY_LOCAL_RANK``/
``RAY_LOCAL_WORLD_SIZE`` in each actor's runtime_env, with a debug setting and a secret
beside them), join one gloo group, then hang in a real collective mismatch: ranks 0..N-2 wait
in ``all_reduce`` (gradients) while the last rank, which got an empty batch, waits in
``all_gather`` (metrics). One more actor, ``victim``, has no rank and blocks outside any
collective; a test kills it to make its traceback fail.

``crash N``: N ``Trainer`` actors set up as above (no victim) step through ``all_reduce``; the
last rank raises at step 3 (a real traceback on the actor's stderr, which Ray writes into its
session logs as ``worker-<id>-<job>-<pid>.err``) and dies. Before dying it forks a child that
keeps its sockets open (as a DataLoader worker forked after the group was made does), so ranks
0..N-2 keep waiting for it in ``all_reduce`` instead of gloo noticing; the child is in the
node's session and dies with it.

``spread IP ...``: one ``Sleeper`` actor on each node named by its IP (Ray's ``node:IP``
resource), blocking outside any collective; with no IP, one ``Sleeper`` wherever Ray puts it.

Once every actor is up the driver prints ``ready {json}`` (each actor's name, pid, rank and
node IP), starts the hanging calls and waits for its stdin to close. It dies with the test
process (parent-death signal) and its actors die with it.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import os
import signal
import socket
import sys
import threading

import ray

PREFIX = "rtx"  # verl puts a random prefix before every worker group's actor names
SECRET = "sk-rltui-test-secret-0123456789"  # must never appear in what rltui reads
PG_TIMEOUT = datetime.timedelta(hours=1)  # nothing times out while the test looks
CRASH_STEP = 3


def _die_with_the_test() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    parent = int(os.environ.get("RAY_DRIVER_PARENT", "0"))
    if parent and os.getppid() != parent:  # the test died before the signal was armed
        os._exit(3)


@ray.remote(num_cpus=0)
class Trainer:
    def setup(self, port: int) -> dict:
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]), timeout=PG_TIMEOUT)
        return {"pid": os.getpid(), "node_ip": ray.util.get_node_ip_address()}

    def sync_gradients(self) -> None:
        import torch
        import torch.distributed as dist

        dist.all_reduce(torch.ones(4))

    def log_metrics(self) -> None:
        import torch
        import torch.distributed as dist

        gathered = [torch.zeros(1) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, torch.ones(1))

    def fit(self) -> None:
        import time

        import torch
        import torch.distributed as dist

        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        for step in range(1, 1000):
            if step == CRASH_STEP and rank == world - 1:
                if os.fork() == 0:  # the "DataLoader worker" holding the sockets
                    signal.pause()
                    os._exit(0)
                try:
                    self.load_batch(step)
                except RuntimeError:
                    import traceback
                    traceback.print_exc()
                    sys.stderr.flush()
                    os._exit(1)
            dist.all_reduce(torch.ones(1))
            print(f"step:{step} - timing_s/step:0.1", file=sys.stderr, flush=True)
            time.sleep(0.1)

    def load_batch(self, step: int) -> None:
        raise RuntimeError(f"CUDA error: an illegal memory access was encountered (step {step})")

    def train_step(self) -> None:
        empty_batch = int(os.environ["RANK"]) == int(os.environ["WORLD_SIZE"]) - 1
        if not empty_batch:  # a data-dependent branch: no gradient for an empty batch
            self.sync_gradients()
        self.log_metrics()


@ray.remote(num_cpus=0)
class Sleeper:
    def where(self) -> dict:
        return {"pid": os.getpid(), "node_ip": ray.util.get_node_ip_address()}

    def block(self) -> None:
        threading.Event().wait()


def trainers(world: int) -> tuple[list, list[dict]]:
    """``world`` Trainer actors in one gloo group, set up as verl's worker groups are."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    actors = []
    for rank in range(world):
        env = {"RANK": str(rank), "WORLD_SIZE": str(world), "RAY_LOCAL_RANK": str(rank),
               "RAY_LOCAL_WORLD_SIZE": str(world), "NCCL_DEBUG": "INFO",
               "WANDB_API_KEY": SECRET}
        actors.append(Trainer.options(name=f"{PREFIX}Trainer_0:{rank}",
                                      runtime_env={"env_vars": env}).remote())
    infos = ray.get([t.setup.remote(port) for t in actors])
    return actors, [dict(info, name=f"{PREFIX}Trainer_0:{rank}", rank=rank)
                    for rank, info in enumerate(infos)]


def mismatch(world: int) -> tuple[list[dict], list]:
    actors, shown = trainers(world)
    victim = Sleeper.options(name="victim").remote()
    shown.append(dict(ray.get(victim.where.remote()), name="victim", rank=None))
    return shown, [t.train_step.remote() for t in actors] + [victim.block.remote()]


def crash(world: int) -> tuple[list[dict], list]:
    actors, shown = trainers(world)
    return shown, [t.fit.remote() for t in actors]


def spread(ips: list[str]) -> tuple[list[dict], list]:
    if not ips:
        sleeper = Sleeper.options(name="sleeper").remote()
        return [dict(ray.get(sleeper.where.remote()), name="sleeper", rank=None)], [
            sleeper.block.remote()]
    sleepers = [Sleeper.options(name=f"sleeper-{ip}", resources={f"node:{ip}": 0.01}).remote()
                for ip in ips]
    infos = ray.get([s.where.remote() for s in sleepers])
    shown = [dict(info, name=f"sleeper-{ip}", rank=None) for ip, info in zip(ips, infos)]
    return shown, [s.block.remote() for s in sleepers]


def main() -> None:
    _die_with_the_test()
    address, mode, *args = sys.argv[1:]
    ray.init(address=address, namespace="rltui-test", log_to_driver=False)
    modes = {"mismatch": lambda: mismatch(int(args[0])), "crash": lambda: crash(int(args[0])),
             "spread": lambda: spread(args)}
    actors, pending = modes[mode]()
    print("ready " + json.dumps({"actors": actors, "driver": os.getpid()}), flush=True)
    sys.stdin.read()  # the calls stay pending until the test closes stdin or kills us
    del pending


if __name__ == "__main__":
    main()
