"""mkdocs hook: vendor KaTeX into the site, so that no page loads a CDN.

KaTeX comes from the npm registry, pinned by ``package.json`` and
``package-lock.json`` at the top of the checkout; ``npm ci`` puts it in
``node_modules/``. This hook adds its script, its stylesheet and its fonts to
the site under ``assets/katex/``, where ``mkdocs.yml``'s ``extra_css`` and
``extra_javascript`` point. Without ``node_modules`` the build stops with the
command that fixes it, rather than publishing pages whose math cannot render.
"""

from __future__ import annotations

import pathlib

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

_KATEX = pathlib.Path(__file__).resolve().parents[2] / "node_modules" / "katex" / "dist"


def on_files(files: Files, config) -> Files:
    if not (_KATEX / "katex.min.js").is_file():
        raise PluginError(f"KaTeX is missing from {_KATEX}: run `npm ci` at the top of the "
                          "checkout (it installs the version package-lock.json pins)")
    wanted = ["katex.min.js", "katex.min.css"]
    wanted += [f"fonts/{font.name}" for font in sorted((_KATEX / "fonts").glob("*.woff2"))]
    for name in wanted:
        files.append(File(name, src_dir=str(_KATEX),
                          dest_dir=str(pathlib.Path(config["site_dir"]) / "assets" / "katex"),
                          use_directory_urls=False))
    return files
