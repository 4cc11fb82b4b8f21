"""A Ray cluster as rltui's cluster view sees nodes: ``RayFeed(address)`` reads the nodes,
workers, actors, GPUs and stacks through the Ray dashboard's HTTP API (docs/ray.md).

rltui never imports ``ray``: address.py (pure) reads ``--ray ADDRESS``, client.py speaks HTTP
with the standard library, state.py and stacks.py (pure) turn Ray's JSON and py-spy text into
rltui's model values, feed.py runs the polling and stack threads.
"""

from rltui.remote.ray.address import AddressError, parse_address
from rltui.remote.ray.feed import RayFeed

__all__ = ["AddressError", "RayFeed", "parse_address"]
