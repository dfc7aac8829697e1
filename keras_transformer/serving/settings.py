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

    def __post_init__(self):
        for name in ("max_batch_size", "max_queued", "max_instances", "max_body_bytes", "max_streams",
                     "steps_per_call"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not self.batch_timeout_ms >= 0 or not self.timeout_s > 0:
            raise ValueError(f"batch_timeout_ms must be >= 0 and timeout_s > 0, got {self.batch_timeout_ms!r} and "
                             f"{self.timeout_s!r}")
        if self.batching not in BATCHING:
            raise ValueError(f"batching must be one of {', '.join(BATCHING)}, got {self.batching!r}")
        if self.max_instances > self.max_queued:
            raise ValueError(f"max_instances ({self.max_instances}) must not exceed max_queued ({self.max_queued})")
