"""The wheel builds and carries the theme files the app loads at run time."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_contains_themes_and_entry_point(tmp_path):
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("rltui-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for theme in ("dark", "light", "colorblind"):
        assert f"rltui/themes/{theme}.yaml" in names
    assert "rltui/ui/rltui.tcss" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "rltui = rltui.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
