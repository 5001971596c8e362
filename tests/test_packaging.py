"""Packaging: the sdist is built without a warning and holds the package, its README and
LICENSE and metadata, and no tests (they need servers and a browser an sdist cannot carry);
a wheel built from it holds the whole package; an editable install warns of nothing."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = "import sys; from setuptools import build_meta; print(build_meta.build_{}(sys.argv[1]))"


def build(kind: str, source: Path, out: Path) -> tuple[Path, list[str]]:
    """Build through setuptools' PEP 517 hooks, as pip and ``python -m build`` do; and the
    warnings raised meanwhile (pip shows those, even with -q; it hides setuptools' log)."""
    done = subprocess.run(
        [sys.executable, "-c", BUILD.format(kind), str(out)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    warnings = re.findall(r"^.*\w+Warning: .*$", done.stderr, re.MULTILINE)
    return out / done.stdout.strip().splitlines()[-1], warnings


def package_files() -> set[str]:
    listed = subprocess.run(
        ["git", "ls-files", "django_redislock"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {name for name in listed if (ROOT / name).exists()}  # committed or not yet


def test_the_sdist_and_its_wheel(tmp_path: Path) -> None:
    sdist, warnings = build("sdist", ROOT, tmp_path)
    assert warnings == []
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
        archive.extractall(tmp_path / "src", filter="data")
    assert {"LICENSE", "README.rst", "pyproject.toml", "PKG-INFO"} <= names
    assert package_files() <= names
    assert not [n for n in names if n.startswith(("tests", "example_project", "benchmarks"))]
    assert not [n for n in names if n.endswith(".pyc")]
    info = (tmp_path / "src" / sdist.name.removesuffix(".tar.gz") / "PKG-INFO").read_text()
    assert "License-Expression: MIT" in info
    assert "License-File: LICENSE" in info
    for label in ("Homepage", "Repository", "Issues", "Changelog"):
        assert f"Project-URL: {label}, https://github.com/django-redislock/" in info

    wheel, warnings = build(
        "wheel", sdist.parent / "src" / sdist.name.removesuffix(".tar.gz"), tmp_path
    )
    assert warnings == []
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
    assert package_files() <= in_wheel  # templates, static files, py.typed
    assert not [n for n in in_wheel if not n.startswith("django_redislock")]


def test_the_editable_install_warns_of_nothing(tmp_path: Path) -> None:
    # What scripts/setup.sh (behind the README's demo.sh and test.sh) runs: pip install -e.
    wheel, warnings = build("editable", ROOT, tmp_path)
    assert warnings == []
    with zipfile.ZipFile(wheel) as archive:
        pth = [n for n in archive.namelist() if n.endswith(".pth")]
        assert [archive.read(n).decode().strip() for n in pth] == [str(ROOT)]
