"""mkdocs hook: show the docstrings' Sphinx roles as code in the API reference.

The package's docstrings follow numpy's convention, roles included
(:func:`band`), so that ``help()`` and Sphinx-based tools read them as scipy's
are read. Markdown knows no roles: mkdocstrings renders :func:`band` as the
literal text ``:func:`` before the code ``band``. This hook drops the role
name and keeps the code.

It also reads reST's literal-block marker: a paragraph that ends in ``::``
before an indented block (``on the command line::``) shows one colon, as
Sphinx shows it; Markdown would print both.
"""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|data|mod|exc|obj|const|ref|term):(?=<code)")


# "text::</p>" followed by the code block the indented lines became
_LITERAL_MARKER = re.compile(r"(?<=\S)::(</p>\s*<(?:div|pre)\b)")


def on_page_content(html: str, page, config, files) -> str:
    return _LITERAL_MARKER.sub(r":\1", _ROLE.sub("", html))
