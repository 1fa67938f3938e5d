// A small HTTP service rate-limited with redis-ratelimit (RL.GCRA), using ioredis and node:http.
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

// The policy: bursts of BURST requests, RATE per PERIOD_S seconds sustained. An exhausted client
// is back to a full burst after BURST * PERIOD_S / RATE seconds: the policy's window.
const BURST = Number(process.env.RL_BURST || 5);
const RATE = Number(process.env.RL_RATE || 5);
const PERIOD_S = Number(process.env.RL_PERIOD_S || 10);
const WINDOW_S = Math.ceil((BURST * PERIOD_S) / RATE);
const POLICY = "default";

// ioredis 6 speaks RESP3; replyMapping "resp3" gives the limiter reply as an object (granted,
// limit, remaining, retry_after_ms, reset_after_ms) instead of a flat [name, value, ...] array.
const redis = new Redis(process.env.REDIS_URL || "redis://127.0.0.1:6379", {
  replyMapping: "resp3",
});

// Whole seconds for a header, rounded up: a client that waits this long is not early.
const seconds = (ms) => Math.ceil(ms / 1000);

async function limit(client, cost) {
  const rl = await redis.call("RL.GCRA", `rl:${client}`, BURST, RATE, `${PERIOD_S}s`, "COST", cost);
  const headers = {
    "RateLimit-Policy": `"${POLICY}";q=${rl.limit};w=${WINDOW_S}`,
    RateLimit: `"${POLICY}";r=${rl.remaining};t=${seconds(rl.reset_after_ms)}`,
  };
  if (rl.granted === cost) return [200, headers];
  // Never: waiting does not help, so no Retry-After and not 429.
  if (rl.retry_after_ms === -1) return [413, headers];
  headers["Retry-After"] = String(seconds(rl.retry_after_ms));
  return [429, headers];
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
