"""The documentation site as a reader sees it: built with mkdocs, opened in
headless Chromium, with the math typeset by the vendored KaTeX.

The browser test needs mkdocs (the ``docs`` extra), ``npm ci`` (KaTeX) and
Debian's ``chromium``. Without them it skips, unless BANDSOLVE_REQUIRE_DOCS=1
(set by .ci/run), where a missing tool fails it instead.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# pages with math, with prose tables of limits, and the API reference
PAGES = ["math/index.html", "accuracy/index.html", "reference/api/index.html",
         "reference/torch/index.html", "reference/plugins/index.html"]
#: every trainer page, and the reference of their plug-ins
TRAINER_PAGES = ["losses/index.html", "verl/index.html", "trl/index.html", "skyrl/index.html",
                 "openrlhf/index.html",
                 "reference/plugins/index.html"]


def _need(ok: bool, what: str) -> None:
    if not ok:
        if os.environ.get("BANDSOLVE_REQUIRE_DOCS") == "1":
            pytest.fail(f"the docs browser test needs {what}")
        pytest.skip(f"needs {what}")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
    _need(shutil.which("chromium") is not None, "Debian's chromium")
    _need((ROOT / "node_modules" / "katex" / "dist" / "katex.min.js").is_file(), "`npm ci` (KaTeX)")
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        _need(False, "mkdocs (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
                   cwd=ROOT, check=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    return out


def _rendered_dom(page: pathlib.Path) -> str:
    result = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-background-networking", "--disable-gpu",
         "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True)
    return result.stdout


def _visible_prose(dom: str) -> str:
    """The page's text outside code, scripts and KaTeX's TeX annotations."""
    text = re.sub(r"(?s)<(pre|code|annotation|script|style|textarea)\b.*?</\1>", " ", dom)
    return re.sub(r"(?s)<[^>]+>", " ", text)


@pytest.mark.parametrize("page", sorted(set(PAGES + TRAINER_PAGES)))
def test_docs_page_renders_math_and_no_raw_markup(site, page):
    dom = _rendered_dom(site / page)
    assert "md-content" in dom, f"{page}: no page content in the DOM"
    assert "katex-error" not in dom, f"{page}: KaTeX could not parse a formula"
    prose = _visible_prose(dom)
    # "::": reST's literal-block marker, shown raw on the plug-ins page before
    # the hook read it (docs/hooks/sphinx_roles.py)
    for raw in ["\\(", "\\[", "$", ":func:", ":class:", ":data:", ":meth:", "::"]:
        where = prose.find(raw)
        assert where < 0, f"{page}: unrendered {raw!r} in {prose[max(0, where - 80):where + 80]!r}"


#: marks each code block whose text is wider than its box, once the page has laid out
_MARK_CUT_OFF = """<script>window.addEventListener("load", () => {
  for (const code of document.querySelectorAll("pre > code")) {
    if (code.scrollWidth > code.clientWidth + 1) code.setAttribute("data-cut-off", "");
  }
});</script>"""


@pytest.mark.parametrize("page", TRAINER_PAGES)
def test_docs_trainer_page_code_blocks_are_not_cut_off_at_the_right(site, page):
    """The plug-ins reference page showed its verl overrides and TRL lines cut off
    at the right (a scrollbar hid their ends) in a 1280 px window."""
    probe = site / page.replace("index.html", "cut-off-probe.html")
    probe.write_text((site / page).read_text().replace("</body>", _MARK_CUT_OFF + "</body>"))
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-background-networking", "--disable-gpu",
         "--window-size=1280,2000", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120, check=True).stdout
    assert "<pre" in dom, f"{page}: no code block rendered"
    cut = re.findall(r"<code[^>]*data-cut-off[^>]*>(.{0,80})", dom)
    assert not cut, f"{page}: code blocks cut off at the right: {cut}"


def test_docs_math_page_is_typeset_by_katex(site):
    dom = _rendered_dom(site / "math/index.html")
    assert dom.count('class="katex"') > 100  # every formula of the page, typeset


def test_docs_site_loads_nothing_from_outside(site):
    # links a reader follows may point anywhere; what a page loads may not
    loads = re.compile(r'<(?:script|link|img|iframe)\b[^>]*?(?:src|href)="(?:https?:)?//[^"]*"')
    for html in site.rglob("*.html"):
        text = html.read_text()
        assert not loads.findall(text), (html.relative_to(site), loads.findall(text)[:3])
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, html


def _lists_glued_to_paragraphs(markdown: str) -> list[int]:
    """Line numbers of list items that directly follow a paragraph line:
    Markdown then runs the list into the paragraph."""
    glued, fenced = [], False
    lines = markdown.splitlines()
    for number, (before, line) in enumerate(zip([""] + lines, lines), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or not re.match(r"(- |\* |\d+\. )", line):
            continue
        # an indented line continues a list item; a table, heading or HTML line
        # ends its own block
        if before.strip() and not re.match(r"\s*(- |\* |\d+\. )", before) and not before.startswith(
                (" ", "\t", "|", "#", "<", ">")):
            glued.append(number)
    return glued


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_docs_lists_have_a_blank_line_before_them(page):
    assert _lists_glued_to_paragraphs((DOCS / page).read_text()) == []
