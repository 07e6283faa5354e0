"""The report's figures, drawn from its contents (contents.py) with matplotlib's Agg canvas and returned as
PNG bytes. The bytes are the same for the same contents: no date or software version in the file, a fixed
size and resolution, no pyplot state (each figure is its own `Figure` on its own canvas)."""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

__all__ = ["DPI", "figures"]

DPI = 100
ERROR_FLOOR = 1e-12  # an escaped mutant whose error is exactly 0 is drawn on this line of the log axis

STYLE = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 8,
    "svg.hashsalt": "oracleaudit",
}


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _percent(value: float | None) -> float:
    return math.nan if value is None else 100 * value


def detection_overview(c: dict[str, Any]) -> bytes:
    """Detection of witnessed mutants per oracle (bars), with its false alarms written beside each bar."""
    oracles = c["oracles"]
    fig = _figure(8, 0.45 * len(oracles) + 1.2)
    ax = fig.add_subplot()
    y = np.arange(len(oracles))
    values = [_percent(o["score"]["detection"]) for o in oracles]
    ax.barh(y, np.nan_to_num(values), color=_colors(len(oracles)))
    for i, (v, o) in enumerate(zip(values, oracles)):
        label = "n/a" if math.isnan(v) else f"{v:.1f}%"
        ax.text(min(np.nan_to_num(v), 100) + 1, i, f"{label}   false alarms: {o['score']['false_alarms']}",
                va="center", fontsize=8)
    ax.set_yticks(y, [o["name"] for o in oracles])
    ax.invert_yaxis()
    ax.set_xlim(0, 130)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("detection of witnessed mutants (%)")
    ax.set_title("Detection per oracle")
    return _png(fig)


def detection_by_family(c: dict[str, Any]) -> bytes:
    """Grouped bars: for each mutation family, one bar per oracle."""
    oracles, families = c["oracles"], c["families"]
    fig = _figure(max(8.0, 0.12 * len(oracles) * len(families) + 2), 4.5)
    ax = fig.add_subplot()
    width = 0.8 / len(oracles)
    x = np.arange(len(families))
    for i, (o, color) in enumerate(zip(oracles, _colors(len(oracles)))):
        values = [_percent(o["score"]["by_family"].get(f, {}).get("detection")) for f in families]
        ax.bar(x - 0.4 + width * (i + 0.5), np.nan_to_num(values), width, label=o["name"], color=color)
    ax.set_xticks(x, families, rotation=20, ha="right")
    ax.set_ylim(0, 105)
    ax.set_ylabel("detection (%)")
    ax.set_title("Detection by mutation family")
    ax.legend(ncols=min(5, len(oracles)), loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)
    return _png(fig)


def tolerance_curves(c: dict[str, Any]) -> bytes:
    """Detection and false alarms against atol = rtol = t, one line per oracle; a dot marks its own tolerance."""
    fig = _figure(10, 4)
    detection, alarms = fig.subplots(1, 2)
    for o, color in zip(c["oracles"], _colors(len(c["oracles"]))):
        curve = o["tolerance_curve"]
        t = np.array(curve["tolerances"])
        shown = t > 0
        d = np.array([_percent(v) for v in curve["detection"]])
        detection.plot(t[shown], d[shown], color=color, label=o["name"], linewidth=1.2)
        alarms.plot(t[shown], np.array(curve["false_alarms"])[shown], color=color, linewidth=1.2)
        own = o["tolerance"]
        if own > 0:
            detection.plot([own], [np.interp(math.log10(own), np.log10(t[shown]), d[shown])], "o", color=color,
                           markersize=5)
    for ax in (detection, alarms):
        ax.set_xscale("log")
        ax.set_xlabel("tolerance t (atol = rtol)")
    detection.set_ylabel("detection of witnessed mutants (%)")
    detection.set_title("Tolerance curve (dot: the oracle's own tolerance)")
    alarms.set_ylabel("problems whose original is rejected")
    alarms.set_title("False alarms on the original kernels")
    detection.legend(loc="lower left")
    return _png(fig)


def _grid(n: int) -> tuple[int, int]:
    cols = min(3, n)
    return math.ceil(n / cols), cols


def tolerance_by_family(c: dict[str, Any]) -> bytes:
    """One panel per mutation family: its detection against the tolerance, one line per oracle."""
    families = c["families"]
    rows, cols = _grid(len(families))
    fig = _figure(3.4 * cols, 2.6 * rows + 0.6)
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)).ravel()
    colors = _colors(len(c["oracles"]))
    for ax, family in zip(axes, families):
        for o, color in zip(c["oracles"], colors):
            curve = o["tolerance_curve"]
            t = np.array(curve["tolerances"])
            d = np.array([_percent(v) for v in curve["by_family"].get(family, [None] * len(t))])
            ax.plot(t[t > 0], d[t > 0], color=color, linewidth=1, label=o["name"])
        ax.set_xscale("log")
        ax.set_title(family)
        ax.set_ylim(-5, 105)
    for ax in axes[len(families):]:
        ax.set_visible(False)
    fig.supxlabel("tolerance t (atol = rtol)")
    fig.supylabel("detection (%)")
    handles, labels = axes[0].get_legend_handles_labels()
    if len(axes) > len(families):  # the legend fills the first empty panel
        spare = axes[len(families)]
        spare.set_visible(True)
        spare.axis("off")
        spare.legend(handles, labels, loc="center", frameon=False)
    else:
        fig.legend(handles, labels, loc="outside right upper", frameon=False)
    return _png(fig)


def blind_band(c: dict[str, Any]) -> bytes:
    """One panel per oracle: each escaped mutant's error on the oracle's inputs against its problem's
    reduction size, with the oracle's tolerance as a line (escapes below it are the blind band)."""
    oracles = c["oracles"]
    rows, cols = _grid(len(oracles))
    fig = _figure(3.6 * cols, 2.8 * rows)
    # each panel its own error scale: one oracle's far escapes would flatten the others' band
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, squeeze=False)).ravel()
    for ax, o in zip(axes, oracles):
        points = [(e["reduction_size"], e["error"]) for e in o["blind_band"]["escaped"]
                  if e["reduction_size"] and e["error"] is not None]
        if points:
            size, error = np.array(points, dtype=float).T
            ax.scatter(size, np.maximum(error, ERROR_FLOOR), s=9, alpha=0.6, color="tab:blue", linewidths=0)
        ax.axhline(o["tolerance"], color="tab:red", linewidth=1, label=f"tolerance {o['tolerance']:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{o['name']} ({len(points)} escaped)")
        ax.legend(loc="upper left")
    for ax in axes[len(oracles):]:
        ax.set_visible(False)
    fig.supxlabel("reduction size of the problem")
    fig.supylabel(f"error E = max |out − ref| / (1 + |ref|)  (E = 0 drawn at {ERROR_FLOOR:g})")
    return _png(fig)


def ceiling(c: dict[str, Any]) -> bytes:
    """A heat map: the share of trials on which each oracle's rule rejects the original kernels, per input
    family (rows) and oracle (columns)."""
    oracles = c["oracles"]
    families = sorted({f["family"] for o in oracles for f in o["ceiling"]["families"]})
    rates = np.full((len(families), len(oracles)), np.nan)
    for j, o in enumerate(oracles):
        for f in o["ceiling"]["families"]:
            rates[families.index(f["family"]), j] = 100 * f["rate"]
    fig = _figure(1.0 * len(oracles) + 3.5, 0.22 * len(families) + 1.8)
    ax = fig.add_subplot()
    image = ax.imshow(rates, cmap="Reds", vmin=0, vmax=100, aspect="auto")
    for (i, j), value in np.ndenumerate(rates):
        if not math.isnan(value) and value > 0:
            ax.text(j, i, f"{value:.0f}", ha="center", va="center", fontsize=7,
                    color="white" if value > 60 else "black")
    ax.set_xticks(range(len(oracles)), [o["name"] for o in oracles], rotation=30, ha="right")
    ax.set_yticks(range(len(families)), families, fontsize=7)
    ax.grid(False)
    ax.set_title("Original kernels rejected per input family (% of trials, each oracle's own tolerance)")
    fig.colorbar(image, ax=ax, label="% of trials rejected", shrink=0.6)
    return _png(fig)


def minimize_curve(c: dict[str, Any]) -> bytes:
    """Detection of the minimized suite against its inputs per problem: in sample, greedy and held out, with
    the base oracle as published."""
    m = c["minimize"]
    fig = _figure(6, 3.6)
    ax = fig.add_subplot()
    k = [p["budget"] for p in m["curve"]]
    for key, label, style in (("in_sample", "in sample (integer program)", "o-"), ("greedy", "greedy", "s--"),
                              ("heldout", "held out (random folds)", "^-")):
        ax.plot(k, [_percent(p.get(key)) for p in m["curve"]], style, label=label, markersize=4)
    if m.get("base_detection") is not None:
        ax.axhline(100 * m["base_detection"], color="gray", linestyle=":", label=f"{m.get('base', 'base')} as published")
    ax.set_xticks(k)
    ax.set_xlabel("inputs per problem (K)")
    ax.set_ylabel("detection (%)")
    ax.set_title("Minimized suite: detection by suite size")
    ax.legend(loc="lower right")
    return _png(fig)


def figures(c: dict[str, Any]) -> dict[str, tuple[bytes, str]]:
    """Every figure of the report: file name → (PNG bytes, what it shows), in the report's order."""
    from matplotlib import rc_context

    drawn = [("detection.png", detection_overview, "Detection of witnessed mutants per oracle"),
             ("families.png", detection_by_family, "Detection by mutation family, one bar per oracle"),
             ("tolerance.png", tolerance_curves, "Detection and false alarms against the tolerance"),
             ("tolerance_by_family.png", tolerance_by_family, "Tolerance curve of each mutation family"),
             ("blind_band.png", blind_band, "Escaped mutants' error against reduction size, with the tolerance"),
             ("ceiling.png", ceiling, "Original kernels rejected per input family")]
    if c.get("minimize"):
        drawn.append(("minimize.png", minimize_curve, "Minimized suite: detection by inputs per problem"))
    with rc_context(STYLE):
        return {name: (draw(c), caption) for name, draw, caption in drawn}
