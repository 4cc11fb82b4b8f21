"""Checks that run on request: rollout consistency (``rollout/``) and agent-workflow concurrency
(``workflow/``).

Each check is a synchronous ``run(spec, progress=..., cancel=...)`` that drives its own asyncio
loop, reports ``Progress`` through a callback (called from the check's own thread), stops early
when ``cancel`` is set and always returns a report: a run that was cancelled or cut short by a
dead server keeps the results it has (``partial``). The CLI commands and the app's checks screen
call the same functions; nothing here imports Textual.
"""
