"""The README's quickstart as data, and a virtualenv holding a wheel of the package, for
``tests/test_quickstart.py``.

The quickstart is made of literal blocks: a block whose first line is ``# <path>`` is code
to append to that file of the new project; the other blocks are shell commands, one a line,
``&&`` between commands and ``#`` before a comment."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.rst"
FILE_LINE = re.compile(r"# (\S+\.py)$")
# What the wheel is built from: what the sdist ships (see tests/test_packaging.py).
SOURCES = ("django_redislock", "pyproject.toml", "README.rst", "LICENSE", "MANIFEST.in")


def section(title: str, text: str | None = None) -> str:
    """The body of the README's section ``title``: up to the next heading of its level."""
    text = README.read_text() if text is None else text
    heading = f"\n{title}\n{'=' * len(title)}\n"
    assert heading in text, f"no section {title!r} in the README"
    body = text.split(heading, 1)[1]
    return re.split(r"\n[^\n]+\n=+\n", body, maxsplit=1)[0].strip("\n")


def literal_blocks(body: str) -> list[str]:
    """The literal blocks (after a paragraph ending ``::``), dedented, in order."""
    blocks: list[str] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].rstrip().endswith("::"):
            i += 1
            continue
        i += 1
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
            block.append(lines[i][4:])
            i += 1
        blocks.append("\n".join(block).strip("\n") + "\n")
    return blocks


@dataclass
class Command:
    argv: list[str]  # as the README writes it
    comment: str  # what follows its line's ``#``, or ""


@dataclass
class Quickstart:
    files: dict[str, str]  # path in the project -> the code appended to it
    steps: list[Command]  # every shell command, in order


def quickstart() -> Quickstart:
    files: dict[str, str] = {}
    steps: list[Command] = []
    for block in literal_blocks(section("Quickstart")):
        first = block.splitlines()[0]
        named = FILE_LINE.match(first)
        if named:
            # Several files in one block: each starts at its own ``# <path>`` line.
            for part in re.split(r"\n\n(?=# \S+\.py\n)", block):
                path = FILE_LINE.match(part.splitlines()[0])
                assert path, f"a code block without its file: {part[:60]!r}"
                files[path.group(1)] = files.get(path.group(1), "") + part.rstrip() + "\n"
            continue
        for line in block.splitlines():
            command, _, comment = line.partition("  # ")
            for one in command.split(" && "):
                steps.append(Command(shlex.split(one), comment.strip()))
    return Quickstart(files, steps)


def build_wheel(tmp: Path) -> Path:
    """A wheel built from a copy of the package's sources (the checkout is left alone: the
    build writes its egg-info and build directory where it runs)."""
    from tests.test_packaging import build

    source = tmp / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    (tmp / "dist").mkdir()
    wheel, _ = build("wheel", source, tmp / "dist")
    return wheel


def venv_with(wheel: Path, where: Path) -> Path:
    """A virtualenv with ``wheel`` installed, seeing the running leg's packages (Django,
    redis-py, django-tasks…) behind its own: the python of it.

    ``--system-site-packages`` would show the base interpreter's packages, not those of the
    virtualenv the suite runs in; a ``.pth`` naming the running one's site-packages does.
    The running one's own ``.pth`` files are not read through it, so the editable install
    of this checkout (a ``.pth`` naming the repository) does not reach the new one."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    running = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(site) / "running_leg.pth").write_text("".join(f"{path}\n" for path in running))
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-index",
            "--ignore-installed",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    return python
