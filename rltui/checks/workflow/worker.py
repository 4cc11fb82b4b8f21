"""The child process that runs the user's workflow: ``python .../rltui/checks/workflow/worker.py``
(or ``python -m rltui.checks.workflow.worker``).

User code runs here, never in rltui's process: a workflow can block its event loop forever
(a ``threading.Lock`` held across an ``await``, ``time.sleep``, a sync HTTP call) and the app
must stay alive and able to end it. Standard library only, and Python 3.9-compatible, so it also
runs under the workflow's own interpreter (``--python``).

Protocol. The parent writes one JSON object on stdin and closes it: ``target``, ``paths``,
``init_kwargs``, ``extra_kwargs`` (with the API key: that is why it is not on the command line),
``rows`` (the batch), ``steps`` (``single``, ``sequential``, ``concurrent``), ``group_size``,
``sequential_prompts``, ``timeout``, ``concurrency``, ``loop_block_s``. The worker answers with
JSON lines on its original stdout (the user's prints go to stderr): ``hello``, ``loaded`` or
``load_error``, then per step ``step``, one ``result`` per finished run, ``pending_tasks`` at the
step's first timeout (and on SIGUSR1, which the parent sends before ending a cancelled check),
``step_done``; ``loop_blocked`` / ``loop_unblocked`` from the watchdog
thread at any time, ``alive`` every second, and ``done`` last.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and sys.path and \
        os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    # Started as a script (how the check starts it): its folder would shadow the workflow's own
    # modules named like ours (``rewards``), and the workflow's folders come from --path.
    del sys.path[0]

import asyncio
import copy
import importlib
import inspect
import json
import signal
import threading
import time
import traceback
from typing import Any

from rltui.checks.workflow import taskdump, taskgroups
from rltui.checks.workflow.rewards import check_reward, short_repr

HEARTBEAT_S = 1.0
TRACEBACK_LIMIT = 8000
MESSAGE_LIMIT = 500
taskdump.ignore_file(__file__)


class Channel:
    """JSON lines to the parent on a private copy of stdout; fd 1 then points at stderr so
    that nothing the workflow prints can corrupt the protocol."""

    def __init__(self) -> None:
        sys.stdout.flush()
        fd = os.dup(1)
        os.dup2(2, 1)
        self._out = os.fdopen(fd, "w", encoding="utf-8")
        self._lock = threading.Lock()

    def send(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields}, default=short_repr)
        with self._lock:
            try:
                self._out.write(line + "\n")
                self._out.flush()
            except (BrokenPipeError, ValueError, OSError):
                os._exit(1)  # the parent is gone: nobody to report to


_NOBODY = -1  # no holder seen yet (never an id())


def _running_task(loop: asyncio.AbstractEventLoop) -> Any:
    """The task the loop's thread runs now, or None (a plain callback, the selector)."""
    try:
        return asyncio.current_task(loop)
    except RuntimeError:
        return None


class Watchdog(threading.Thread):
    """Pings the event loop from a thread. When the loop has not answered for ``threshold``
    seconds and one task (or one callback outside any task) has held it all that time, sync
    code is blocking it: report the loop thread's stack and the pending tasks. Many tasks that
    each run a short while in one turn of the loop (512 runs building their first request with
    an HTTP client's SDK) keep the loop from answering too, but no call in them blocks: that is
    not reported. Heartbeats tell the parent the process itself is alive (and the GIL free)."""

    def __init__(self, channel: Channel, threshold: float) -> None:
        super().__init__(name="rltui-watchdog", daemon=True)
        self.channel = channel
        self.threshold = threshold
        self.tick = max(0.01, min(0.2, threshold / 5))
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread = 0
        self.skip: set = set()
        self._sent = 0.0
        # which task the loop thread runs (asyncio.current_task, read from this thread) at
        # each tick while the ping waits, and since when the same one
        self._holder: Any = None
        self._held_since = 0.0
        self._waiting = False
        self._reported = False
        self._lock = threading.Lock()

    def attach(self, loop: asyncio.AbstractEventLoop, skip: set) -> None:
        self.loop_thread = threading.get_ident()
        self.skip = skip
        self._waiting = False
        self.loop = loop

    def detach(self) -> None:
        self.loop = None

    # ``_lock`` orders the two reports: ``loop_blocked`` is sent before the answer that ends
    # the block can send ``loop_unblocked``, and ``blocked_s`` (measured after it) is never
    # less than the ``for_s`` that was reported.
    def _answer(self) -> None:  # runs in the loop thread
        with self._lock:
            blocked = time.monotonic() - self._sent
            self._waiting = False
            if self._reported:
                self._reported = False
                self.channel.send("loop_unblocked", blocked_s=round(blocked, 3))

    def _report_block(self, loop: asyncio.AbstractEventLoop) -> None:
        """Runs in this thread: what the loop thread is doing while it holds the loop."""
        with self._lock:
            if not self._waiting:  # the loop answered since the check
                return
            self._reported = True
            stack = taskdump.capture_thread(self.loop_thread)
            tasks = taskdump.capture_tasks(loop, self.skip)
            self.channel.send("loop_blocked", for_s=round(time.monotonic() - self._sent, 3),
                              stack=stack, where=taskgroups.where(stack),
                              tasks=taskgroups.group_tasks(tasks), task_count=len(tasks))

    def run(self) -> None:
        last_beat = 0.0
        while True:
            now = time.monotonic()
            loop = self.loop
            if loop is not None:
                if not self._waiting:
                    self._sent, self._waiting = now, True
                    self._holder, self._held_since = _NOBODY, now
                    try:
                        loop.call_soon_threadsafe(self._answer)
                    except RuntimeError:  # loop closed
                        self._waiting = False
                elif not self._reported:
                    holder = id(_running_task(loop))
                    if holder != self._holder:
                        self._holder, self._held_since = holder, now
                    # seen first at a tick after the holder began: a tick of slack
                    if now - self._sent > self.threshold and \
                            now - self._held_since >= self.threshold - self.tick:
                        self._report_block(loop)
            if now - last_beat >= HEARTBEAT_S:
                last_beat = now
                self.channel.send("alive")
            time.sleep(self.tick)


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _machinery(filename: str) -> bool:
    return filename == __file__ or filename.startswith("<frozen importlib") \
        or filename == importlib.__file__


def _traceback(exc: BaseException) -> str:
    """The traceback from the workflow's first frame on (the worker's and importlib's frames
    above it are noise to the reader)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None \
            and _machinery(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return text if len(text) <= TRACEBACK_LIMIT else "...\n" + text[-TRACEBACK_LIMIT:]


def _root_cause(exc: BaseException) -> BaseException | None:
    """The end of ``raise ... from`` chains: a client's own words often hide it (the openai
    SDK's "Connection error." over a refused connection)."""
    root, seen = None, {id(exc)}
    cause = exc.__cause__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        root, cause = cause, cause.__cause__
    return root


def _message(exc: BaseException) -> str:
    text = str(exc) or repr(exc)
    root = _root_cause(exc)
    if root is not None:
        said = str(root)
        if not said or said not in text:
            text += f" (from {_type_name(root)}" + (f": {said})" if said else ")")
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT - 3] + "..."


def load(cfg: dict) -> tuple[Any, dict | None, dict]:
    """Import module:Class, check ``run`` and instantiate: ``(agent, problem, info)``."""
    for path in reversed(cfg["paths"]):
        if path not in sys.path:
            sys.path.insert(0, path)
    modname, _, attr = cfg["target"].partition(":")
    where = ", ".join(cfg["paths"])
    try:
        module = importlib.import_module(modname)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == modname or modname.startswith(exc.name + ".")):
            return None, {"kind": "module_not_found",
                          "message": f"no module named {modname!r} on the path ({where}); "
                                     "add its folder with --path"}, {}
        # a package the workflow imports (openai, its own dependencies) is missing from the
        # interpreter the workflow runs under: name it, and that interpreter
        package = (exc.name or "").partition(".")[0]
        needs = (f"; the workflow needs the package {package!r}, which is not installed for "
                 f"{sys.executable}") if package else ""
        return None, {"kind": "import_error", "traceback": _traceback(exc),
                      "message": f"importing {modname} failed: {_type_name(exc)}: "
                                 f"{_message(exc)}{needs}"}, {}
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import is the user's bug too
        return None, {"kind": "import_error", "traceback": _traceback(exc),
                      "message": f"importing {modname} failed: {_type_name(exc)}: "
                                 f"{_message(exc)}"}, {}
    info = {"file": getattr(module, "__file__", None)}
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            classes = sorted(n for n, v in vars(module).items()
                             if inspect.isclass(v) and v.__module__ == module.__name__)
            return None, {"kind": "no_class",
                          "message": f"module {modname} ({info['file']}) has no {attr!r}"
                                     + (f"; its classes: {', '.join(classes)}" if classes
                                        else "")}, info
        obj = getattr(obj, part)
    if not inspect.isclass(obj):
        return None, {"kind": "no_class", "message": f"{cfg['target']} is a "
                      f"{type(obj).__name__}, not a class"}, info
    run = getattr(obj, "run", None)
    if run is None:
        return None, {"kind": "no_run", "message": f"{cfg['target']} has no run method; a "
                      "workflow needs `async def run(self, data, **extra_kwargs)`"}, info
    if not inspect.iscoroutinefunction(run):
        return None, {"kind": "not_async", "message": f"{cfg['target']}.run is not a coroutine "
                      "function: write it as `async def run(self, data, **extra_kwargs)` (RL "
                      "trainers await it, many at once)"}, info
    try:
        agent = obj(**cfg["init_kwargs"])
    except BaseException as exc:  # noqa: BLE001 - the constructor is user code
        return None, {"kind": "init_error", "traceback": _traceback(exc),
                      "message": f"{cfg['target']}() failed: {_type_name(exc)}: "
                                 f"{_message(exc)}"}, info
    try:
        inspect.signature(agent.run).bind({}, **cfg["extra_kwargs"])
    except TypeError as exc:
        names = ", ".join(cfg["extra_kwargs"])
        return None, {"kind": "bad_signature", "message": f"run{inspect.signature(agent.run)} "
                      f"cannot take run(data, {names}): {exc}; write it as `async def "
                      "run(self, data, **extra_kwargs)`"}, info
    except ValueError:
        pass  # no signature to inspect (a C callable): let the call decide
    return agent, None, info


class Steps:
    """Runs the requested steps on the running loop and reports every run as it finishes."""

    def __init__(self, agent: Any, cfg: dict, channel: Channel, watchdog: Watchdog) -> None:
        self.agent = agent
        self.cfg = cfg
        self.channel = channel
        self.watchdog = watchdog
        self.own: set = set()
        self.kwargs = cfg["extra_kwargs"]
        self.step: str | None = None

    async def _call(self, data: Any) -> Any:
        try:
            return ("ok", await self.agent.run(data, **self.kwargs))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit in a run is a run's error
            return ("error", exc)

    async def _timed(self, step: str, run: int, prompt: int, data: Any, sem: Any,
                     dumped: list) -> None:
        if sem is not None:
            await sem.acquire()
        try:
            start = time.perf_counter()
            task = asyncio.get_running_loop().create_task(self._call(data))
            if hasattr(task, "set_name"):
                task.set_name(f"rltui-run-{step}-{run}")
            done, _ = await asyncio.wait({task}, timeout=self.cfg["timeout"])
            latency = time.perf_counter() - start
            result: dict = {"step": step, "run": run, "prompt": prompt,
                            "latency_s": round(latency, 6)}
            if not done:
                if not dumped:
                    # Before cancelling anything: this is the picture of the deadlock.
                    dumped.append(True)
                    self.dump(step, run, "timeout")
                task.cancel()
                result.update(status="timeout")
            elif task.cancelled():
                result.update(status="error", error_type="CancelledError",
                              message="the run was cancelled (by the workflow itself)")
            else:
                kind, value = task.result()
                if kind == "ok":
                    reward, problem = check_reward(value)
                    result.update(status="ok", reward=reward)
                    if problem is not None:
                        result["invalid"] = {"reason": problem.reason, "repr": problem.repr}
                else:
                    result.update(status="error", error_type=_type_name(value),
                                  message=_message(value), traceback=_traceback(value))
            self.channel.send("result", **result)
        finally:
            if sem is not None:
                sem.release()

    def _copy(self, row: dict) -> Any:
        # Each step gets fresh rows (one step cannot change the next one's input); the runs of
        # one group share their prompt's dict, as in a trainer.
        return copy.deepcopy(row)

    def dump(self, step: str | None, run: int | None, why: str) -> None:
        tasks = taskdump.capture_tasks(asyncio.get_running_loop(), self.own)
        self.channel.send("pending_tasks", step=step, run=run, why=why,
                          groups=taskgroups.group_tasks(tasks), task_count=len(tasks))

    def dump_on_request(self) -> None:
        """SIGUSR1 from the parent, just before it ends a cancelled check: where the runs
        wait right now (a check cancelled because it seemed stuck wants exactly that)."""
        self.dump(self.step, None, "cancelled")

    async def _launch(self, step: str, jobs: list, sem: Any = None) -> None:
        self.step = step
        dumped: list = []
        start = time.perf_counter()
        self.channel.send("step", step=step, total=len(jobs))
        if step == "concurrent":
            tasks = []
            for run, prompt, data in jobs:
                t = asyncio.get_running_loop().create_task(
                    self._timed(step, run, prompt, data, sem, dumped))
                self.own.add(t)
                tasks.append(t)
            await asyncio.gather(*tasks)
        else:
            for run, prompt, data in jobs:
                await self._timed(step, run, prompt, data, None, dumped)
        self.channel.send("step_done", step=step, wall_s=round(time.perf_counter() - start, 6))

    async def run_all(self) -> None:
        self.own.add(asyncio.current_task())
        rows = self.cfg["rows"]
        group = self.cfg["group_size"]
        for step in self.cfg["steps"]:
            if step == "single":
                await self._launch(step, [(0, 0, self._copy(rows[0]))])
            elif step == "sequential":
                k = min(self.cfg["sequential_prompts"], len(rows))
                await self._launch(step, [(p, p, self._copy(rows[p])) for p in range(k)])
            elif step == "concurrent":
                cap = self.cfg.get("concurrency")
                sem = asyncio.Semaphore(cap) if cap else None
                jobs = []
                for p, row in enumerate(rows):
                    data = self._copy(row)
                    jobs += [(p * group + g, p, data) for g in range(group)]
                await self._launch(step, jobs, sem)


def _finish(channel: Channel | None, code: int) -> None:
    # os._exit: runs that ignored their cancellation and non-daemon threads the workflow started
    # must not keep the worker alive once everything is reported.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code)


def main() -> None:
    channel = Channel()
    try:
        cfg = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    except (ValueError, OSError) as exc:
        channel.send("load_error", kind="protocol", message=f"bad worker input: {exc}")
        _finish(channel, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # a workflow that reads stdin gets EOF, not the parent's pipe
    watchdog = Watchdog(channel, float(cfg["loop_block_s"]))
    watchdog.start()
    channel.send("hello", pid=os.getpid(), python=sys.version.split()[0])
    # The loop exists before the import: workflows that create asyncio objects at import or in
    # __init__ find one, as in a trainer.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    agent, problem, info = load(cfg)
    if problem is not None:
        channel.send("load_error", **problem, **info)
        _finish(channel, 1)
    channel.send("loaded", **info)
    steps = Steps(agent, cfg, channel, watchdog)
    main_task = loop.create_task(steps.run_all())
    try:
        loop.add_signal_handler(signal.SIGUSR1, steps.dump_on_request)
    except (NotImplementedError, RuntimeError, AttributeError):
        pass  # no signals here: a cancelled check just has no last dump
    watchdog.attach(loop, steps.own)
    try:
        loop.run_until_complete(main_task)
    except BaseException as exc:  # noqa: BLE001 - report, then leave
        channel.send("fatal", error_type=_type_name(exc), message=_message(exc),
                     traceback=_traceback(exc))
        _finish(channel, 1)
    watchdog.detach()
    channel.send("done")
    _finish(channel, 0)


if __name__ == "__main__":
    main()
