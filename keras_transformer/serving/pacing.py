"""`RefusalPacing`: a client that keeps sending requests the server refuses gets its refusals more slowly.

A refusal (a 4xx answer: malformed, too large, a wrong `Host`, busy, ...) costs the server the work of reading and
checking the request, and a client in a loop can send hundreds a second, each taking the cores from the decoding
of the requests it accepted. So each client address has a budget of refusals answered at once (`burst`, refilled at
`rate` a second); past it, a refusal is held until the budget would allow it, at most `max_delay_s`. A client that
waits for each answer before its next request then sends at most about `rate` refused requests a second, plus one
per connection each `max_delay_s`. Accepted requests are never held, whatever the address's budget: a well-behaved
client beside a flooding one on the same address (behind one proxy, say) is answered as fast as before.

Holding a refusal holds its connection: at most `max_held` are held at once, and a refusal past them is answered at
once with `Connection: close`, so held refusals cannot use up the server's connections (`--max-connections`).
"""

import asyncio
import collections
import logging
import time

log = logging.getLogger("keras_transformer.serving")

MAX_ADDRESSES = 4096  # the addresses whose budgets are kept (the least recently refused are forgotten first)


class RefusalPacing:
    """ASGI wrapper pacing each client address's 4xx answers (see the module's docstring).

    Args:
        app: the ASGI application.
        rate: refusals a second answered at once per address, after the first `burst`; `0`: no pacing.
        max_delay_s: the longest a refusal is held.
        burst: the refusals answered at once after a quiet spell (default: `4 * rate`, at least 1).
        max_held: the most refusals held at once (default 64).
        clock: seconds, for tests (default `time.monotonic`).
    """

    def __init__(self, app, rate, max_delay_s=2.0, burst=None, max_held=64, clock=time.monotonic):
        if rate < 0 or max_delay_s < 0:
            raise ValueError(f"rate and max_delay_s must be >= 0, got {rate!r} and {max_delay_s!r}")
        self.app, self.rate, self.max_delay_s, self.max_held, self.clock = app, rate, max_delay_s, max_held, clock
        self.burst = max(1.0, 4.0 * rate) if burst is None else burst
        self._budgets = collections.OrderedDict()  # address -> (refusals it may still get at once, when counted)
        self.held = 0  # refusals being held now

    def delay(self, address):
        """Counts one refusal of `address`; returns the seconds to hold it (0: answer at once)."""
        if not self.rate:
            return 0.0
        now = self.clock()
        tokens, last = self._budgets.pop(address, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate) - 1
        tokens = max(tokens, -self.rate * self.max_delay_s)  # the debt is bounded: a client that stops is forgiven
        self._budgets[address] = (tokens, now)
        if len(self._budgets) > MAX_ADDRESSES:
            self._budgets.popitem(last=False)
        if tokens >= 0:
            return 0.0
        if tokens >= -1:  # the first refusal past the budget (the budget is whole after a quiet spell: exactly -1)
            log.warning("%s: more than %g refused requests a second; holding its refusals up to %g s "
                        "(--refusals-per-s)", address, self.rate, self.max_delay_s)
        return min(self.max_delay_s, -tokens / self.rate)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not self.rate:
            return await self.app(scope, receive, send)
        address = scope["client"][0] if scope.get("client") else "-"

        async def pacing(message):
            if message["type"] == "http.response.start" and 400 <= message["status"] < 500:
                seconds = self.delay(address)
                if seconds > 0 and self.held >= self.max_held:
                    message = dict(message, headers=[*message.get("headers", []), (b"connection", b"close")])
                elif seconds > 0:
                    self.held += 1
                    try:
                        await asyncio.sleep(seconds)
                    finally:
                        self.held -= 1
            await send(message)

        await self.app(scope, receive, pacing)
