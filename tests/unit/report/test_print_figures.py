"""The report's print versions are optional (``report.print_figures``, ``nnunet-core report
--no-print-figures``): off, a figure is its PNG alone and the page links no PDF or SVG."""

from __future__ import annotations

from nnunet_core.report import build, figures


def drawn(path, enabled: bool) -> list:
    with figures.print_figures(enabled):
        figure = figures._figure(2, 2)
        figure.add_subplot().plot([0, 1], [1, 0])
        png = figures._save(figure, path)
        return sorted(p.name for p in path.parent.iterdir()), figures.print_versions(png)


def test_off_a_figure_is_its_png_alone_and_the_page_links_none(tmp_path) -> None:
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    on, on_versions = drawn(tmp_path / "on" / "cv_dice.png", True)
    off, off_versions = drawn(tmp_path / "off" / "cv_dice.png", False)
    assert on == ["cv_dice.pdf", "cv_dice.png", "cv_dice.svg"] and len(on_versions) == 2
    assert off == ["cv_dice.png"] and off_versions == []
    page = ["![Cross-validation](cv_dice.png)"]
    with figures.print_figures(False):
        assert build._with_print_links(page) == page
    links = "Print versions: [PDF](cv_dice.pdf), [SVG](cv_dice.svg)"
    assert build._with_print_links(page)[-1] == links
    assert figures.printing()  # the default, again after the block
