"""The node agent: rltui's collectors without the screen, streaming readings as JSON lines."""
