"""``python -m rltui.cli``: the same as ``rltui``."""

from rltui.cli import main

raise SystemExit(main())
