"""A small HTTP service rate-limited with redis-ratelimit (RL.GCRA), using redis-py and the
standard library's HTTP server.

Every request is charged to its client (the X-Api-Key header, else the peer address):
  GET /hello             costs 1 unit
  GET /batch?items=N     costs N units
Answers 200 when granted, 429 with Retry-After when the client must wait, and 413 when the
request can never be granted (it costs more than the limit allows: retry_after_ms = -1, so no
Retry-After). Every answer carries the RateLimit-Policy and RateLimit header fields of
draft-ietf-httpapi-ratelimit-headers.

Run: REDIS_URL=redis://127.0.0.1:6379 PORT=8080 python app.py
"""

import json
import math
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import redis

# The policy: bursts of BURST requests, RATE per PERIOD_S seconds sustained. An exhausted client
# is back to a full burst after BURST * PERIOD_S / RATE seconds: the policy's window.
BURST = int(os.environ.get("RL_BURST", "5"))
RATE = int(os.environ.get("RL_RATE", "5"))
PERIOD_S = int(os.environ.get("RL_PERIOD_S", "10"))
WINDOW_S = math.ceil(BURST * PERIOD_S / RATE)
POLICY = "default"

# redis-py 8 speaks RESP3: the limiter reply is a dict (granted, limit, remaining,
# retry_after_ms, reset_after_ms).
r = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"), protocol=3)


def seconds(ms):
    """Whole seconds for a header, rounded up: a client that waits this long is not early."""
    return (ms + 999) // 1000


def limit(client, cost):
    """Charges `cost` units to `client`; returns (status, headers)."""
    rl = r.execute_command("RL.GCRA", f"rl:{client}", BURST, RATE, f"{PERIOD_S}s", "COST", cost)
    rl = {k.decode() if isinstance(k, bytes) else k: v for k, v in rl.items()}
    headers = {
        "RateLimit-Policy": f'"{POLICY}";q={rl["limit"]};w={WINDOW_S}',
        "RateLimit": f'"{POLICY}";r={rl["remaining"]};t={seconds(rl["reset_after_ms"])}',
    }
    if rl["granted"] == cost:
        return 200, headers
    if rl["retry_after_ms"] == -1:
        # Never: waiting does not help, so no Retry-After and not 429.
        return 413, headers
    headers["Retry-After"] = str(seconds(rl["retry_after_ms"]))
    return 429, headers


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
                413: {"error": f"a request of {cost} units exceeds the limit of {BURST}"},
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
