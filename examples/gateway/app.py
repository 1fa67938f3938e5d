"""An LLM-gateway-style HTTP service metered with redis-ratelimit, using the redis-ratelimit-client
package (clients/python, on redis-py) and the standard library's HTTP server.

Every customer has three limits, checked and charged in ONE round trip (RL.ALL, all or nothing):
  rpm     requests per minute                       GCRA        RPM RPM 1m
  tpm     tokens per minute                         TOKENBUCKET TPM TPM 1m, CHARGE = estimate
  budget  tokens per billing month, in the          FIXED       BUDGET month TZ zone ANCHOR day,
          customer's time zone, renewing on its                 CHARGE = estimate
          billing day
The call reserves the estimate (HOLD ttl DEDUP <request id>) and asks for DETAIL (which limiter
denied, and each one's limit, remaining and window). After the upstream call, RL.SETTLE charges
what was really used: 1 request, the real tokens, the real tokens. Below the estimate the
difference comes back; above it the extra is charged (a customer may go into debt, and waits
until it is repaid). A gateway that dies between the two calls costs the customer nothing: the
reservation comes back by itself when its ttl ends.

  POST /v1/completions
    X-Customer-Id: acme                     a customer of the directory (else 401)
    {"estimated_tokens": 3000, "used_tokens": 2400}

The upstream is simulated: it "uses" `used_tokens` (default: the estimate), deterministically.
Answers 200 (the id of the request in X-Request-Id), 429 with Retry-After when a limit must be
waited for, 413 when the estimate can never fit (above a limit: no Retry-After). Every answer
carries the RateLimit-Policy and RateLimit header fields of draft-ietf-httpapi-ratelimit-headers-11,
one item per limiter (`"tpm";q=90000;w=60` and `"tpm";r=87000;t=1`: r what is left, t the
effective window, the seconds until the limiter has more than r, from a read-only RL.CHECKALL of
each limiter's remaining + 1); a denial's body is the draft's "quota-exceeded" problem naming the
violated limits.

Environment: REDIS_URL, PORT; GATEWAY_RPM (60), GATEWAY_TPM (90000), GATEWAY_BUDGET (monthly
tokens, 10000000), GATEWAY_HOLD (the reservation's ttl, 30s); GATEWAY_CUSTOMERS, a JSON object
of customer id -> {"tz": "Europe/Paris", "billing_day": 15, "monthly_tokens": 500000}.
Test only: GATEWAY_TEST_HOOKS=1 makes the service read its clock from the X-Test-Now header
(Unix ms, sent as AT) and exit between reserve and settle on X-Test-Crash: after-reserve. Never
set it in production.

Run: REDIS_URL=redis://127.0.0.1:6379 PORT=8080 python app.py
"""

import dataclasses
import json
import os
import re
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import redis
from redis_ratelimit_client import GCRA, Fixed, RateLimiter, TokenBucket, rate_limit_headers

RPM = int(os.environ.get("GATEWAY_RPM", "60"))
TPM = int(os.environ.get("GATEWAY_TPM", "90000"))
BUDGET = int(os.environ.get("GATEWAY_BUDGET", "10000000"))
HOLD = os.environ.get("GATEWAY_HOLD", "30s")
DEMO_CUSTOMERS = {"acme": {"tz": "Europe/Paris", "billing_day": 15}}
CUSTOMERS = json.loads(os.environ.get("GATEWAY_CUSTOMERS") or json.dumps(DEMO_CUSTOMERS))
TEST_HOOKS = os.environ.get("GATEWAY_TEST_HOOKS") == "1"
MAX_TOKENS = 10**9
CUSTOMER_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# draft-ietf-httpapi-ratelimit-headers-11, section 5.1.
QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded"

limiter = RateLimiter(redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")))


def limits(customer, estimate):
    """The customer's three limiters, key -> spec, in one hash slot ({gw:customer})."""
    c = CUSTOMERS[customer]
    tag = f"{{gw:{customer}}}"
    return {
        f"{tag}:rpm": GCRA(RPM, RPM, "1m", name="rpm"),
        f"{tag}:tpm": TokenBucket(TPM, TPM, "1m", name="tpm", charge=estimate),
        f"{tag}:budget": Fixed(
            int(c.get("monthly_tokens", BUDGET)),
            "month",
            tz=c.get("tz", "UTC"),
            anchor=int(c.get("billing_day", 1)),
            name="budget",
            charge=estimate,
        ),
    }


def twice(call):
    """One retry on a lost connection. Both calls are safe to repeat: a reservation made under a
    DEDUP id is not made twice, and a settled id settles nothing more."""
    try:
        return call()
    except redis.ConnectionError:
        return call()


def reserve(specs, request_id, at):
    """RL.ALL ... HOLD ttl DEDUP id DETAIL: the estimate reserved on every limit, or nothing."""
    return twice(lambda: limiter.all(specs, dedup=request_id, hold=HOLD, detail=True, at=at))


def settle(specs, request_id, used, at):
    """RL.SETTLE with what was really used: 1 request, `used` tokens, `used` tokens."""
    return twice(lambda: limiter.settle(list(specs), request_id, [1, used, used], at=at))


def next_unit(specs, result, at):
    """RL.CHECKALL ... DETAIL with each limiter's CHARGE its remaining + 1: when each limiter has
    one unit more than it has left (the `t` of the RateLimit field). None when Redis cannot say
    (the field then leaves t out)."""
    left = {d.name: max(d.remaining, 0) for d in result.limiters}
    checks = {k: dataclasses.replace(s, charge=left.get(s.name, 0) + 1) for k, s in specs.items()}
    try:
        return limiter.check_all(checks, detail=True, at=at)
    except redis.RedisError:
        return None


def upstream(body):
    """The simulated model call: the tokens it used (the request says how many; default: the
    estimate). A real gateway reads them from the upstream's usage report."""
    return body.get("used_tokens", body["estimated_tokens"])


def after_settle(reserved, settled):
    """The reserve's detailed reply with each limiter's remaining and reset from the settle (what
    the customer has left after what was really used)."""
    entries = tuple(
        d if s is None else dataclasses.replace(d, remaining=s.remaining,
                                                reset_after_ms=s.reset_after_ms)
        for d, s in zip(reserved.limiters, settled)
    )
    return dataclasses.replace(reserved, limiters=entries)


def problem(result):
    violated = [d.name for d in result.limiters if d.retry_after_ms != 0] or [result.denied_by]
    return {
        "type": QUOTA_EXCEEDED,
        "title": "Request cannot be satisfied as assigned quota has been exceeded",
        "violated-policies": violated,
    }


def tokens(body, name, minimum):
    v = body.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= MAX_TOKENS:
        raise ValueError(f"{name} must be an integer in [{minimum}, {MAX_TOKENS}]")
    return v


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/v1/completions":
            return self.answer(404, {}, {"error": "not found"})
        customer = self.headers.get("X-Customer-Id", "")
        if not CUSTOMER_ID.fullmatch(customer) or customer not in CUSTOMERS:
            return self.answer(401, {}, {"error": "unknown customer"})
        try:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(min(max(length, 0), 65536)) or b"{}")
            estimate = tokens(body, "estimated_tokens", 1)
            if "used_tokens" in body:
                tokens(body, "used_tokens", 0)
            # Test only: the clock of the test (AT), never honoured without GATEWAY_TEST_HOOKS.
            test_now = self.headers.get("X-Test-Now") if TEST_HOOKS else None
            at = None if test_now is None else int(test_now)
        except (ValueError, AttributeError, TypeError) as e:
            return self.answer(400, {}, {"error": str(e)})
        request_id = uuid.uuid4().hex
        specs = limits(customer, estimate)
        try:
            reserved = reserve(specs, request_id, at)
        except redis.RedisError as e:
            return self.answer(503, {}, {"error": f"rate limiter unavailable: {e}"})
        if not reserved.allowed:
            # Never (the estimate is above a limit): waiting does not help, so 413, not 429.
            status = 413 if reserved.never else 429
            headers = rate_limit_headers(reserved, {}, next_unit=next_unit(specs, reserved, at))
            return self.answer(status, headers, problem(reserved))
        if TEST_HOOKS and self.headers.get("X-Test-Crash") == "after-reserve":
            os._exit(70)  # Test only: the gateway dies holding the reservation.
        used = upstream(body)
        try:
            settled = settle(specs, request_id, used, at)
        except redis.RedisError:
            # Not settled: the reservation comes back when its ttl ends; answer with the reserve.
            settled = [None] * len(specs)
        now = after_settle(reserved, settled)
        headers = rate_limit_headers(now, {}, next_unit=next_unit(specs, now, at))
        headers["X-Request-Id"] = request_id
        body = {"id": request_id, "tokens": {"estimated": estimate, "used": used}}
        self.answer(200, headers, body)

    def answer(self, status, headers, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        problem_json = status in (413, 429)
        kind = "application/problem+json" if problem_json else "application/json"
        self.send_header("Content-Type", kind)
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
