"""Sphinx configuration of the django-redislock documentation.

Build it with ``python -m sphinx -W -b html docs /tmp/docs_html`` (``pip install
"django-redislock[docs]"``). Autodoc imports the package, so Django is set up first, with the
minimal settings of ``docs/_settings.py`` (no Redis is contacted while building).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

# Nothing may be written into the source tree while building (no __pycache__ beside the docs).
sys.dont_write_bytecode = True

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))
sys.path.insert(1, str(DOCS.parent))
os.environ["DJANGO_SETTINGS_MODULE"] = "_settings"

import django  # noqa: E402

django.setup()

import django_redislock  # noqa: E402

project = "django-redislock"
author = "django-redislock developers"
copyright = "django-redislock developers"
release = version = django_redislock.__version__

extensions = ["sphinx.ext.autodoc"]
root_doc = "index"
exclude_patterns = ["_build", "_settings.py"]
templates_path: list[str] = []

# The docstrings are plain prose with ``literals``: no Napoleon, no type cross-references.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autodoc_inherit_docstrings = True
autodoc_default_options = {"undoc-members": False}
add_module_names = False
nitpicky = False
suppress_warnings: list[str] = []

html_theme = "alabaster"
html_title = f"django-redislock {release}"
html_theme_options = {
    "description": "Locks, view guards and a reliable job queue for Django, on Redis",
    "fixed_sidebar": True,
    "page_width": "1100px",
    "sidebar_width": "260px",
}
html_static_path: list[str] = []
html_show_sourcelink = False


# benchmarks/README.rst, included by benchmarks.rst, links to docs/*.rst by their path in the
# repository (for GitHub's view of it); in the built site those are pages of their own.
REPOSITORY_DOC_LINK = re.compile(r"`([^`<]+?) <\.\./docs/([\w/-]+)\.rst>`__")


def _link_repository_docs(app: Any, relative_path: Path, parent: str, content: list[str]) -> None:
    content[0] = REPOSITORY_DOC_LINK.sub(r":doc:`\1 <\2>`", content[0])


def setup(app: Any) -> dict[str, Any]:
    app.connect("include-read", _link_repository_docs)
    return {"parallel_read_safe": True}
