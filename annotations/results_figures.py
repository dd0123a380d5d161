"""Plotly figures of a campaign's results, built from the `annotations.campaign_agreement` payload.

Each returns plain figure data for Plotly.newPlot (or None when there is nothing to draw);
the same numbers are in the table beside the figure and in its CSV. ``display`` maps a
rater label to what the page may show (usernames for owners, the label otherwise).
"""
from __future__ import annotations

import plotly.graph_objects as go

from annotations.core.result_tables import comparisons
from experiments.analysis.figures import GRADE_TICKS, LAYOUT, figure_json

STAT_NAMES = {"exact": "exact agreement", "within_one": "within one grade", "kappa": "quadratic κ"}
SOURCE_COLOURS = {"judge": "#6b7280", "raters_mean": "#2f5d9b", "adjudicated": "#4d8a4d"}


def shown_name(name: str, display: dict) -> str:
    """A comparison name with its leading rater label (R1 …) shown as `display` says."""
    label, _, rest = name.partition(" ")
    return f"{display[label]} {rest}" if label in display else name


def _bars(names, values) -> dict:
    """A bar trace's y and asymmetric error arrays from {estimate, lo, hi} dicts (None → gap)."""
    y = [v["estimate"] if v else None for v in values]
    plus = [(v["hi"] - v["estimate"]) if v and v["hi"] is not None and v["estimate"] is not None else None
            for v in values]
    minus = [(v["estimate"] - v["lo"]) if v and v["lo"] is not None and v["estimate"] is not None else None
             for v in values]
    return dict(x=names, y=y, error_y=dict(type="data", symmetric=False, array=plus, arrayminus=minus))


def agreement(payload: dict, display: dict) -> dict | None:
    """Exact, within-one and quadratic κ with 95 % intervals, one group of bars per comparison."""
    rows = [(name, fig) for _, name, _, fig in comparisons(payload) if fig]
    if not rows:
        return None
    names = [shown_name(name, display) for name, _ in rows]
    fig = go.Figure([go.Bar(name=label, **_bars(names, [f[stat] for _, f in rows]))
                     for stat, label in STAT_NAMES.items()])
    alpha = payload["between"]["alpha"]
    if alpha:
        fig.add_trace(go.Bar(name="Krippendorff's α (all raters)", **_bars(["all raters"], [alpha])))
    fig.update_layout(LAYOUT).update_layout(barmode="group", yaxis_title="agreement", height=420,
                                            xaxis=dict(tickangle=-15), legend=dict(orientation="h", y=-0.4))
    return figure_json(fig)


def confusion(figure: dict | None, rows: str, columns: str) -> dict | None:
    if not figure:
        return None
    table = figure["confusion"]
    fig = go.Figure(go.Heatmap(z=table, x=[0, 1, 2, 3], y=[0, 1, 2, 3], colorscale="Blues", text=table,
                               texttemplate="%{text}", showscale=False))
    fig.update_layout(LAYOUT).update_layout(height=280, width=320, xaxis_title=columns, yaxis_title=rows,
                                            xaxis=GRADE_TICKS, yaxis=GRADE_TICKS)
    return figure_json(fig)


def conditions(payload: dict) -> dict | None:
    """Per condition: κ between raters and of the raters' mean vs the judge."""
    rows = payload["conditions"]
    if not any(c["between"]["pairs"] or c["vs_judge"]["mean"] for c in rows):
        return None
    names = [c["condition"] for c in rows]
    fig = go.Figure([
        go.Bar(name="κ rater vs rater", **_bars(names, [(c["between"]["pairs"] or {}).get("kappa") for c in rows])),
        go.Bar(name="κ raters' mean vs judge",
               **_bars(names, [(c["vs_judge"]["mean"] or {}).get("kappa") for c in rows])),
        go.Bar(name="α all raters", **_bars(names, [c["between"]["alpha"] for c in rows])),
    ])
    fig.update_layout(LAYOUT).update_layout(barmode="group", yaxis_title="agreement",
                                            legend=dict(orientation="h", y=-0.3))
    return figure_json(fig)


def levels(payload: dict) -> dict | None:
    """Mean normalized score per condition: the raters' mean and the judge on the same items."""
    scopes = [("all items", payload["levels"])] + [(c["condition"], c["levels"]) for c in payload["conditions"]]
    if not any(lv["raters_mean"] for _, lv in scopes):
        return None
    fig = go.Figure()
    for source, label in (("raters_mean", "raters' mean"), ("judge", "judge")):
        shown = [(name, lv[source]) for name, lv in scopes if lv[source]]
        fig.add_trace(go.Scatter(
            x=[v["estimate"] for _, v in shown], y=[name for name, _ in shown], mode="markers", name=label,
            marker=dict(size=9, color=SOURCE_COLOURS[source]),
            error_x=dict(type="data", symmetric=False, array=[v["hi"] - v["estimate"] for _, v in shown],
                         arrayminus=[v["estimate"] - v["lo"] for _, v in shown])))
    fig.update_layout(LAYOUT).update_layout(xaxis_title="mean normalized content score",
                                            height=max(220, 80 + 45 * len(scopes)),
                                            legend=dict(orientation="h", y=-0.3))
    fig.update_yaxes(autorange="reversed")
    return figure_json(fig)


def distribution(payload: dict, display: dict) -> dict | None:
    rows = payload["per_rater"]
    if not any(r["graded"] for r in rows):
        return None
    names = [display.get(r["rater"], r["rater"]) for r in rows]
    fig = go.Figure([go.Bar(name=f"grade {g}", x=names, y=[r["distribution"][g] for r in rows]) for g in range(4)])
    fig.update_layout(LAYOUT).update_layout(barmode="stack", yaxis_title="graded items")
    return figure_json(fig)


def contrasts(payload: dict) -> dict | None:
    """Forest of each planned contrast under the judge, the raters' mean and adjudication, same tasks."""
    rated = [c for c in payload["contrasts"] if c["rows"]]
    if not rated:
        return None
    fig = go.Figure()
    for source, colour in SOURCE_COLOURS.items():
        rows = [(c["name"], r) for c in rated for r in c["rows"] if r["source"] == source]
        fig.add_trace(go.Scatter(
            x=[r["estimate"] for _, r in rows], y=[name for name, _ in rows], mode="markers",
            name=rows[0][1]["label"] if rows else source, marker=dict(size=9, color=colour),
            error_x=dict(type="data", symmetric=False, array=[r["hi"] - r["estimate"] for _, r in rows],
                         arrayminus=[r["estimate"] - r["lo"] for _, r in rows])))
    fig.add_vline(x=0, line_dash="dot", line_color="#6b7280")
    fig.update_layout(LAYOUT).update_layout(xaxis_title="paired difference (normalized score), same tasks",
                                            height=max(220, 80 + 60 * len(rated)), scattermode="group",
                                            legend=dict(orientation="h", y=-0.3))
    fig.update_yaxes(autorange="reversed")
    return figure_json(fig)
