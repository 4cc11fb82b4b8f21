"""Stops the whole worker, watchdog thread included: a catastrophic regular expression runs in
C and holds the GIL for minutes."""

import re


class RegexAgent:
    async def run(self, data, **extra_kwargs):
        text = "a" * 40 + "!"
        return 1.0 if re.match(r"(a+)+$", text) else 0.0
