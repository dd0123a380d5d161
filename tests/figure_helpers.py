"""Browser-test helper: figures draw lazily (static/js/figures.js draws one when it is scrolled
near), so a test that looks at every figure first scrolls each into view and waits for it."""


def draw_every_figure(page, timeout: float = 30_000) -> int:
    """Scroll to each .plot of the page in turn, wait until plotly has drawn it, scroll back to
    the top; the number of figures."""
    plots = page.locator(".plot")
    count = plots.count()
    for index in range(count):
        plot = plots.nth(index)
        plot.scroll_into_view_if_needed()
        plot.locator(".main-svg").first.wait_for(state="attached", timeout=timeout)
    page.wait_for_function(f"document.querySelectorAll('.plot[data-drawn=yes]').length >= {count}",
                           timeout=timeout)
    page.evaluate("window.scrollTo(0, 0)")
    return count
