"""The sdist and the wheel build and carry the theme files and the docs, and an installed wheel
loads them."""

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
THEMES = ("dark", "light", "colorblind")


@pytest.mark.slow
def test_wheel_contains_themes_and_entry_point_and_loads_them_installed(tmp_path):
    # `python -m build` makes the sdist, then the wheel from the sdist: both paths are taken.
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (sdist,) = tmp_path.glob("rltui-*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = tar.getnames()
    for theme in THEMES:
        assert f"rltui-0.1.0/themes/{theme}.yaml" in members
    (wheel,) = tmp_path.glob("rltui-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for theme in THEMES:
        assert f"rltui/themes/{theme}.yaml" in names
    assert not any(n.startswith("themes/") for n in names)  # inside the package, not beside it
    assert "rltui/ui/rltui.tcss" in names
    docs = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert "getting-started.md" in docs
    for page in docs:
        assert f"rltui-0.1.0/docs/{page}" in members
        assert f"rltui/docs/{page}" in names  # for `rltui docs TOPIC` where rltui is installed
    assert not any(n.startswith("docs/") for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "rltui = rltui.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()

    # Installed (no checkout on the path, run from elsewhere): the package finds its themes.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-index", "--target", str(target), str(wheel)], check=True,
                   capture_output=True)
    code = ("import rltui, rltui.ui.themes as t; "
            "print(rltui.__file__); print(t.shipped_folder()); "
            "print(sorted(t.load_all())); print(t.load_theme('dark').palette.ranks[0])")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, cwd=tmp_path, env=env).stdout.splitlines()
    assert out[0] == str(target / "rltui" / "__init__.py")
    assert out[1] == str(target / "rltui" / "themes")
    assert out[2] == str(sorted(THEMES))
    assert out[3] == "#61afef"
    # ... and its docs: `rltui docs TOPIC` prints the page shipped in the wheel
    docs_run = subprocess.run([sys.executable, "-m", "rltui", "docs", "getting-started"],
                              check=True, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert docs_run.stdout == (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    code = "import rltui.cli.docs as d; print(d.docs_folder())"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, cwd=tmp_path, env=env).stdout.splitlines()
    assert out == [str(target / "rltui" / "docs")]
