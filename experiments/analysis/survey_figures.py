"""Plotly figures of a survey run's dashboard, from `analysis.survey_results.survey_summary`;
the same numbers are in the tables beside them."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from experiments.analysis.figures import LAYOUT, figure_json

METRIC_TITLES = {"accuracy": "exact-option accuracy (higher is better)",
                 "deviation": "normalized deviation, ordinal items (lower is better)"}


def condition_means(means: list[dict]) -> dict | None:
    """Per condition (and the human test-retest row, grey) accuracy and normalized deviation."""
    rows = [m for m in means if m["accuracy"] is not None or m["deviation"] is not None]
    if not rows:
        return None
    fig = make_subplots(rows=1, cols=2, subplot_titles=[METRIC_TITLES["accuracy"], METRIC_TITLES["deviation"]])
    colors = ["#9ca3af" if m["reference"] else "#2f5d9b" for m in rows]
    for col, metric in ((1, "accuracy"), (2, "deviation")):
        fig.add_trace(go.Bar(x=[m[metric] for m in rows], y=[m["label"] for m in rows], orientation="h",
                             marker=dict(color=colors), name=metric, showlegend=False), row=1, col=col)
    fig.update_layout(**{**LAYOUT, "height": 120 + 40 * len(rows)})
    fig.update_yaxes(autorange="reversed", automargin=True)
    return figure_json(fig)


def contrast_forest(contrasts: list[dict], labels: dict[str, str] | None = None) -> dict | None:
    """Paired differences (first minus second) with their 95% whole-person intervals, per metric;
    conditions named by `labels` (key → the means chart's name), as in the means chart."""
    if not contrasts:
        return None
    labels = labels or {}
    fig = make_subplots(rows=1, cols=2, subplot_titles=[METRIC_TITLES["accuracy"], METRIC_TITLES["deviation"]],
                        shared_yaxes=True)
    for col, metric in ((1, "accuracy"), (2, "deviation")):
        rows = [c for c in contrasts if c["metric"] == metric]
        fig.add_trace(go.Scatter(
            x=[c["estimate"] for c in rows], y=[f"{labels.get(c['first'], c['first'])} − {labels.get(c['second'], c['second'])}" for c in rows], mode="markers",
            marker=dict(size=9, color="#2f5d9b"), showlegend=False,
            error_x=dict(type="data", symmetric=False, color="#2f5d9b", thickness=2,
                         array=[c["hi"] - c["estimate"] for c in rows],
                         arrayminus=[c["estimate"] - c["lo"] for c in rows])), row=1, col=col)
        fig.add_vline(x=0, line=dict(color="#6b7280", dash="dot"), row=1, col=col)
    fig.update_layout(**{**LAYOUT, "height": 120 + 30 * max(1, len(contrasts) // 2)})
    fig.update_yaxes(automargin=True)
    return figure_json(fig)
