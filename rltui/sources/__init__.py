"""Everything that touches the outside world. One module per kind of source."""
