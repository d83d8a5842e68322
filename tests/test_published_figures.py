"""The index of published figures in the wild (``published_figures.md``, written by ``--all``)."""

from __future__ import annotations

from vitprof.study.generate import NAMED_PAGE_FILES, index_page
from vitprof.study.pages.published_figures import FILE, published_figures_page


def test_the_index_links_every_reconciling_page_and_names_the_errors_found() -> None:
    text = published_figures_page().text
    for page in sorted(name for name in NAMED_PAGE_FILES if name.endswith(".md")):
        assert f"[{page}]({page}) (its Summary)" in text  # rows reconciled: that page's count
    assert ("| open_clip model profile | `image_width` is the image tower's width | **wrong** |"
            in text)
    assert "| torchvision weights | `_ops` in GFLOPS, as the documentation's column says | " \
           "**wrong** |" in text


def test_the_reports_index_links_it() -> None:
    readme = index_page([]).text
    assert f"- [{FILE}]({FILE}): published figures in the wild" in readme
