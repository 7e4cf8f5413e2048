// Typeset the math that pymdownx.arithmatex (generic mode) leaves in
// <span class="arithmatex">\(...\)</span> and <div class="arithmatex">\[...\]</div>.
// document$ is Material's page observable, so instant navigation renders too.
// A formula KaTeX cannot parse is shown in red with class katex-error (which
// the docs' browser test looks for) instead of stopping the page.
document$.subscribe(({ body }) => {
  for (const element of body.querySelectorAll(".arithmatex")) {
    const source = element.textContent.trim();
    const display = source.startsWith("\\[");
    katex.render(source.slice(2, -2), element, {
      displayMode: display,
      throwOnError: false,
    });
  }
});
