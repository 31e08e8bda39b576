"""Cache hit path: edgecore's semantic cache next to RedisVL's ``SemanticCache``.

    .venv/bin/python -m bench.cache_hit_path [--entries 200] [--requests 2000]
        [--baseline REF] [--profile]

Same Redis server (the bundled Redis Stack), same MiniLM INT8 embedder (one batching
instance shared by both), same entries. For 1, 16 and 64 concurrent clients it times:
- ``lookup``: the vector is given; edgecore's KNN (partition-filtered) + match
  decision vs RedisVL's ``acheck(vector=...)`` (the issue's "lookup no slower than check()");
  in these three paths edgecore and RedisVL take turns, five rounds each, pooled;
- ``embed+lookup``: the semantic path from the prompt text, embedding included, for both;
- ``repeat``: the same question again, word for word: edgecore answers it from its exact
  step (no embedding), RedisVL embeds and searches as always;
- ``http``: a cache hit over HTTP at a real edge (auth, parsing, rate limits, the lookup
  and the JSON answer), edgecore only: RedisVL is a library, not a server;
- ``http-floor``: the same request to a bare Starlette app on the same Hypercorn config
  (``bench.fake_upstream``: parse the body, answer one JSON completion; no middleware,
  auth, Redis or cache), with the same clients: what any hit over this server costs, so
  ``http / http-floor`` is the share of the server's best that the edge keeps;
- ``http-reworded``: the same over HTTP for a reworded question ("what's" for "what is"),
  which no exact step can answer: embedding, KNN and the matcher's rewording step run;
- ``http-verified``: a question with an added word ("what exactly is"): embedding, KNN and
  the MLP verifier all run (the first edge runs the MLP alone). The edge
  runs with exploration off, so every such hit is served. A second edge on the same index
  repeats it with the cross-encoder on (``http-verified+cross-encoder``), and a third with
  it reading every candidate, as before the borderline band (``+cross-encoder/every``);
  those two take turns, five rounds at each concurrency (``bench.common.alternating``).
With ``--baseline REF``, an edge running that commit serves the same index beside the
current one, and the two take turns the same way: one edge's whole run after the other's
reads the machine's drift as a difference (stop 54: 0.61x for a change that reads 0.98x by
turns).
Prints a table, writes JSON and a PNG next to it. Compare ratios: machines here are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from threadpoolctl import threadpool_limits

from bench.common import (
    RESULTS,
    Results,
    alternating,
    baseline,
    child,
    commit_of,
    edge_server,
    free_port,
    load,
    progress,
    redis_server,
    run_bench,
)
from edge.cache.keys import conversation_text
from edge.cache.loading import load_matcher
from edge.cache.store import CachedAnswer, SemanticCache, connect
from edge.embedder import BatchingEmbedder, Embedder
from edge.settings import EdgeSettings
from edge.tenancy.keys import add_key
from shared.schemas import Message

CLIENTS = (1, 16, 64)
EDGE_MODEL = "edge-smollm2-135m"


def prompts(n: int) -> list[str]:
    topics = ["Redis", "Python", "Kubernetes", "HTTP/2", "vLLM", "ONNX", "TLS", "DNS"]
    return [f"In one sentence, what is {topics[i % len(topics)]}? (#{i})" for i in range(n)]


def reworded(prompt: str) -> str:
    """A rewording the matcher's rewording step answers (no model)."""
    return prompt.replace("what is", "what's")


def verified(prompt: str) -> str:
    """A rewording only the verifier can answer (an added word)."""
    return prompt.replace("what is", "what exactly is")


def embed_text(prompt: str) -> str:
    return conversation_text([Message(role="user", content=prompt)], 1)


async def in_process(port: int, entries: list[str], requests: int) -> dict[str, Any]:
    from redisvl.extensions.cache.llm import SemanticCache as RedisVLCache
    from redisvl.utils.vectorize import CustomTextVectorizer

    settings = EdgeSettings()
    embedder = BatchingEmbedder(
        Embedder(settings.embed_model_dir()), workers=settings.embed.worker_count()
    )
    embedder.start()
    matcher = load_matcher(settings)

    def embed_sync(text: str) -> list[float]:
        return [float(x) for x in embedder.embedder.embed([text])[0]]

    async def aembed(text: str) -> list[float]:
        return [float(x) for x in await embedder.embed(text)]

    redis = connect(f"redis://127.0.0.1:{port}", timeout_s=settings.redis.timeout_s)  # as the edge
    ours = SemanticCache(
        redis,
        index=f"bench:ec:{uuid.uuid4().hex[:6]}",
        dim=embedder.dim,
        ttl_s=3600,
        top_k=settings.cache.top_k,
        floor=settings.cache.candidate_floor,
    )
    theirs = RedisVLCache(
        name=f"bench_rvl_{uuid.uuid4().hex[:6]}",
        redis_url=f"redis://127.0.0.1:{port}",
        vectorizer=CustomTextVectorizer(embed=embed_sync, aembed=aembed),
        distance_threshold=0.1,  # cosine distance: similarity >= 0.9
    )
    texts = [embed_text(p) for p in entries]
    vectors = embedder.embedder.embed(texts)
    progress(f"storing {len(entries)} entries in both caches ...")
    for prompt, text, vec in zip(entries, texts, vectors, strict=True):
        answer = CachedAnswer(content=f"answer to {prompt}", finish_reason="stop", usage=None,
                              model=EDGE_MODEL, prompt=prompt)  # fmt: skip
        await ours.store(vec, partition="bench", context="none", answer=answer,
                         tenant="bench", max_entries=10**6)  # fmt: skip
        await theirs.astore(prompt=text, response=answer.content, vector=[float(x) for x in vec])

    async def ec_lookup(i: int, vec: np.ndarray | None = None) -> None:
        k = i % len(entries)
        v = vectors[k] if vec is None else vec
        found = await ours.lookup(v, partition="bench", context="none")
        match = matcher.decide(v, entries[k], [c for c, _ in found])
        if not match.serve:
            raise RuntimeError(f"edgecore missed entry {k}: {match}")

    async def ec_embed_lookup(i: int) -> None:
        await ec_lookup(i, await embedder.embed(texts[i % len(entries)]))

    async def ec_repeat(i: int) -> None:
        k = i % len(entries)
        if await ours.lookup_exact(partition="bench", context="none", text=entries[k]) is None:
            raise RuntimeError(f"edgecore exact step missed entry {k}")

    async def rvl_lookup(i: int) -> None:
        k = i % len(entries)
        if not await theirs.acheck(vector=[float(x) for x in vectors[k]]):
            raise RuntimeError(f"RedisVL missed entry {k}")

    async def rvl_embed_lookup(i: int) -> None:
        if not await theirs.acheck(prompt=texts[i % len(entries)]):
            raise RuntimeError("RedisVL missed")

    # Each edgecore path and RedisVL's in turns, pooled (bench.common.alternating).
    results: dict[str, Any] = {}
    for kind, ec, rvl in (
        ("lookup", ec_lookup, rvl_lookup),
        ("embed+lookup", ec_embed_lookup, rvl_embed_lookup),
        ("repeat", ec_repeat, rvl_embed_lookup),
    ):
        for clients in CLIENTS:
            progress(f"{kind}, edgecore and redisvl in turns, at {clients} clients ...")
            await ec(0)  # warm up
            await rvl(0)
            runs = await alternating(
                {"edgecore": ec, "redisvl": rvl}, requests=requests, clients=clients
            )
            results |= {f"{kind}/{name}@{clients}": run for name, run in runs.items()}
    await theirs.adelete()
    await redis.aclose()
    await embedder.close()
    return results


@dataclass(frozen=True)
class Reply:
    """What a user read back: the parts of a response these paths check."""

    status_code: int
    headers: Mapping[str, str]  # case-insensitive, as aiohttp gives them
    text: str

    def json(self) -> Any:
        return json.loads(self.text)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise RuntimeError(f"{self.status_code}: {self.text[:200]}")


async def _users(
    stack: contextlib.AsyncExitStack, url: str, headers: dict[str, str]
) -> asyncio.Queue[aiohttp.ClientSession]:
    """One session (one keep-alive connection) per simulated user. aiohttp, not httpx: the
    client shares these 2 cores with the server it measures, and httpx's client took about
    400 us of CPU per request (stop 55, 16 clients), more than the bare server it was
    measuring (175-220 us), so "the server's floor" was mostly the client's; aiohttp's took
    90-150 us. (A shared pool per client was worse still: httpcore scans every connection
    on each request.)"""
    users: asyncio.Queue[aiohttp.ClientSession] = asyncio.Queue()
    timeout = aiohttp.ClientTimeout(total=60)
    for _ in range(max(CLIENTS)):
        user = aiohttp.ClientSession(
            base_url=url,
            headers=headers,
            connector=aiohttp.TCPConnector(limit=1),
            timeout=timeout,
        )
        users.put_nowait(await stack.enter_async_context(user))
    return users


def body(prompt: str) -> dict[str, Any]:
    return {"model": EDGE_MODEL, "temperature": 0, "max_tokens": 64,
            "messages": [{"role": "user", "content": prompt}]}  # fmt: skip


async def _post(users: asyncio.Queue[aiohttp.ClientSession], prompt: str) -> Reply:
    """``prompt`` asked by the next free user."""
    user = await users.get()
    try:
        async with user.post("/v1/chat/completions", json=body(prompt)) as r:
            return Reply(r.status, r.headers, await r.text())
    finally:
        users.put_nowait(user)


async def floor(url: str, entries: list[str], requests: int) -> dict[str, Any]:
    """The same asks, with the same clients, to a bare app on the same server."""
    results: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        users = await _users(stack, url, {})
        for clients in CLIENTS:
            progress(f"http-floor at {clients} clients ...")

            async def ask(i: int) -> None:
                (await _post(users, entries[i % len(entries)])).raise_for_status()

            results[f"http-floor/bare@{clients}"] = await load(
                ask, requests=requests, clients=clients
            )
    return results


async def over_http(
    urls: dict[str, str],
    key: str,
    entries: list[str],
    requests: int,
    *,
    seed: bool = True,
    every_path: bool = True,
) -> dict[str, Any]:
    """Hits over HTTP at each edge of ``urls`` (its variant, "" for the first, to its URL),
    all on one index: the first edge seeds it when ``seed``. With several edges they take
    turns at each path and concurrency (``alternating``), so a machine that slows down
    during the run slows them alike; timed on verified rewordings only unless
    ``every_path``."""
    async with contextlib.AsyncExitStack() as stack:
        users = {
            variant: await _users(stack, url, {"authorization": f"Bearer {key}"})
            for variant, url in urls.items()
        }
        if seed:
            await _seed(next(iter(users.values())), entries)
        served = {variant: await _served(u, entries) for variant, u in users.items()}
        results: dict[str, Any] = {
            f"{how}_rewordings{variant}": f"{len(qs)}/{len(entries)}"
            for variant, found in served.items()
            for how, qs in found.items()
        }
        paths = {"http": "", "http-reworded": "reworded", "http-verified": "verified"}
        if not every_path:
            paths = {"http-verified": "verified"}
        for path, how in paths.items():
            for clients in CLIENTS:
                ops = {
                    f"{path}{variant}/edgecore": _asking(users[variant], qs)
                    for variant in urls
                    if (qs := served[variant][how] if how else entries)
                }
                if not ops:
                    continue
                progress(f"{', '.join(ops)} at {clients} clients ...")
                timed = await alternating(ops, requests=requests, clients=clients)
                results |= {f"{name}@{clients}": r for name, r in timed.items()}
    return results


async def _seed(user_pool: asyncio.Queue[aiohttp.ClientSession], entries: list[str]) -> None:
    """Each entry answered by the edge model and remembered (asked until it is a hit)."""
    progress(f"seeding {len(entries)} answers through the edge model ...")
    for prompt in entries:
        for _ in range(50):
            r = await _post(user_pool, prompt)
            r.raise_for_status()
            if r.headers.get("x-edgecore-tier") == "cache":
                break
            if r.json()["choices"][0]["finish_reason"] != "stop":
                raise RuntimeError(f"edge model did not finish {prompt!r}; shorten it")
            await asyncio.sleep(0.05)


async def _ask(users: asyncio.Queue[aiohttp.ClientSession], prompt: str) -> Reply:
    r = await _post(users, prompt)
    if r.status_code != 200 or r.headers.get("x-edgecore-tier") != "cache":
        cache = r.headers.get("x-edgecore-cache")
        raise RuntimeError(f"not a cache hit ({cache}): {r.status_code} {r.text[:200]}")
    return r


async def _served(
    users: asyncio.Queue[aiohttp.ClientSession], entries: list[str]
) -> dict[str, list[str]]:
    """The rewordings this edge serves as intended (a miss would time the edge model)."""
    progress("finding rewordings the matcher serves ...")
    served: dict[str, list[str]] = {"reworded": [], "verified": []}
    for prompt in entries:
        for how, rewrite in (("reworded", reworded), ("verified", verified)):
            with contextlib.suppress(RuntimeError):
                r = await _ask(users, rewrite(prompt))
                if r.headers.get("x-edgecore-cache-match", "").startswith(how):
                    served[how].append(rewrite(prompt))
    return served


def _asking(
    users: asyncio.Queue[aiohttp.ClientSession], questions: list[str]
) -> Callable[[int], Awaitable[None]]:
    async def hit(i: int) -> None:
        await _ask(users, questions[i % len(questions)])

    return hit


def table(results: dict[str, Any]) -> str:
    lines = [f"{'path':<28}{'clients':>8}{'p50 ms':>9}{'p99 ms':>9}{'per s':>9}"]
    for name, r in results["runs"].items():
        if "@" not in name:
            continue
        path = name.split("@")[0]
        lines.append(
            f"{path:<28}{r['clients']:>8}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['per_s']:>9.0f}"
        )
    for name, value in results["ratios"].items():
        lines.append(f"ratio {name}: {value}")
    return "\n".join(lines)


def ratios(runs: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for kind in ("lookup", "embed+lookup", "repeat"):
        for clients in CLIENTS:
            ec, rvl = runs[f"{kind}/edgecore@{clients}"], runs[f"{kind}/redisvl@{clients}"]
            out[f"{kind} p50 edgecore/redisvl @{clients}"] = round(ec["p50_ms"] / rvl["p50_ms"], 2)
    for clients in CLIENTS:  # the share of the bare server's rate the edge keeps
        hit, bare = runs.get(f"http/edgecore@{clients}"), runs.get(f"http-floor/bare@{clients}")
        if hit and bare:
            out[f"http per s edge/bare server @{clients}"] = round(hit["per_s"] / bare["per_s"], 2)
            out[f"http-floor per s / in-process repeat @{clients}"] = round(
                bare["per_s"] / runs[f"repeat/edgecore@{clients}"]["per_s"], 3
            )
    for path in ("http", "http-reworded", "http-verified"):  # --baseline: after / before
        for clients in CLIENTS:
            now, before = (
                runs.get(f"{path}/edgecore@{clients}"),
                runs.get(f"{path}-before/edgecore@{clients}"),
            )
            if now and before:
                out[f"{path} per s after/before @{clients}"] = round(
                    now["per_s"] / before["per_s"], 2
                )
    return out


# One panel per path; in each, what it is compared with in the same run, side by side.
PANELS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("lookup, vector given", "p50_ms", (("edgecore", "lookup/edgecore"),
                                        ("RedisVL", "lookup/redisvl"))),
    ("embedding + lookup", "p50_ms", (("edgecore", "embed+lookup/edgecore"),
                                      ("RedisVL", "embed+lookup/redisvl"))),
    ("the same question again", "p50_ms", (("edgecore", "repeat/edgecore"),
                                           ("RedisVL", "repeat/redisvl"))),
    ("exact hit over HTTP", "per_s", (("after", "http/edgecore"),
                                      ("before", "http-before/edgecore"),
                                      ("bare server", "http-floor/bare"))),
    ("reworded hit over HTTP", "per_s", (("after", "http-reworded/edgecore"),
                                         ("before", "http-reworded-before/edgecore"))),
    ("verified hit over HTTP", "per_s", (("after", "http-verified/edgecore"),
                                         ("before", "http-verified-before/edgecore"),
                                         ("+cross-encoder", "http-verified+cross-encoder/edgecore"),
                                         ("+cross-encoder/every",
                                          "http-verified+cross-encoder/every/edgecore"))),
)  # fmt: skip


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.5))
    x = np.arange(len(CLIENTS))
    for ax, (title, measure, bars) in zip(axes.flat, PANELS, strict=True):
        present = [(label, name) for label, name in bars if f"{name}@{CLIENTS[0]}" in runs]
        width = 0.8 / max(len(present), 1)
        for i, (label, name) in enumerate(present):
            values = [runs.get(f"{name}@{c}", {}).get(measure, 0.0) for c in CLIENTS]
            ax.bar(x + i * width, values, width, label=label)
        ax.set_xticks(x + 0.4 - width / 2, [f"{c} clients" for c in CLIENTS])
        if measure == "p50_ms":  # 0.2 ms to 200 ms across clients
            ax.set_yscale("log")
        unit = "p50 ms (lower is better)" if measure == "p50_ms" else "per second"
        ax.set_title(f"{title}: {unit}", fontsize=10)
        if present:
            ax.legend(fontsize=8)
    base = results.get("baseline")
    fig.suptitle("Cache hit path: edgecore against RedisVL's SemanticCache (same Redis, same "
                 f"MiniLM), and over HTTP{f' against {base[:7]}' if base else ''}")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--entries", type=int, default=200)
    parser.add_argument("--requests", type=int, default=2000, help="per path and concurrency")
    parser.add_argument("--http-entries", type=int, default=16, help="answers seeded via HTTP")
    parser.add_argument(
        "--baseline", default=None, metavar="REF",
        help="also serve the HTTP paths from an edge at this commit, taking turns with this one",
    )  # fmt: skip
    parser.add_argument(
        "--profile", action="store_true",
        help="sample the first edge with py-spy: a flame graph of its hits beside the JSON",
    )  # fmt: skip


def run_all(args: argparse.Namespace) -> Results:
    entries = prompts(args.entries)
    with redis_server() as port:
        # As at the edge (EdgeSettings.blas_threads): the verifier's products on one thread.
        with threadpool_limits(limits=1, user_api="blas"):
            runs = asyncio.run(in_process(port, entries, args.requests))
        tmp = Path(tempfile.mkdtemp())
        key = add_key(tmp / "keys.toml", "bench")
        edge: dict[str, Any] = {
            "redis__url": f"redis://127.0.0.1:{port}/0",
            "keys_file": str(tmp / "keys.toml"),
            "core__url": f"http://127.0.0.1:{free_port()}",  # nothing there: edge model and cache
            "cache__index": f"bench:http:{uuid.uuid4().hex[:6]}",
            "cache__explore_rate": "0",
        }
        http_entries = entries[: args.http_entries]
        bare = free_port()
        with child([sys.executable, "-m", "bench.fake_upstream", str(bare)], tmp / "bare.log",
                   ready=f"http://127.0.0.1:{bare}/readyz"):  # fmt: skip
            runs |= asyncio.run(floor(f"http://127.0.0.1:{bare}", http_entries, args.requests))
        profile = (args.out or RESULTS / "cache_hit_path.json").with_suffix(".edge.svg")
        with contextlib.ExitStack() as edges:
            urls = {"": edges.enter_context(
                edge_server(tmp / "edge.log", profile=profile if args.profile else None, **edge,
                            cache__cross_encoder="false"))}  # fmt: skip
            if args.baseline:  # the same index and entries, served by an edge at that commit
                tree = edges.enter_context(baseline(args.baseline, tmp))
                urls["-before"] = edges.enter_context(
                    edge_server(tmp / "edge-before.log", source=tree, **edge,
                                cache__cross_encoder="false"))  # fmt: skip
            runs |= asyncio.run(over_http(urls, key, http_entries, args.requests))
        # The same index and entries, with the cross-encoder stacked on the verifier: as it
        # runs (only where it can change the decision), and reading every candidate.
        with contextlib.ExitStack() as edges:
            urls = {
                variant: edges.enter_context(
                    edge_server(tmp / f"edge{variant.replace('/', '-')}.log", **edge,
                                cache__cross_encoder="true", cache__cross_encoder_band=band))
                for variant, band in (("+cross-encoder", "true"), ("+cross-encoder/every", "false"))
            }  # fmt: skip
            runs |= asyncio.run(
                over_http(urls, key, http_entries, args.requests, seed=False, every_path=False)
            )
    return {"entries": args.entries, "requests": args.requests, "runs": runs,
            "ratios": ratios(runs),
            "baseline": commit_of(args.baseline) if args.baseline else None}  # fmt: skip


def main() -> None:
    run_bench("cache_hit_path", __doc__, run_all, arguments=arguments, plot=plot, table=table)


if __name__ == "__main__":
    main()
