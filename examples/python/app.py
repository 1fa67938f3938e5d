"""A small HTTP service rate-limited with redis-ratelimit (RL.GCRA), using the
redis-ratelimit-client package (clients/python, on redis-py) and the standard library's HTTP server.

Every request is charged to its client (the X-Api-Key header, else the peer address):
  GET /hello             costs 1 unit
  GET /batch?items=N     costs N units
Answers 200 when granted, 429 with Retry-After when the client must wait, and 413 when the
request can never be granted (it costs more than the limit allows: retry_after_ms = -1, so no
Retry-After). Every answer carries the RateLimit-Policy and RateLimit header fields of
draft-ietf-httpapi-ratelimit-headers-11: r what is left, t the effective window (the seconds
until the limiter has more than r, from a read-only RL.CHECK of r + 1 units).

The keys are rl:<name>:<client>, the name made of the limit's parameters (gcra-5-5-10s), as the
package's HTTP integrations name them: another limit never shares them by accident.

Run: REDIS_URL=redis://127.0.0.1:6379 PORT=8080 python app.py
"""

import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import redis
from redis_ratelimit_client import GCRA, RateLimiter, rate_limit_headers

# The policy: bursts of RL_BURST requests, RL_RATE per RL_PERIOD_S seconds sustained. Its window
# in the RateLimit-Policy header (w) is the time an exhausted client takes to get a full burst back.
POLICY = GCRA(
    burst=int(os.environ.get("RL_BURST", "5")),
    rate=int(os.environ.get("RL_RATE", "5")),
    period=f"{int(os.environ.get('RL_PERIOD_S', '10'))}s",
)

# redis-ratelimit-client reads the limiter reply of RESP2 and RESP3 alike (redis-py 8 speaks
# RESP3) into a typed Result.
limiter = RateLimiter(redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")))


NAME = f"gcra-{POLICY.burst}-{POLICY.rate}-{POLICY.period}"


def limit(client, cost):
    """Charges `cost` units to `client`; returns (status, headers)."""
    key = f"rl:{NAME}:{client}"
    result = limiter.apply(key, POLICY, cost=cost)
    # t: when the limiter has one unit more than it has left (0 when nothing is used).
    check = None
    if result.remaining < result.limit:
        check = limiter.check(key, POLICY, cost=max(result.remaining, 0) + 1)
    # RateLimit-Policy and RateLimit always; Retry-After only when denied and not `never`.
    headers = rate_limit_headers(result, POLICY, next_unit=check)
    if result.allowed:
        return 200, headers
    # Never (the cost is above the limit): waiting does not help, so 413, not 429.
    return (413 if result.never else 429), headers


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urlparse(self.path)
        if url.path == "/hello":
            cost = 1
        elif url.path == "/batch":
            try:
                cost = int(parse_qs(url.query).get("items", ["1"])[0])
            except ValueError:
                cost = -1
            if cost < 1:
                return self.answer(400, {}, {"error": "items must be a positive integer"})
        else:
            return self.answer(404, {}, {"error": "not found"})
        client = self.headers.get("X-Api-Key") or self.client_address[0]
        try:
            status, headers = limit(client, cost)
        except redis.RedisError as e:
            return self.answer(503, {}, {"error": f"rate limiter unavailable: {e}"})
        body = {200: {"ok": True, "cost": cost},
                413: {"error": f"a request of {cost} units exceeds the limit of {POLICY.burst}"},
                429: {"error": "too many requests"}}[status]
        self.answer(status, headers, body)

    def answer(self, status, headers, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8080"))), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
