"""`keras-transformer serve`: an HTTP server with TF Serving's REST API over any artifact."""

from keras_transformer.cli.settings import add_language_flags
from keras_transformer.cli.settings import length_penalty
from keras_transformer.cli.settings import positive_int


def _non_negative_float(text):
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def _port(text):
    import argparse

    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {text!r}")
    return int(text)


def cmd_serve(args):
    import logging
    import sys

    from keras_transformer.serving import ServerSettings
    from keras_transformer.serving import load_served_model
    from keras_transformer.serving import serve
    from keras_transformer.serving import warm_up
    from keras_transformer.serving import warm_up_shapes

    if args.compile_cache is not None:  # before TensorFlow's first computation, which reads its XLA flags
        from keras_transformer.decoding.compile_cache import enable_compile_cache

        try:
            enable_compile_cache(args.compile_cache or None)
        except OSError as error:
            raise SystemExit(f"keras-transformer serve: {error.strerror} (--compile-cache DIR, or --no-compile-cache)")
    if args.threads:
        import os

        import tensorflow as tf

        # Before the model loads: TensorFlow's (and XLA's) intra-op pool, and CTranslate2's OpenMP threads.
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    settings = ServerSettings(
        max_batch_size=args.max_batch_size, batch_timeout_ms=args.batch_timeout_ms, max_queued=args.max_queued,
        max_instances=args.max_instances, max_body_bytes=args.max_body_bytes, timeout_s=args.timeout_s,
        max_streams=args.max_streams, batching=args.batching, steps_per_call=args.steps_per_call,
        signatures=None if args.signatures == ["all"] else tuple(args.signatures), max_n_best=args.max_n_best,
        max_decode_rows=args.max_decode_rows, allow_hosts=tuple(args.allow_host), max_connections=args.max_connections,
        body_timeout_s=args.body_timeout_s, max_request_tokens=args.max_request_tokens,
        refusals_per_s=args.refusals_per_s, refusal_delay_s=args.refusal_delay_s)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    decoding = {"beam_size": args.beam_size, "length_penalty": args.length_penalty, "max_length": args.max_length}
    served = load_served_model(args.artifact, args.model_name, decoding, settings, (args.source_lang, args.target_lang))
    print(f"keras-transformer serve: loaded {args.artifact} ({type(served.translator).__name__}); signatures: "
          f"{', '.join(served.signatures)}", file=sys.stderr, flush=True)
    engine = served.engine
    print("keras-transformer serve: " + (
        f"continuous batching: serving_default decodes in {engine.slots} slots that requests join between steps"
        if engine is not None else f"batch at a time ({served.engine_note})"), file=sys.stderr, flush=True)
    if args.warmup:
        import keras

        shapes = warm_up_shapes(served, settings)
        counts = {}
        for name, _, _ in shapes:
            counts[name] = counts.get(name, 0) + 1
        what = ", ".join(f"{name} at {count} shapes" for name, count in counts.items())
        print(f"keras-transformer serve: warming up {what} (source widths up to {max(w for *_, w in shapes)} tokens)"
              "; --no-warmup skips this", file=sys.stderr, flush=True)
        bar = keras.utils.Progbar(len(shapes), unit_name="shape")
        seconds = warm_up(served, settings, progress=lambda done, total: bar.update(done))
        print(f"keras-transformer serve: warmed up in {seconds:.1f} s", file=sys.stderr, flush=True)

    def ready(url):
        print(f"keras-transformer serve: serving {served.name!r} at {url}/v1/models/{served.name} "
              "(Ctrl-C stops after the requests it accepted)", file=sys.stderr, flush=True)

    serve(served, args.host, args.port, settings, on_ready=ready)
    return 0


def register(sub, common):
    """Adds this module's subcommand to the `keras-transformer` parser."""
    from keras_transformer.serving.settings import ServerSettings

    d = ServerSettings()
    p = sub.add_parser(
        "serve", parents=[common], help="serve an artifact over HTTP with TF Serving's REST API",
        description="Serve a run, an ensemble, a preset, a SavedModel, a TFLite file or a CTranslate2 directory over "
                    "HTTP with TF Serving's REST API (POST /v1/models/NAME:predict, GET /v1/models/NAME and "
                    "/metadata), batching concurrent requests. Signatures: serving_default for every artifact; "
                    "n_best, score and translate_with_prefix for a run, a SavedModel and a CTranslate2 directory; "
                    "align for a run; POST /v1/models/NAME:stream (one translation as it is decoded) for a run and "
                    "a CTranslate2 directory. SIGINT/SIGTERM stop it after the requests it accepted.")
    p.add_argument("artifact", metavar="ARTIFACT", help="what to serve: any path `keras-transformer translate` takes")
    p.add_argument("--port", type=_port, default=8501, help="TCP port (default 8501, TF Serving's REST port; 0: any)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
    p.add_argument("--model-name", default=None, help="NAME in /v1/models/NAME (default: the artifact's name)")
    p.add_argument("--beam-size", type=positive_int, default=None,
                   help="1 greedy, more for beam search (default: as the artifact decodes)")
    p.add_argument("--length-penalty", type=length_penalty, default=None, help="beam search's length penalty")
    p.add_argument("--max-length", type=positive_int, default=None, help="longest output in tokens")
    add_language_flags(p, requests=True)
    p.add_argument("--max-batch-size", type=positive_int, default=d.max_batch_size,
                   help=f"most sentences decoded together (default {d.max_batch_size})")
    p.add_argument("--batch-timeout-ms", type=_non_negative_float, default=d.batch_timeout_ms,
                   help="how long a batch waits for more requests after its first one "
                        f"(default {d.batch_timeout_ms:g} ms; 0: never waits)")
    _add_limit_flags(p.add_argument_group("limits (what exceeds one gets a JSON error)"), d)
    p.add_argument("--threads", type=positive_int, default=None,
                   help="CPU threads one batch decodes with (TensorFlow's intra-op pool, CTranslate2's threads; "
                        "default: the runtime's own, every core); fewer leave cores to other processes")
    p.add_argument("--batching", choices=("static", "continuous"), default=d.batching,
                   help="continuous (default): serving_default sentences join the running decode at its next step "
                        "and leave it when they end, where one model decodes (greedy, sampling, or beam search with a "
                        "slot's rows for its beams; ensembles, exported artifacts and the other signatures decode "
                        "batch at a time); static: "
                        "everything batch at a time (a batch runs until its longest sentence ends)")
    p.add_argument("--steps-per-call", type=positive_int, default=d.steps_per_call,
                   help="continuous batching: the most tokens the slots advance per compiled call, which returns "
                        f"early once a quarter of the busy slots ended (default {d.steps_per_call}); more save "
                        "per-call overhead, fewer let arriving sentences join sooner")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--compile-cache", metavar="DIR", default="",
                       help="keep the programs the warm-up compiles in DIR, so that a restart of the same model reads "
                            "them back instead of compiling them (TensorFlow's XLA and JAX; default "
                            "$XDG_CACHE_HOME/keras_transformer/compiled, else ~/.cache/keras_transformer/compiled)")
    cache.add_argument("--no-compile-cache", dest="compile_cache", action="store_const", const=None,
                       help="compile everything afresh and keep nothing on disk")
    p.add_argument("--warmup", action=__import__("argparse").BooleanOptionalAction, default=True,
                   help="compile what the server runs before listening (the engine's step and inserts, or a dummy "
                        "batch at each batch size), so the first requests compile nothing (default on)")
    p.set_defaults(func=cmd_serve)


def _add_limit_flags(p, d):
    """The flags of what the server refuses (`ServerSettings`' limits; `d` holds their defaults)."""
    p.add_argument("--max-queued", type=positive_int, default=d.max_queued,
                   help=f"most sentences waiting; more get HTTP 429 (default {d.max_queued})")
    p.add_argument("--max-instances", type=positive_int, default=d.max_instances,
                   help=f"most sentences in one request; more get HTTP 413 (default {d.max_instances})")
    p.add_argument("--max-body-bytes", type=positive_int, default=d.max_body_bytes,
                   help=f"largest request body; larger get HTTP 413 (default {d.max_body_bytes})")
    p.add_argument("--timeout-s", type=_non_negative_float, default=d.timeout_s,
                   help=f"a request not answered in time gets HTTP 504 (default {d.timeout_s:g} s)")
    p.add_argument("--max-streams", type=positive_int, default=d.max_streams,
                   help=f"most :stream requests at once; more get HTTP 429 (default {d.max_streams})")
    p.add_argument("--signatures", type=lambda text: text.split(","), default=list(d.signatures),
                   help="the signatures served, comma-separated, or all (default serving_default); each is compiled at "
                        "warm-up for every batch shape it can run")
    p.add_argument("--max-n-best", type=positive_int, default=d.max_n_best,
                   help=f"largest n_best a request may ask for (default {d.max_n_best}, at most 64); every n_best "
                        "request decodes this many hypotheses, at one compiled beam width")
    p.add_argument("--max-decode-rows", type=positive_int, default=d.max_decode_rows,
                   help="most decoder rows (sentences x beam width) in one compiled call, bounding a batch's memory "
                        f"(default {d.max_decode_rows})")
    p.add_argument("--max-request-tokens", type=positive_int, default=d.max_request_tokens,
                   help="the most a request may cost, in token rows: its sentences' source tokens plus the longest "
                        f"output, times the beam width; more get HTTP 413 (default {d.max_request_tokens})")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a Host header name to accept besides the address listened on and localhost (repeatable; "
                        "*: any); other names get HTTP 403, so that a web page cannot reach the server by DNS "
                        "rebinding")
    p.add_argument("--max-connections", type=positive_int, default=d.max_connections,
                   help=f"most open connections; more get HTTP 503 at once (default {d.max_connections})")
    p.add_argument("--body-timeout-s", type=_non_negative_float, default=d.body_timeout_s,
                   help=f"a request body not received in time gets HTTP 408 (default {d.body_timeout_s:g} s)")
    p.add_argument("--refusals-per-s", type=_non_negative_float, default=d.refusals_per_s,
                   help=f"refused requests (HTTP 4xx) a client address gets answered at once per second, after a burst "
                        f"of four seconds' worth (default {d.refusals_per_s:g}; 0: no limit); more are held up to "
                        "--refusal-delay-s, so a client refused in a loop cannot take the cores from the accepted "
                        "requests (which are never held)")
    p.add_argument("--refusal-delay-s", type=_non_negative_float, default=d.refusal_delay_s,
                   help=f"the longest a refusal is held (default {d.refusal_delay_s:g} s)")
