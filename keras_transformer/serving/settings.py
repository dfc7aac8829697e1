"""`ServerSettings`: the server's limits and batching, checked once (no web framework imported here)."""

import dataclasses

BATCHING = ("static", "continuous")


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """The server's limits and batching (`keras-transformer serve` flags of the same names).

    Attributes:
        max_batch_size: the most sentences decoded together (TF Serving's `max_batch_size`).
        batch_timeout_ms: how long a batch waits for more requests after its first (`batch_timeout_micros` / 1000);
            0: a batch takes what is queued when the worker is free (requests that arrive while a batch decodes
            form the next one), so a lone request never waits.
        max_queued: the most sentences waiting; a request beyond it gets 429.
        max_instances: the most sentences in one request (413 above it).
        max_body_bytes: the largest request body (413 above it).
        timeout_s: a request not answered within it gets 504 (its sentences are dropped if not yet started).
        max_streams: the most `:stream` requests decoding at once (429 beyond it).
        batching: `"continuous"` (default): `serving_default` sentences join the running decode at its next step
            and leave it when they end (a `SlotEngine` with `max_batch_size` slots; beam search: a
            `BeamSlotEngine`, a slot's rows holding its beams), where one model decodes (ensembles and exported
            artifacts decode batch at a time); `"static"`: batch at a time
            (a batch runs until its longest sentence ends; the next starts after it), for comparison.
        steps_per_call: the most tokens the engine's slots advance per compiled call (continuous batching); a call
            returns early once a quarter of the busy slots ended. More save per-call overhead; an arriving sentence
            waits for the running call to return.
        signatures: the signatures served (names; `None`: every one the artifact answers). Each is compiled at
            warm-up for every shape it can run, so the default serves `serving_default` alone.
        max_n_best: the largest `n_best` a request may ask for (400 above it). Every `n_best` request decodes at
            this one beam width (at least the decoding's beam) and gets its first `n_best` hypotheses: one
            compiled program, whatever values requests send.
        max_decode_rows: the most decoder rows (sentences x beam width) one compiled call holds: batches of a
            wide beam are cut into fewer sentences, so a request's memory is bounded whatever its options.
        max_request_tokens: the most a request may cost, in token rows: the sum over its sentences of source
            tokens plus output tokens (`max_length`), times the beam width; 413 above it (split the request).
        allow_hosts: `Host` names accepted besides the address listened on (and `localhost` on a loopback or
            every-interface address); `"*"`: any. Others get 403 (a DNS-rebinding page cannot reach the server).
        max_connections: the most open connections; more are answered 503 at once.
        body_timeout_s: a request body not received within it gets 408 (a slow client cannot hold a connection).
        refusals_per_s: each client address's refused requests (4xx) answered at once per second, after a burst of
            four seconds' worth; more are held up to `refusal_delay_s` (`serving.pacing`), so a client refused in a
            loop cannot take the cores from the accepted requests. Accepted requests are never held. 0: no pacing.
        refusal_delay_s: the longest a refusal is held.
    """

    max_batch_size: int = 32
    batch_timeout_ms: float = 0.0
    max_queued: int = 1024
    max_instances: int = 256
    max_body_bytes: int = 1 << 20
    timeout_s: float = 60.0
    max_streams: int = 4
    batching: str = "continuous"
    steps_per_call: int = 8
    signatures: tuple = ("serving_default",)
    max_n_best: int = 4
    max_decode_rows: int = 128
    max_request_tokens: int = 65536
    allow_hosts: tuple = ()
    max_connections: int = 256
    body_timeout_s: float = 10.0
    refusals_per_s: float = 5.0
    refusal_delay_s: float = 2.0

    def __post_init__(self):
        if self.signatures is not None:
            if isinstance(self.signatures, str) or not self.signatures:
                raise ValueError(f"signatures must be a non-empty tuple of names (or None: all), got "
                                 f"{self.signatures!r}")
            object.__setattr__(self, "signatures", tuple(self.signatures))
        object.__setattr__(self, "allow_hosts", tuple(h.lower() for h in self.allow_hosts))
        if not self.body_timeout_s > 0:
            raise ValueError(f"body_timeout_s must be > 0, got {self.body_timeout_s!r}")
        if not (self.refusals_per_s >= 0 and self.refusal_delay_s >= 0):
            raise ValueError(f"refusals_per_s and refusal_delay_s must be >= 0, got {self.refusals_per_s!r} and "
                             f"{self.refusal_delay_s!r}")
        for name in ("max_batch_size", "max_queued", "max_instances", "max_body_bytes", "max_streams",
                     "steps_per_call", "max_n_best", "max_decode_rows", "max_connections", "max_request_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not self.batch_timeout_ms >= 0 or not self.timeout_s > 0:
            raise ValueError(f"batch_timeout_ms must be >= 0 and timeout_s > 0, got {self.batch_timeout_ms!r} and "
                             f"{self.timeout_s!r}")
        if self.batching not in BATCHING:
            raise ValueError(f"batching must be one of {', '.join(BATCHING)}, got {self.batching!r}")
        if self.max_n_best > 64:
            raise ValueError(f"max_n_best must be at most 64, got {self.max_n_best}")
        if self.max_instances > self.max_queued:
            raise ValueError(f"max_instances ({self.max_instances}) must not exceed max_queued ({self.max_queued})")
