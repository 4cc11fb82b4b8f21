"""A hung job with torch's debug server on: the Flight Recorder, stacks and py-spy over HTTP.

Every rank calls ``torch.distributed.debug.start_debug_server`` after joining the group: each
starts a worker server (an ephemeral port, its address kept in the job's TCPStore) and rank 0
also forks the HTTP front end on ``TORCHJOB_DEBUG_PORT``, which asks every rank's worker for its
Flight Recorder (``/fr_trace_json``: per rank ``<h2>Rank i: ADDR</h2>`` and a ``<pre>`` with the
rank's JSON), its Python stacks (``/stacks``) and a py-spy dump (``/pyspy_dump``). The front end
needs jinja2, aiohttp or requests, and tabulate.

Then the job hangs as ``fr_cross_group`` does (the default), or as ``fr_frozen`` does (argument
``frozen``). The worker servers answer from their own threads, so the ranks still answer while
their main threads are blocked (and the frozen rank too).
"""

from __future__ import annotations

import os
import sys

import _flightrec
import _rank
from torch.distributed.debug import start_debug_server


def main() -> None:
    rank, world = _rank.init()
    start_debug_server(port=int(os.environ["TORCHJOB_DEBUG_PORT"]))
    _flightrec.start(rank)
    if sys.argv[1:] == ["frozen"]:
        import fr_frozen as job
    else:
        import fr_cross_group as job
    _rank.ready("debug server")
    job.Trainer(rank, world).train()


if __name__ == "__main__":
    main()
