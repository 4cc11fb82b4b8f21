"""What differs between the Python versions the tests run on (3.10 to 3.13)."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # the test groups install tomli there (pyproject.toml)
    import tomli as tomllib

__all__ = ["tomllib"]
