"""Chaos's results drawn (a latency timeline with the faults) and printed (a table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(13, 5.5))
    colours = {"exact": "tab:green", "reworded": "tab:olive", "edge": "tab:blue",
               "core": "tab:purple"}  # fmt: skip
    for kind, colour in colours.items():
        ok = [r for r in results["requests"] if r["kind"] == kind and r["outcome"] == "ok"]
        ax.scatter([r["end"] for r in ok], [max(r["ms"], 0.5) for r in ok], s=6, c=colour,
                   label=f"{kind} ok", alpha=0.6)  # fmt: skip
    bad = [r for r in results["requests"] if r["outcome"] != "ok"]
    marks = {"503": "v", "429": "^", "other": "s", "hung": "X", "lost": "D", "refused": "*"}
    for outcome, marker in marks.items():
        rows = [r for r in bad if r["outcome"] == outcome]
        if rows:
            ax.scatter([r["end"] for r in rows], [max(r["ms"], 0.5) for r in rows], s=28,
                       c="tab:red", marker=marker, label=outcome)  # fmt: skip
    for i, f in enumerate(results["faults"]):
        end = f["ended"] if f["ended"] and f["ended"] > f["at"] else f["at"] + 0.5
        ax.axvspan(f["at"], end, color="tab:red", alpha=0.15)
        if f["recover_s"] is not None:
            ax.axvspan(end, end + f["recover_s"], color="tab:orange", alpha=0.12)
        ax.annotate(f"{f['action']} {f['component']}", (f["at"], 1.0 - 0.06 * (i % 3)),
                    xycoords=("data", "axes fraction"), fontsize=8, va="top")  # fmt: skip
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the load began")
    ax.set_ylabel("request latency (ms, log)")
    ax.set_title("edgecore chaos: faults (red: frozen/killed, orange: until recovered) and latency")
    ax.legend(loc="lower right", fontsize=7, ncols=3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(results: dict[str, Any]) -> str:
    cols = ("sent", "ok", "degraded", "503", "429", "other", "hung", "lost", "refused")
    lines = [f"{'kind':<10}" + "".join(f"{c:>9}" for c in cols)]
    for kind, counts in results["outcomes"].items():
        lines.append(f"{kind:<10}" + "".join(f"{counts[c]:>9}" for c in cols))
    lines.append("")
    lines.append(f"{'latency (ok)':<18}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}")
    for name, lat in results["latency"].items():
        p50 = "-" if lat["p50_ms"] is None else f"{lat['p50_ms']:.0f}"
        p99 = "-" if lat["p99_ms"] is None else f"{lat['p99_ms']:.0f}"
        lines.append(f"{name:<18}{lat['n']:>6}{p50:>10}{p99:>10}")
    lines.append("")
    lines.append(f"{'fault':<17}{'at s':>7}{'detect(readyz)':>16}{'detect(req)':>13}"
                 f"{'recover':>9}{'recover(readyz)':>17}{'evictions':>11}  note")  # fmt: skip

    def s(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    for f in results["faults"]:
        evictions = "-" if f.get("evictions") is None else str(f["evictions"])
        lines.append(
            f"{f['action'] + ' ' + f['component']:<17}{f['at']:>7.1f}{s(f['detect_readyz_s']):>16}"
            f"{s(f['detect_request_s']):>13}{s(f['recover_s']):>9}{s(f['recover_readyz_s']):>17}"
            f"{evictions:>11}  {f['note']}"
        )
    lines.append("")
    before, after = results["rss_mb"]["before"], results["rss_mb"]["after"]
    lines.append("RSS MB   " + "  ".join(f"{k} {before.get(k)} -> {after.get(k)}" for k in before))
    lines.append(f"restarts (edgecore status): {results['restarts']}")
    return "\n".join(lines)
