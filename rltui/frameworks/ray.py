"""Ray (ray-project/ray): the runtime most RL frameworks stand on (pure data).

Sources (read, not copied): ``python/ray/_private/worker.py`` and ``src/ray/core_worker/`` (the
process title: ``ray::IDLE`` for an idle pooled worker, ``ray::<Class>`` once it hosts an actor,
``ray::<Class>.<method>()`` / ``ray::<function>()`` while a task runs), the log monitor
(``python/ray/_private/log_monitor.py``: ``(<actor or task> pid=N, ip=...)`` prefixes, ``[repeated
Nx across cluster]``), and the daemons (``raylet``, ``gcs_server``, ``ray::DashboardAgent`` ...).
"""

from __future__ import annotations

from rltui.frameworks._types import Framework, TitlePattern

FRAMEWORK = Framework(
    name="ray",
    label="Ray",
    kind="runtime",
    packages=("ray",),
    path_marks=("/ray/",),
    log_prefixes=("(WorkerDict pid=N) ", "(TaskRunner pid=N, ip=10.0.0.1) ", "(pid=N) ",
                  "(raylet) ", "[repeated Nx across cluster] (suffix)"),
    titles=(
        # idle pooled workers (ray::IDLE, ray::IDLE_SpillWorker ...), no job's process yet
        TitlePattern(r"ray::IDLE(?:_\w+)?", "idle", "python/ray/_private/worker.py"),
        # Ray's own services on every node (seen beside a job on Ray 2.60): never a job's rank
        TitlePattern(r"ray::(?:DashboardAgent|RuntimeEnvAgent|SpillWorker|RestoreWorker)"
                     r"(?:\.\w+\(\))?", "service",
                     "python/ray/dashboard/, python/ray/_private/runtime_env/"),
        TitlePattern(r"ray::(?P<role>JobSupervisor|_StatsActor|ServeController|ProxyActor)"
                     r"(?:\.\w+\(\))?", "", "python/ray/dashboard/, python/ray/serve/"),
        TitlePattern(r"(?P<role>raylet|gcs_server)\b.*", "", "src/ray/raylet/, src/ray/gcs/"),
        # Any other actor or task: the class or function is the role.
        TitlePattern(r"ray::(?P<role>[A-Za-z_][\w]*)(?:\.\w+)?(?:\(\))?", "",
                     "src/ray/core_worker/ (setproctitle)"),
    ),
    sources=("ray-project/ray",),
)
