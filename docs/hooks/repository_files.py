"""mkdocs hook: publish the repository's generated figures with the docs.

The figures live in ``figures/`` at the top of the checkout (where
``bandsolve repro --figures figures`` writes them), outside ``docs/``. Copying
them into ``docs/`` would keep two versions; this hook adds the PNGs to the
site as ``figures/<name>.png`` instead, so pages link them by that path and
``mkdocs build --strict`` checks those links.
"""

from __future__ import annotations

import pathlib

from mkdocs.structure.files import File, Files

_FIGURES = pathlib.Path(__file__).resolve().parents[2] / "figures"


def on_files(files: Files, config) -> Files:
    for png in sorted(_FIGURES.glob("*.png")):
        files.append(File(f"figures/{png.name}", src_dir=str(_FIGURES.parent),
                          dest_dir=config["site_dir"], use_directory_urls=False))
    return files
