"""A Ray cluster as rltui's cluster view sees nodes: ``RayFeed(address)`` reads the nodes,
workers, actors, GPUs and stacks through the Ray dashboard's HTTP API (docs/ray.md).

rltui never imports ``ray``: address.py (pure) reads ``--ray ADDRESS``, client.py speaks HTTP
with the standard library, state.py and stacks.py (pure) turn Ray's JSON and py-spy text into
rltui's model values, feed.py runs the polling and stack threads.

``RayFeed`` is imported on first use (module ``__getattr__``): importing a pure module of this
package runs this file first, and must not pull in the HTTP client and the threads with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltui.remote.ray.address import AddressError, parse_address

if TYPE_CHECKING:
    from rltui.remote.ray.feed import RayFeed

__all__ = ["AddressError", "RayFeed", "parse_address"]


def __getattr__(name: str) -> Any:
    if name == "RayFeed":
        from rltui.remote.ray.feed import RayFeed
        return RayFeed
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
