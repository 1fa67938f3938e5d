// A small HTTP service rate-limited with redis-ratelimit, using the redis-ratelimit-client
// package's Express middleware (clients/node, on ioredis) with its defaults.
//
// Every request is charged to its client (the X-Api-Key header, else the peer address; IPv6 by
// its /56):
//   GET /hello             costs 1 unit
//   GET /batch?items=N     costs N units
// Answers 200 when granted, 429 with Retry-After when the client must wait, and 413 when the
// request can never be granted (it costs more than the limit allows: no Retry-After); denials
// are application/problem+json. Every answer carries the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-11 (t: seconds until the request's cost is available
// again). When Redis cannot answer within 500 ms the middleware fails closed (503) and logs one
// line; a server without the module gets an error saying how to load it.
//
// Run: REDIS_URL=redis://127.0.0.1:6379 PORT=8080 node app.js
"use strict";

const express = require("express");
const Redis = require("ioredis");
const { rateLimit, gcra, clientAddress } = require("redis-ratelimit-client");

// The policy: bursts of RL_BURST requests, RL_RATE per RL_PERIOD_S seconds sustained. Its window
// in the RateLimit-Policy field (w) is the time an exhausted client takes to get a full burst back.
const BURST = Number(process.env.RL_BURST || 5);
const POLICY = gcra(BURST, Number(process.env.RL_RATE || 5), `${Number(process.env.RL_PERIOD_S || 10)}s`);

const redis = new Redis(process.env.REDIS_URL || "redis://127.0.0.1:6379");
const app = express();

// Bad input is refused before the limiter (and charges nothing).
app.get("/batch", (req, res, next) => {
  const items = req.query.items ?? "1";
  if (!/^[0-9]+$/.test(items) || !Number.isSafeInteger(Number(items)) || Number(items) < 1) {
    return res.status(400).json({ error: "items must be a positive integer" });
  }
  return next();
});

app.use(["/hello", "/batch"], rateLimit({
  client: redis,
  name: "example",                    // keys rl:example:<client>
  limits: POLICY,
  key: (req) => req.get("X-Api-Key") || clientAddress(req),
  cost: (req) => (req.path === "/batch" || req.baseUrl === "/batch" ? Number(req.query.items ?? 1) : 1),
}));

app.get("/hello", (req, res) => res.json({ ok: true, cost: 1 }));
app.get("/batch", (req, res) => res.json({ ok: true, cost: Number(req.query.items ?? 1) }));
app.use((req, res) => res.status(404).json({ error: "not found" }));

const server = app.listen(Number(process.env.PORT || 8080), "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
