"""mkdocs hook: show the docstrings' Sphinx roles as code in the API reference.

The package's docstrings follow numpy's convention, roles included
(:func:`band`), so that ``help()`` and Sphinx-based tools read them as scipy's
are read. Markdown knows no roles: mkdocstrings renders :func:`band` as the
literal text ``:func:`` before the code ``band``. This hook drops the role
name and keeps the code.
"""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|data|mod|exc|obj|const|ref|term):(?=<code)")


def on_page_content(html: str, page, config, files) -> str:
    return _ROLE.sub("", html)
