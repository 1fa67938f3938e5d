// A small HTTP service rate-limited with redis-ratelimit (RL.GCRA), using the redis-ratelimit-client
// package (clients/node, on ioredis) and node:http.
//
// Every request is charged to its client (the X-Api-Key header, else the peer address):
//   GET /hello             costs 1 unit
//   GET /batch?items=N     costs N units
// Answers 200 when granted, 429 with Retry-After when the client must wait, and 413 when the
// request can never be granted (it costs more than the limit allows: retry_after_ms = -1, so no
// Retry-After). Every answer carries the RateLimit-Policy and RateLimit header fields of
// draft-ietf-httpapi-ratelimit-headers.
//
// Run: REDIS_URL=redis://127.0.0.1:6379 PORT=8080 node app.js
"use strict";

const http = require("node:http");
const Redis = require("ioredis");
const { RateLimiter, gcra, rateLimitHeaders } = require("redis-ratelimit-client");

// The policy: bursts of RL_BURST requests, RL_RATE per RL_PERIOD_S seconds sustained. Its window
// in the RateLimit-Policy header (w) is the time an exhausted client takes to get a full burst back.
const BURST = Number(process.env.RL_BURST || 5);
const POLICY = gcra(BURST, Number(process.env.RL_RATE || 5), `${Number(process.env.RL_PERIOD_S || 10)}s`);

// redis-ratelimit-client reads the limiter reply of RESP2 and RESP3 alike (ioredis 6 speaks
// RESP3 and flattens maps by default) into a typed Result.
const limiter = new RateLimiter(new Redis(process.env.REDIS_URL || "redis://127.0.0.1:6379"));

async function limit(client, cost) {
  const result = await limiter.apply(`rl:${client}`, POLICY, { cost });
  // RateLimit-Policy and RateLimit always; Retry-After only when denied and not `never`.
  const headers = rateLimitHeaders(result, POLICY);
  if (result.allowed) return [200, headers];
  // Never (the cost is above the limit): waiting does not help, so 413, not 429.
  return [result.never ? 413 : 429, headers];
}

function answer(res, status, headers, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(data),
    ...headers,
  });
  res.end(data);
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, "http://localhost");
  let cost;
  if (url.pathname === "/hello") {
    cost = 1;
  } else if (url.pathname === "/batch") {
    const items = url.searchParams.get("items") ?? "1";
    cost = /^[0-9]+$/.test(items) ? Number(items) : 0;
    if (cost < 1 || !Number.isSafeInteger(cost)) {
      return answer(res, 400, {}, { error: "items must be a positive integer" });
    }
  } else {
    return answer(res, 404, {}, { error: "not found" });
  }
  const client = req.headers["x-api-key"] || req.socket.remoteAddress;
  try {
    const [status, headers] = await limit(client, cost);
    const body = {
      200: { ok: true, cost },
      413: { error: `a request of ${cost} units exceeds the limit of ${BURST}` },
      429: { error: "too many requests" },
    }[status];
    answer(res, status, headers, body);
  } catch (e) {
    answer(res, 503, {}, { error: `rate limiter unavailable: ${e.message}` });
  }
});

server.listen(Number(process.env.PORT || 8080), "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
