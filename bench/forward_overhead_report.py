"""The forward-overhead benchmark's analysis: each proxy's overhead over the direct path, the
targets it is held to, and the table and plot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import pct


def overheads(runs: dict[str, Any]) -> dict[str, Any]:
    """Each proxy's percentile minus the direct path's, per concurrency (ms)."""
    result: dict[str, Any] = {}
    for clients, paths in runs.items():
        direct = paths["direct"]["_raw"]
        for name in (p for p in paths if p != "direct"):
            raw = paths[name]["_raw"]
            result[f"{name}@{clients}"] = {
                f"{metric}_{q}_ms": round(pct(raw[metric], v) - pct(direct[metric], v), 3)
                for metric in ("ttft", "total")
                for q, v in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
            }
    return result


# Issue 35's targets: the edge adds at most a tenth of LiteLLM's TTFT overhead, serves at
# least 10x its requests per CPU-second, and its own overhead figure (the header) is within
# 20 % of what clients measure.
OVERHEAD_VS_LITELLM = 0.1
PER_CPU_VS_LITELLM = 10.0
HEADER_AGREES = 0.2


def targets(runs: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for clients, paths in runs.items():
        e, ll = over[f"edge@{clients}"], over[f"litellm@{clients}"]
        ecpu = paths["edge"].get("requests_per_cpu_s") or 0.0
        lcpu = paths["litellm"].get("requests_per_cpu_s") or 0.0
        measured, theirs = e["ttft_p50_ms"], ll["ttft_p50_ms"]
        header = (paths["edge"].get("edge_overhead_header") or {}).get("p50_ms")
        out[str(clients)] = {
            "edge_vs_litellm_overhead_p50": round(measured / theirs, 3) if theirs > 0 else None,
            "edge_overhead_le_tenth_of_litellm": measured <= OVERHEAD_VS_LITELLM * theirs,
            "edge_per_cpu_vs_litellm": round(ecpu / lcpu, 2) if lcpu else None,
            "edge_per_cpu_ge_10x": bool(lcpu) and ecpu >= PER_CPU_VS_LITELLM * lcpu,
            # What the edge says it added (x-edgecore-overhead-ms) against what it added.
            "edge_header_overhead_p50_ms": header,
            "edge_header_within_20pct": (
                header is not None and measured > 0
                and abs(header - measured) <= HEADER_AGREES * measured
            ),
        }  # fmt: skip
        if "before" in paths:  # --baseline: after / before, from the same rounds
            bcpu = paths["before"].get("requests_per_cpu_s") or 0.0
            b = over[f"before@{clients}"]
            out[str(clients)]["edge_per_cpu_vs_before"] = round(ecpu / bcpu, 2) if bcpu else None
            out[str(clients)]["edge_ttft_overhead_p50_vs_before_ms"] = round(
                e["ttft_p50_ms"] - b["ttft_p50_ms"], 3
            )
        if "direct-h2" in paths:  # HTTP/2's own cost: the header leaves the core's hop out
            h2 = over[f"direct-h2@{clients}"]["ttft_p50_ms"]
            beyond = measured - h2
            out[str(clients)] |= {
                "http2_overhead_p50_ms": h2,
                "edge_overhead_beyond_http2_p50_ms": round(beyond, 3),
                "edge_header_within_20pct_beyond_http2": (
                    header is not None and beyond > 0
                    and abs(header - beyond) <= HEADER_AGREES * beyond
                ),
            }  # fmt: skip
        if "bare" in paths:  # the same server and client with no edgecore code: the floor
            bare, bcpu = over[f"bare@{clients}"]["ttft_p50_ms"], paths["bare"]["requests_per_cpu_s"]
            out[str(clients)] |= {
                "bare_vs_litellm_overhead_p50": round(bare / theirs, 3) if theirs > 0 else None,
                "bare_overhead_p50_ms": bare,
                "bare_per_cpu_vs_litellm": round(bcpu / lcpu, 2) if lcpu and bcpu else None,
                "edge_per_cpu_vs_bare": round(ecpu / bcpu, 2) if bcpu else None,
            }
    return out


def table(results: dict[str, Any]) -> str:
    lines = []
    head = (
        f"{'upstream':<9}{'clients':>8} {'path':<9}{'TTFT p50':>9}{'p95':>8}{'p99':>8}"
        f"{'total p50':>10}{'p95':>8}{'p99':>8}{'req/s':>8}{'req/CPU-s':>10}"
    )
    for upstream, data in results["upstreams"].items():
        lines.append(head)
        for clients, paths in data["runs"].items():
            for name, r in paths.items():
                t, tot = r["ttft"], r["total"]
                per_cpu = r.get("requests_per_cpu_s")
                lines.append(
                    f"{upstream:<9}{clients:>8} {name:<9}{t['p50_ms']:>9.2f}{t['p95_ms']:>8.2f}"
                    f"{t['p99_ms']:>8.2f}{tot['p50_ms']:>10.2f}{tot['p95_ms']:>8.2f}"
                    f"{tot['p99_ms']:>8.2f}{r['per_s']:>8.1f}"
                    + (f"{per_cpu:>10.1f}" if per_cpu else f"{'-':>10}")
                )
        lines.append(
            f"{'':<9}{'clients':>8} {'overhead':<9}{'TTFT p50':>9}{'p95':>8}{'p99':>8}"
            f"{'total p50':>10}{'p95':>8}{'p99':>8}{'edge hdr':>9}"
        )
        for name, o in data["overhead_ms"].items():
            proxy, clients = name.split("@")
            hdr = data["runs"][clients][proxy].get("edge_overhead_header")
            lines.append(
                f"{upstream:<9}{clients:>8} {proxy:<9}{o['ttft_p50_ms']:>9.2f}"
                f"{o['ttft_p95_ms']:>8.2f}{o['ttft_p99_ms']:>8.2f}{o['total_p50_ms']:>10.2f}"
                f"{o['total_p95_ms']:>8.2f}{o['total_p99_ms']:>8.2f}"
                + (f"{hdr['p50_ms']:>9.2f}" if hdr else "")
            )
        for clients, t in data["targets"].items():
            hdr = t["edge_header_overhead_p50_ms"]
            lines.append(
                f"targets {upstream} @{clients}: edge TTFT overhead p50 "
                f"{t['edge_vs_litellm_overhead_p50']}x LiteLLM's "
                f"(<= {OVERHEAD_VS_LITELLM}x: {_yes(t['edge_overhead_le_tenth_of_litellm'])}); "
                f"req/CPU-s edge/LiteLLM {t['edge_per_cpu_vs_litellm']}x "
                f"(>= {PER_CPU_VS_LITELLM:g}x: {_yes(t['edge_per_cpu_ge_10x'])}); "
                f"header p50 {hdr if hdr is None else f'{hdr:.2f}'} ms vs measured "
                f"(within {HEADER_AGREES:.0%}: {_yes(t['edge_header_within_20pct'])})"
            )
            if "http2_overhead_p50_ms" in t:
                agrees = _yes(t["edge_header_within_20pct_beyond_http2"])
                lines.append(
                    f"http/2 {upstream} @{clients}: straight to the upstream over HTTP/2 adds "
                    f"{t['http2_overhead_p50_ms']:.2f} ms TTFT p50; the edge adds "
                    f"{t['edge_overhead_beyond_http2_p50_ms']:.2f} ms beyond it, the header "
                    f"{hdr if hdr is None else f'{hdr:.2f}'} ms "
                    f"(within {HEADER_AGREES:.0%}: {agrees})"
                )
            if "bare_overhead_p50_ms" in t:
                lines.append(
                    f"floor {upstream} @{clients}: a bare relay on the same server and client "
                    f"adds {t['bare_overhead_p50_ms']:.2f} ms TTFT p50, "
                    f"{t['bare_vs_litellm_overhead_p50']}x LiteLLM's; its req/CPU-s "
                    f"{t['bare_per_cpu_vs_litellm']}x LiteLLM's; the edge keeps "
                    f"{t['edge_per_cpu_vs_bare']}x of the bare relay's req/CPU-s"
                )
            if "edge_per_cpu_vs_before" in t:
                lines.append(
                    f"after vs before ({results.get('baseline')}) {upstream} @{clients}: "
                    f"req/CPU-s {t['edge_per_cpu_vs_before']}x, TTFT overhead p50 "
                    f"{t['edge_ttft_overhead_p50_vs_before_ms']:+.2f} ms"
                )
        lines.append("")
    return "\n".join(lines)


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


# The edge now, the edge at --baseline (before), LiteLLM, the bare relay (the floor).
COLORS = {"edge": "tab:blue", "before": "tab:cyan", "litellm": "tab:orange", "bare": "tab:gray"}


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ups = list(results["upstreams"])
    fig, axes = plt.subplots(len(ups), 2, figsize=(12, 4.2 * len(ups)), squeeze=False)
    for row, upstream in enumerate(ups):
        data = results["upstreams"][upstream]
        clients = list(data["runs"])
        x = np.arange(len(clients))
        proxies = [
            p
            for p in ("edge", "before", "litellm", "bare")
            if f"{p}@{clients[0]}" in data["overhead_ms"]
        ]
        ax = axes[row][0]
        bars = [(proxy, q) for proxy in proxies for q in ("p50", "p99")]
        width = 0.8 / len(bars)
        for i, (proxy, q) in enumerate(bars):
            vals = [data["overhead_ms"][f"{proxy}@{c}"][f"ttft_{q}_ms"] for c in clients]
            ax.bar(
                x + i * width,
                vals,
                width,
                label=f"{proxy} {q}",
                color=COLORS[proxy],
                alpha=1.0 if q == "p50" else 0.5,
            )
        ax.set_yscale("symlog", linthresh=1)
        ax.set_xticks(x + (len(bars) - 1) / 2 * width, [f"{c} clients" for c in clients])
        ax.set_title(f"{upstream}: TTFT overhead vs direct (ms, symlog)")
        ax.legend(fontsize=8, loc="upper left")
        ax = axes[row][1]
        width = 0.8 / len(proxies)
        for i, proxy in enumerate(proxies):
            vals = [data["runs"][c][proxy].get("requests_per_cpu_s") or 0 for c in clients]
            ax.bar(x + i * width, vals, width, label=proxy, color=COLORS[proxy])
        ax.set_xticks(x + (len(proxies) - 1) / 2 * width, [f"{c} clients" for c in clients])
        ax.set_title(f"{upstream}: requests per CPU-second of the proxy")
        ax.legend(fontsize=8)
    fig.suptitle("Forward path: edgecore edge vs LiteLLM proxy (same upstream, same run)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
