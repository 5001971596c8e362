"""The test command's Django 6 leg on a machine without a Python 3.12+: CI fails, elsewhere
it passes on Django 5.2 and says plainly that the second leg did not run (issue 12, point
20). The scripts run for real, from a copy, with a PATH and HOME that offer only an older
Python."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ("test_django6.sh", "django6_leg.sh")


@pytest.fixture
def no_python_312(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "scripts").mkdir()
    for name in SCRIPTS:
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A "python3" that is an older Python: asked whether it is 3.12+, it says no.
    old = bin_dir / "python3"
    old.write_text(f"#!{shutil.which('bash')}\nexit 1\n")
    old.chmod(0o755)
    for tool in ("bash", "dirname", "cat", "env"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return {"PATH": str(bin_dir), "HOME": str(tmp_path), "PYENV_ROOT": str(tmp_path / "pyenv")}


def run(tmp_env: dict[str, str], script: str, **extra: str) -> subprocess.CompletedProcess[str]:
    home = Path(tmp_env["HOME"])
    return subprocess.run(
        [shutil.which("bash") or "bash", str(home / "scripts" / script)],
        env={**tmp_env, **extra},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_without_a_python_312_the_django6_script_says_so_and_exits_2(
    no_python_312: dict[str, str],
) -> None:
    done = run(no_python_312, "test_django6.sh")
    assert done.returncode == 2, done.stderr
    assert "Django 6 needs Python 3.12 or newer, and none was found" in done.stderr
    assert "PYTHON=/path/to/python3.12" in done.stderr  # what to do about it


def test_in_ci_a_leg_that_cannot_run_fails_the_run(no_python_312: dict[str, str]) -> None:
    done = run(no_python_312, "django6_leg.sh", CI="true")
    assert done.returncode == 2, done.stderr
    assert "did NOT run" not in done.stderr


def test_elsewhere_it_passes_and_says_plainly_that_django6_did_not_run(
    no_python_312: dict[str, str],
) -> None:
    done = run(no_python_312, "django6_leg.sh")
    assert done.returncode == 0, done.stderr
    assert "!! The Django 6 leg did NOT run: no Python 3.12+ was found" in done.stderr


def test_a_python_given_that_is_too_old_is_refused(no_python_312: dict[str, str]) -> None:
    done = run(no_python_312, "test_django6.sh", PYTHON=str(Path(no_python_312["PATH"], "python3")))
    assert done.returncode == 1
    assert "is not Python 3.12 or newer" in done.stderr


def test_ci_runs_the_readme_command_with_ci_set() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "export CI=true" in ci
    assert "exec bash scripts/test.sh" in ci
    assert "bash scripts/test.sh" in (ROOT / "README.rst").read_text()
    assert "django6_leg.sh" in (ROOT / "scripts" / "test.sh").read_text()
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
