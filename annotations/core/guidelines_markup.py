"""Owner-written rating guidelines: Markdown in, sanitised HTML out. Pure Python, no Django.

Markdown (Python-Markdown, with tables and fenced code) renders the owner's text; nh3 (ammonia)
then keeps only the tags below, so whatever the text holds — raw HTML, scripts, event handlers,
javascript: links — a rater's page gets headings, lists, emphasis, tables, quotes and code. Links
keep http(s) and mailto targets and open nothing with the page's privileges; images are dropped
(a guideline must not make the rater's browser fetch from another host).
"""
from __future__ import annotations

import markdown
import nh3

from experiments.core.interviews.records import unstorable_text_problem

MAX_GUIDELINES_CHARS = 50_000
ALLOWED_TAGS = frozenset({
    "p", "br", "hr", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "strong", "em", "b", "i", "code", "pre",
    "blockquote", "table", "thead", "tbody", "tr", "th", "td", "a", "del", "sup", "sub",
})
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})


def render_guidelines(text: str) -> str:
    """The sanitised HTML of `text` (Markdown). Headings start at h2: the page has its own h1."""
    html = markdown.markdown(text, extensions=["tables", "fenced_code", "sane_lists"], output_format="html")
    # Markdown's "# Title" is h1; the rater's page already has one.
    html = html.replace("<h1>", "<h2>").replace("</h1>", "</h2>")
    return nh3.clean(html, tags=set(ALLOWED_TAGS), attributes={k: set(v) for k, v in ALLOWED_ATTRIBUTES.items()},
                     url_schemes=set(URL_SCHEMES), link_rel="noopener noreferrer nofollow")


def guidelines_problem(text: str) -> str | None:
    """Why `text` cannot be published as guidelines, or None."""
    if not text.strip():
        return "the guidelines are empty; write them first"
    if len(text) > MAX_GUIDELINES_CHARS:
        return f"the guidelines are {len(text):,} characters; at most {MAX_GUIDELINES_CHARS:,}"
    if problem := unstorable_text_problem(text):
        return f"the guidelines {problem}"
    return None
