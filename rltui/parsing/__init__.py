"""Pure text -> model parsers. Never imports textual, rich, pynvml, psutil or subprocess."""
