"""The paper report as one archive (`report.zip`): per table its LaTeX (booktabs, as the page rounds it)
and its CSV (unrounded, through `exports.csv_text`, the app's one CSV rule); per figure its plotly
JSON, the CSV and LaTeX of the numbers it draws, and a PNG and an SVG when plotly's static export
(kaleido, which drives an installed Chrome or Chromium: `BROWSER_PATH` or its own lookup; it never
downloads one) worked when the report was built; and `report.json`: every item with its state, inputs
and the sha256 of each of its files, and whether the images could be made.

Built from the cached report (`PaperReport.items`): numbers only, no participant text. The images are
made by the build (`figure_images`, kept as `PaperReportImages` under the sha256 of the figures they
draw): a download only reads them, so no request starts a browser.
"""
from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import zipfile
from concurrent.futures import ThreadPoolExecutor

from experiments.analysis.exports import csv_text
from experiments.core.report_format import csv_rows, table_latex
from experiments.models import PaperReportImages

logger = logging.getLogger(__name__)
IMAGE_FORMATS = ("png", "svg")


def figure_images(figures: dict[str, dict]) -> tuple[dict[str, dict[str, bytes]], str]:
    """slug → {"png": bytes, "svg": bytes} for each figure with data, and a sentence on how it went."""
    drawable = {slug: f for slug, f in figures.items() if f and f.get("data")}
    if not drawable:
        return {}, "no figure with data to draw"
    try:
        import kaleido
    except ImportError:
        return {}, "not made: kaleido is not installed (requirements.txt); each figure's JSON and CSV are here"
    try:
        images = _in_own_loop(_drawn(kaleido, drawable))
    except Exception as exc:  # noqa: BLE001 - no browser here (ChromeNotFoundError and kin): said in report.json
        logger.warning("paper report figures not exported: %s", exc)
        return {}, (f"not made: plotly's static export needs Chrome or Chromium, which did not start here "
                    f"({type(exc).__name__}); set BROWSER_PATH to one; each figure's JSON and CSV are here")
    return images, f"made with kaleido {getattr(kaleido, '__version__', '')}".strip()


async def _drawn(kaleido, drawable: dict[str, dict]) -> dict[str, dict[str, bytes]]:
    # One browser for every figure. Not kaleido's sync server (`start_sync_server`): when its browser
    # fails to start, its thread dies and `calc_fig_sync` waits for an answer for ever (kaleido 1.5.2),
    # which held the analysis lane of a worker on a machine without Chromium. Here the error is raised.
    async with kaleido.Kaleido() as browser:
        return {slug: {fmt: await browser.calc_fig(figure, opts={"format": fmt}) for fmt in IMAGE_FORMATS}
                for slug, figure in drawable.items()}


def _in_own_loop(coroutine):
    """Run the coroutine to its end on an event loop of its own thread (the caller's thread may
    already run one); its result, or what it raised, raised here."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="figure-images") as thread:
        return thread.submit(asyncio.run, coroutine).result()


def drawable_figures(items: list[dict]) -> dict[str, dict]:
    """slug → plotly figure of each item whose figure has data, in the report's order."""
    return {i["slug"]: i["figure"] for i in items if i.get("figure") and i["figure"].get("data")}


def figures_sha256(figures: dict[str, dict]) -> str:
    """What a set of images draws: the sha256 of the figures' JSON, by slug."""
    return _sha(json.dumps(figures, sort_keys=True).encode())


def images_pack(images: dict[str, dict[str, bytes]]) -> bytes:
    """Images as one stored zip of <slug>.<format> (PNG and SVG are stored, not deflated again)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as pack:
        for slug, by_format in sorted(images.items()):
            for fmt, data in sorted(by_format.items()):
                pack.writestr(f"{slug}.{fmt}", data)
    return buffer.getvalue()


def images_unpack(data: bytes) -> dict[str, dict[str, bytes]]:
    images: dict[str, dict[str, bytes]] = {}
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as pack:
        for name in pack.namelist():
            slug, _, fmt = name.rpartition(".")
            images.setdefault(slug, {})[fmt] = pack.read(name)
    return images


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def item_files(item: dict, images: dict[str, dict[str, bytes]]) -> dict[str, bytes]:
    """The archive's files of one item, by path."""
    files = {}
    folder = "figures" if item["kind"] == "figure" else "tables"
    stem = f"{folder}/{item['slug']}"
    if item.get("table"):
        table = item["table"]
        files[f"{stem}.csv"] = csv_text(table["columns"], csv_rows(table)).encode()
        files[f"{stem}.tex"] = table_latex(item).encode()
    if item.get("figure"):
        files[f"{stem}.json"] = json.dumps(item["figure"], sort_keys=True).encode()
    for fmt, data in images.get(item["slug"], {}).items():
        files[f"{stem}.{fmt}"] = data
    return files


NOT_MADE_YET = ("not made for this build yet: the images are drawn by the report's build on the queue "
                "(or `manage.py paper_report`); each figure's JSON and CSV are here")


def stored_images(report) -> tuple[dict[str, dict[str, bytes]], str]:
    """The images the build kept for exactly these figures, and how they were made; none otherwise."""
    kept = PaperReportImages.objects.filter(report=report).first()
    if kept is None or kept.figures_sha256 != figures_sha256(drawable_figures(report.items)):
        return {}, NOT_MADE_YET
    return images_unpack(kept.images), kept.note


def archive_bytes(report, *, stale: bool, images: bool = True) -> bytes:
    """The zip of a cached report (`PaperReport`) with the images its build made; `images` False
    leaves the PNG/SVG out (said so)."""
    items = report.items
    made, how = stored_images(report) if images else ({}, "not made: asked for without images")
    listing, files = [], {}
    for item in items:
        mine = item_files(item, made)
        files.update(mine)
        table = item.get("table") or {}
        listing.append({"id": item["id"], "title": item["title"], "section": item["section"], "kind": item["kind"],
                        "in_paper": item.get("in_paper", True), "state": item["state"], "reason": item.get("reason"),
                        "template": item.get("template"), "inputs": table.get("inputs"),
                        "files": {path: _sha(data) for path, data in sorted(mine.items())}})
    meta = {"project": report.project.slug, "version": report.version, "built_at": report.built_at.isoformat(),
            "inputs_sha256": report.inputs_sha256, "stale": stale, "figure_images": how, "items": listing}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in sorted(files.items()):
            archive.writestr(path, data)
        archive.writestr("report.json", json.dumps(meta, indent=1, ensure_ascii=False))
    return buffer.getvalue()
