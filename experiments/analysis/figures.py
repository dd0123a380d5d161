"""Plotly figures of a run's dashboard, built from `experiments.analysis.dashboard` numbers.

Each returns a figure as plain data for Plotly.newPlot; the same numbers are in the
table beside the figure and in its CSV download.
"""
from __future__ import annotations

import json
from urllib.parse import urlencode

import plotly.graph_objects as go

from experiments.core.candidates import is_derived
from experiments.core.condition_names import short_name

# automargin: long condition names and axis titles get the room they need instead of being clipped.
LAYOUT = dict(margin=dict(l=10, r=10, t=30, b=40), height=320,
              xaxis=dict(automargin=True), yaxis=dict(automargin=True))
# Every figure's look, converted once: plotly.py validates a template set on a figure item by item,
# which took most of a dashboard's server time (8 figures, about 0.3 s).
TEMPLATE = json.loads(go.Figure(layout=dict(template="plotly_white")).to_json())["layout"]["template"]
GRADE_TICKS = dict(tickmode="array", tickvals=[0, 1, 2, 3], automargin=True)


def figure_json(fig: go.Figure) -> dict:
    """The figure as plain data for json_script (plotly's own encoder handles numpy), in TEMPLATE."""
    figure = json.loads(fig.to_json())
    figure["layout"]["template"] = TEMPLATE
    return figure


def _explorable(explore: str | None, axes: dict) -> str | None:
    """The explorer knows a run's own conditions, not a pool's derived b1, b2 or oracle."""
    return None if any(is_derived(key) for key in axes.values()) else explore


def bar_label(value: float | None) -> str:
    """A bar's printed value: three decimals, "0" for an exact zero, "" when there is none."""
    if value is None:
        return ""
    return "0" if value == 0 else f"{value:.3f}"


def contrast_link(explore: str | None, contrast: dict) -> str | None:
    """The explorer on the tasks behind a two-condition contrast: those whose two grades differ,
    largest difference first (a weighted contrast of more conditions has no such list)."""
    axes = contrast.get("transition_axes")
    if not axes:
        return None
    return _explorable(explore, axes) and explore_link(explore, a=axes["columns"], b=axes["rows"], sort="-diff")


def forest(contrasts: list[dict], explore: str | None = None) -> dict | None:
    rows = [c for c in contrasts if c.get("estimate") is not None]
    if not rows:
        return None
    names = [c["name"] for c in rows]
    fig = go.Figure()
    family = [c for c in rows if c.get("family_lo") is not None]
    if family:
        fig.add_trace(go.Scatter(
            x=[c["estimate"] for c in family], y=[c["name"] for c in family], mode="markers",
            customdata=[contrast_link(explore, c) for c in family],
            marker=dict(size=1, color="rgba(0,0,0,0)"), name="family interval",
            error_x=dict(type="data", symmetric=False, color="#9ca3af", thickness=8, width=0,
                         array=[c["family_hi"] - c["estimate"] for c in family],
                         arrayminus=[c["estimate"] - c["family_lo"] for c in family]),
        ))
    fig.add_trace(go.Scatter(
        x=[c["estimate"] for c in rows], y=names, mode="markers", name="estimate, 95% interval",
        customdata=[contrast_link(explore, c) for c in rows],
        marker=dict(size=9, color="#2f5d9b"),
        error_x=dict(type="data", symmetric=False, color="#2f5d9b", thickness=2,
                     array=[c["hi"] - c["estimate"] for c in rows],
                     arrayminus=[c["estimate"] - c["lo"] for c in rows]),
    ))
    fig.add_vline(x=0, line_dash="dot", line_color="#6b7280")
    fig.update_layout(LAYOUT).update_layout(xaxis_title="paired difference (normalized score)",
                      height=max(220, 60 + 45 * len(rows)), legend=dict(orientation="h", y=-0.25))
    fig.update_yaxes(autorange="reversed")
    return figure_json(fig)


def explore_link(explore: str | None, **params) -> str | None:
    """The explorer filtered to the tasks behind a number (static/js/figures.js opens it on click);
    None for readers who may not see the explorer's text."""
    if not explore:
        return None
    return f"{explore}?{urlencode(params)}" if params else explore


def condition_link(explore: str | None, condition: str) -> str | None:
    """The explorer on the tasks a condition answered, its best grades first (a missing grade last)."""
    return explore_link(explore, sort=f"-grade:{condition}")


def means(rows: list[dict], explore: str | None = None) -> dict | None:
    shown = [r for r in rows if r.get("mean") is not None]
    if not shown:
        return None
    fig = go.Figure(go.Scatter(
        x=[r["mean"] for r in shown], y=[r["condition"] for r in shown], mode="markers",
        customdata=[condition_link(explore, r["condition"]) for r in shown],
        marker=dict(size=9, color="#4d8a4d"),
        error_x=dict(type="data", symmetric=False, array=[r["hi"] - r["mean"] for r in shown],
                     arrayminus=[r["mean"] - r["lo"] for r in shown]),
    ))
    fig.update_layout(LAYOUT).update_layout(xaxis_title="mean normalized content score", height=max(220, 60 + 40 * len(shown)))
    fig.update_yaxes(autorange="reversed")
    return figure_json(fig)


def sweep(data: dict, explore: str | None = None) -> dict | None:
    if not data.get("shown"):
        return None
    fig = go.Figure()
    for builder, points in data["lines"].items():
        fig.add_trace(go.Scatter(
            x=[p["words"] for p in points], y=[p["mean"] for p in points], mode="lines+markers", name=builder,
            customdata=[condition_link(explore, p["condition"]) for p in points],
            error_y=dict(type="data", symmetric=False, array=[p["hi"] - p["mean"] for p in points],
                         arrayminus=[p["mean"] - p["lo"] for p in points]),
        ))
    if data.get("whole_record") is not None:
        fig.add_hline(y=data["whole_record"], line_dash="dash", annotation_text="whole record")
    fig.update_layout(LAYOUT).update_layout(xaxis_title="memory length (words); B = its characters",
                      yaxis_title="mean normalized score")
    return figure_json(fig)


def thresholds(contrasts: list[dict], explore: str | None = None) -> dict | None:
    rows = [c for c in contrasts if c.get("delta_at_least")]
    if not rows:
        return None
    fig = go.Figure()
    for k in range(3):
        # The value printed on each bar keeps a zero difference visible (a bar of height 0 is not),
        # as "0", not a "0.000" that reads like a measured small number.
        values = [c["delta_at_least"][k] for c in rows]
        fig.add_trace(go.Bar(name=f"ΔP(grade ≥ {k + 1})", x=[c["name"] for c in rows], y=values,
                             text=[bar_label(v) for v in values], texttemplate="%{text}",
                             customdata=[contrast_link(explore, c) for c in rows],
                             textposition="outside", cliponaxis=False))
    fig.update_layout(LAYOUT).update_layout(barmode="group", yaxis_title="difference in share of tasks")
    return figure_json(fig)


# A transition heatmap fills its column (plotly's responsive figure); its axis titles are one line each,
# the conditions' short names (the full keys in the hover text). The height grows with the vertical
# title, which must fit beside the plot: 12 px text is about 7 px a character, and the figure's
# margins, ticks and horizontal title take about 100 px.
TITLE_CHAR_PX = 7
HEATMAP_MARGINS_PX = 100


def transitions(contrast: dict, explore: str | None = None) -> dict | None:
    table = contrast.get("transitions")
    if not table:
        return None
    axes = contrast["transition_axes"]
    explore = _explorable(explore, axes)
    # Cell (row i, column j): the tasks graded i under the rows' condition and j under the columns'.
    links = [[explore_link(explore, a=axes["columns"], ga=j, b=axes["rows"], gb=i) for j in range(4)]
             for i in range(4)]
    x_title, y_title = (f"grade under {short_name(axes[side])}" for side in ("columns", "rows"))
    hover = (f"grade under {axes['columns']}: %{{x}}<br>grade under {axes['rows']}: %{{y}}<br>"
             "%{z} tasks<extra></extra>")
    fig = go.Figure(go.Heatmap(z=table, x=[0, 1, 2, 3], y=[0, 1, 2, 3], colorscale="Blues", hovertemplate=hover,
                               text=table, texttemplate="%{text}", customdata=links))
    fig.update_layout(LAYOUT).update_layout(
        height=max(300, HEATMAP_MARGINS_PX + TITLE_CHAR_PX * len(y_title)), xaxis_title=x_title,
        yaxis_title=y_title, xaxis=GRADE_TICKS, yaxis=GRADE_TICKS)
    return figure_json(fig)


def lengths(rows: list[dict], explore: str | None = None) -> dict | None:
    shown = [r for r in rows if r["words"]]
    if not shown:
        return None
    # A box stands for all its condition's answers: its link is the trace's (`meta`), not one per
    # answer — the tasks with an answer of the condition (the box's), its best grades first.
    fig = go.Figure([go.Box(x=r["words"], name=r["condition"], boxpoints=False,
                            meta=explore_link(explore, answered=r["condition"], sort=f"-grade:{r['condition']}"))
                     for r in shown])
    fig.update_layout(LAYOUT).update_layout(xaxis_title="answer length (words)", showlegend=False,
                      height=max(220, 60 + 40 * len(shown)))
    return figure_json(fig)


def cost(per_phase: list[dict], explore: str | None = None) -> dict | None:
    if not per_phase:
        return None
    # Every phase makes its calls for every task of the cohort (memories for each task's session,
    # decisions and grades for each task): a bar's tasks are all the run's, so it opens the explorer whole.
    fig = go.Figure(go.Bar(x=[r["phase"] for r in per_phase], y=[r["attempts"] for r in per_phase],
                           customdata=[explore_link(explore) for _ in per_phase],
                           name="attempts", texttemplate="%{y}", textposition="outside", cliponaxis=False))
    fig.update_layout(LAYOUT).update_layout(yaxis_title="HTTP attempts")
    return figure_json(fig)


GRADE_COLORS = ("#c2410c", "#f59e0b", "#60a5fa", "#1d4ed8")


def grade_distribution(rows: list[dict], explore: str | None = None) -> dict | None:
    """The 0–3 grades of each condition's final answers (Fig. 6): one bar per grade and one for
    the missing grades, bars grouped by condition; a bar's height is its share of the planned
    tasks, its count on hover (and in the table beside it). A grade's bar opens the explorer on
    the condition's tasks with that grade."""
    shown = [r for r in rows if r["planned"]]
    if not shown:
        return None
    names = [r["condition"] for r in shown]
    fig = go.Figure()
    for g, color in enumerate(GRADE_COLORS):
        fig.add_trace(go.Bar(
            name=f"grade {g}", x=names, y=[r["shares"][g] for r in shown], marker_color=color,
            customdata=[[r["counts"][g], explore_link(explore, condition=r["condition"], grade=g)] for r in shown],
            hovertemplate="%{x}<br>grade " + str(g) + ": %{customdata[0]} tasks (%{y:.1%})<extra></extra>"))
    fig.add_trace(go.Bar(
        name="missing", x=names, y=[r["missing_share"] for r in shown], marker_color="#9ca3af",
        customdata=[[r["missing"]] for r in shown],
        hovertemplate="%{x}<br>missing: %{customdata[0]} tasks (%{y:.1%})<extra></extra>"))
    fig.update_layout(LAYOUT).update_layout(barmode="group", yaxis_title="share of planned tasks",
                                            yaxis_tickformat=".0%", legend=dict(orientation="h", y=-0.3),
                                            height=360)
    return figure_json(fig)


def cohort_overlap(names: list[str], shared_people, shared_sessions) -> dict | None:
    """The cohort map's matrix (Fig. 5): cell (i, j) shaded by the people cohorts i and j both drew,
    labelled "people · sessions"; the diagonal is each cohort's own draw. Counts only."""
    if not names:
        return None
    text = [[f"{p} · {s}" for p, s in zip(row_p, row_s)] for row_p, row_s in zip(shared_people, shared_sessions)]
    fig = go.Figure(go.Heatmap(
        z=[list(row) for row in shared_people], x=names, y=names, colorscale="Blues", text=text,
        texttemplate="%{text}", hovertemplate="%{y} and %{x}: %{text} (people · sessions)<extra></extra>"))
    side = max(300, 120 + 70 * len(names))
    fig.update_layout(LAYOUT).update_layout(height=side, width=side + 160, yaxis_autorange="reversed",
                                            xaxis_title="cohort", yaxis_title="cohort")
    return figure_json(fig)


def cohort_sizes(names: list[str], people, sessions) -> dict | None:
    """People and sessions each cohort drew (Fig. 5's bars)."""
    if not names:
        return None
    fig = go.Figure([go.Bar(name="people", x=names, y=list(people), texttemplate="%{y}", textposition="outside",
                            cliponaxis=False),
                     go.Bar(name="sessions", x=names, y=list(sessions), texttemplate="%{y}", textposition="outside",
                            cliponaxis=False)])
    fig.update_layout(LAYOUT).update_layout(barmode="group", yaxis_title="drawn")
    return figure_json(fig)
