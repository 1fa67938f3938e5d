"use strict";
// The Express middleware, the express-rate-limit Store and the header fields, against the real
// module: statuses and headers as draft-ietf-httpapi-ratelimit-headers-11 writes them, and
// failing open or closed within the timeout when Redis is down or paused (DEBUG SLEEP).

const test = require("node:test");
const assert = require("node:assert/strict");
const express = require("express");
const { rateLimit: expressRateLimit } = require("express-rate-limit");
const Redis = require("ioredis");
const { createClient } = require("redis");
const rl = require("..");
const { startServer, freePort } = require("./server");

let server;
test.before(async () => { server = await startServer(); });
test.after(async () => { await server.stop(); });

async function listen(app) {
  const s = app.listen(0, "127.0.0.1");
  await new Promise((r) => s.once("listening", r));
  return { base: `http://127.0.0.1:${s.address().port}`, close: () => new Promise((r) => s.close(r)) };
}

const get = (base, path, key) => fetch(base + path, { headers: { "X-Api-Key": key } });

test("headers: the draft's examples", () => {
  const r = new rl.Result(1, 100, 50, 0, 30000, 1);
  assert.deepEqual(rl.rateLimitHeaders(r, rl.fixed(100, "10s")), {
    "RateLimit-Policy": '"default";q=100;w=10',
    RateLimit: '"default";r=50;t=30',
  });
  // Retry-After: never 0, absent when never.
  assert.equal(rl.rateLimitHeaders(new rl.Result(0, 5, 0, 1, 1, 1), rl.gcra(5, 5, "10s"))["Retry-After"], "1");
  assert.equal(rl.rateLimitHeaders(new rl.Result(0, 5, 0, 1001, 1, 1), rl.gcra(5, 5, "10s"))["Retry-After"], "2");
  assert.ok(!("Retry-After" in rl.rateLimitHeaders(new rl.Result(0, 5, 5, -1, 0, 6), rl.gcra(5, 5, "10s"))));
  const policies = { burst: rl.gcra(10, 10, "1s"), daily: rl.fixed(1000, "1d"), inflight: rl.concurrency(5, "30s") };
  const h = rl.rateLimitHeaders(new rl.Result(1, 1000, 10, 0, 86000000, 1), policies);
  assert.equal(h["RateLimit-Policy"], '"burst";q=10;w=1, "daily";q=1000;w=86400, "inflight";q=5');
  assert.equal(h.RateLimit, '"daily";r=10;t=86000');
  // The detailed reply's shapes (RESP2 array of 8, RESP3 map) from SPEC.md.
  const entry = ["rpm", "{t}:rpm", 1, 0, 60, 0, 1000, 60000, 60000, null];
  const d = rl.parseResult([0, 60, 0, 1000, 60000, "rpm", "limit", [entry]], 1);
  assert.deepEqual([d.deniedBy, d.reason, d.limiters[0].windowMs], ["rpm", "limit", 60000]);
  assert.equal(rl.rateLimitHeaders(d, { rpm: rl.gcra(60, 60, "1m") }).RateLimit, '"rpm";r=0;t=60');
});

test("headers: one item per limiter of a detailed result, as the draft's examples", () => {
  // "burst";q=100;w=60,"daily";q=1000;w=86400: q the limit, w windowMs in seconds rounded up
  // (none for a concurrency limiter), r the remaining, t the reset in seconds rounded up.
  const d = (name, limit, remaining, resetAfterMs, windowMs) =>
    ({ name, key: `{u}:${name}`, cost: 1, granted: 1, limit, remaining, retryAfterMs: 0, resetAfterMs, windowMs, policy: null });
  const limiters = [d("burst", 100, 50, 30000, 60000), d("daily", 1000, 900, 43199001, 86400000),
    d("tpm", 9000, 6000, 2000, 1500), d("inflight", 5, 4, 30000, 0)];
  const r = new rl.Result(1, 9000, 6000, 0, 43199001, 1, { deniedBy: null, reason: "granted", limiters });
  assert.deepEqual(rl.rateLimitHeaders(r, rl.gcra(1, 1, "1s")), {
    "RateLimit-Policy": '"burst";q=100;w=60,"daily";q=1000;w=86400,"tpm";q=9000;w=2,"inflight";q=5',
    RateLimit: '"burst";r=50;t=30,"daily";r=900;t=43200,"tpm";r=6000;t=2,"inflight";r=4;t=30',
  });
  const denied = new rl.Result(0, 100, 0, 1, 30000, 1, { deniedBy: "burst", reason: "limit", limiters: limiters.slice(0, 1) });
  assert.deepEqual(rl.rateLimitHeaders(denied, {}), {
    "RateLimit-Policy": '"burst";q=100;w=60', RateLimit: '"burst";r=50;t=30', "Retry-After": "1",
  });
});

test("express middleware with detail: one header item per named limiter", async () => {
  const client = new Redis(server.port, "127.0.0.1", { protocol: 3 });
  const app = express();
  const limiter = new rl.RateLimiter(client);
  app.use("/many", rl.rateLimit({
    limiter, key: (req) => req.get("X-Api-Key"), detail: true,
    limits: { burst: rl.gcra(5, 5, "10s"), daily: rl.fixed(3, "1d") },
  }));
  app.use("/one", rl.rateLimit({ limiter, key: (req) => req.get("X-Api-Key"), detail: true, limits: rl.gcra(2, 2, "10s"), prefix: "one:" }));
  app.get(["/many", "/one"], (req, res) => res.send("ok"));
  const http = await listen(app);
  try {
    const day = 86400000;
    const before = Math.ceil((day - (Date.now() % day)) / 1000);
    let res = await get(http.base, "/many", "d");
    const after = Math.ceil((day - (Date.now() % day)) / 1000);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("RateLimit-Policy"), '"burst";q=5;w=10,"daily";q=3;w=86400');
    // burst: one unit used, back in 2 s; daily: 2 left until the UTC day ends.
    const expected = [];
    for (let t = after; t <= before; t++) expected.push(`"burst";r=4;t=2,"daily";r=2;t=${t}`);
    assert.ok(expected.includes(res.headers.get("RateLimit")), res.headers.get("RateLimit"));
    assert.equal(await client.exists("rl:{d}:burst", "rl:{d}:daily"), 2);
    res = await get(http.base, "/one", "s");
    assert.equal(res.headers.get("RateLimit-Policy"), '"default";q=2;w=10');
    assert.equal(res.headers.get("RateLimit"), '"default";r=1;t=5');
    await get(http.base, "/one", "s");
    res = await get(http.base, "/one", "s");
    assert.equal(res.status, 429);
    assert.ok(["4", "5"].includes(res.headers.get("Retry-After")));
  } finally {
    await http.close();
    client.disconnect();
  }
});

test("express middleware: 200, 429 with Retry-After, 413 without", async () => {
  const client = new Redis(server.port, "127.0.0.1");
  const app = express();
  app.use(rl.rateLimit({
    limiter: new rl.RateLimiter(client), limits: rl.gcra(5, 5, "10s"),
    key: (req) => req.get("X-Api-Key"), cost: (req) => Number(req.query.items || 1),
  }));
  app.get("/hello", (req, res) => res.json({ ok: true, remaining: req.rateLimit.remaining }));
  const http = await listen(app);
  try {
    for (let i = 1; i <= 5; i++) {
      const res = await get(http.base, "/hello", "a");
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("RateLimit-Policy"), '"default";q=5;w=10');
      assert.ok([`"default";r=${5 - i};t=${2 * i}`, `"default";r=${5 - i};t=${2 * i - 1}`].includes(res.headers.get("RateLimit")), res.headers.get("RateLimit"));
      assert.equal(res.headers.get("Retry-After"), null);
    }
    let res = await get(http.base, "/hello", "a");
    assert.equal(res.status, 429);
    assert.ok(["1", "2"].includes(res.headers.get("Retry-After")));
    res = await get(http.base, "/hello?items=6", "b");
    assert.equal(res.status, 413);
    assert.equal(res.headers.get("Retry-After"), null);
    assert.equal(res.headers.get("RateLimit"), '"default";r=5;t=0');
    res = await get(http.base, "/hello?items=5", "c");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("RateLimit"), '"default";r=0;t=10');
  } finally {
    await http.close();
    client.disconnect();
  }
});

test("express middleware: several named limits with RL.ALL under one hash tag", async () => {
  const client = await createClient({ url: server.url, RESP: 3 }).connect();
  const app = express();
  app.use(rl.rateLimit({
    limiter: new rl.RateLimiter(client), key: (req) => req.get("X-Api-Key"),
    limits: { burst: rl.gcra(5, 5, "10s"), daily: rl.fixed(3, "1d") },
  }));
  app.get("/", (req, res) => res.send("ok"));
  const http = await listen(app);
  try {
    const res = await get(http.base, "/", "m");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("RateLimit-Policy"), '"burst";q=5;w=10, "daily";q=3;w=86400');
    assert.ok(res.headers.get("RateLimit").startsWith('"daily";r=2;t='));
    assert.equal(await client.exists(["rl:{m}:burst", "rl:{m}:daily"]), 2);
  } finally {
    await http.close();
    await client.quit();
  }
});

for (const algorithm of ["fixed", "gcra"]) {
  test(`express-rate-limit Store (${algorithm})`, async () => {
    const client = new Redis(server.port, "127.0.0.1");
    const app = express();
    app.use(expressRateLimit({
      windowMs: 10000, limit: 3, standardHeaders: "draft-8", legacyHeaders: false,
      keyGenerator: (req) => req.get("X-Api-Key"),
      store: new rl.RateLimitStore({ client, algorithm, prefix: `erl:${algorithm}:` }),
    }));
    app.get("/", (req, res) => res.send("ok"));
    const http = await listen(app);
    try {
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await get(http.base, "/", "s")).status);
      assert.deepEqual(statuses, [200, 200, 200, 429]);
      const res = await get(http.base, "/", "s");
      assert.equal(res.status, 429);
      const retry = Number(res.headers.get("Retry-After"));
      // fixed: the 10 s window's end; gcra: one unit back in 10/3 s.
      assert.ok(algorithm === "fixed" ? retry >= 1 && retry <= 10 : retry >= 1 && retry <= 4, String(retry));
      assert.equal((await get(http.base, "/", "other")).status, 200);
      const store = new rl.RateLimitStore({ client, algorithm, prefix: `erl:${algorithm}:` });
      store.init({ windowMs: 10000, limit: 3 });
      const info = await store.get("other");
      assert.equal(info.totalHits, 1);
      await store.decrement("other");
      assert.equal(await store.get("other"), undefined);
      await store.resetKey("s");
      assert.equal((await get(http.base, "/", "s")).status, 200);
    } finally {
      await http.close();
      client.disconnect();
    }
  });
}

const TIMEOUT = 300;

async function pausedServer() {
  const s = await startServer();
  const c = new Redis(s.port, "127.0.0.1");
  const sleeping = c.call("DEBUG", "SLEEP", "1").catch(() => {});
  await new Promise((r) => setTimeout(r, 100));
  return { port: s.port, async stop() { await sleeping; c.disconnect(); await s.stop(); } };
}

for (const state of ["down", "paused"]) {
  for (const [onError, expected] of [["open", 200], ["closed", 503]]) {
    test(`fails ${onError} within the timeout when Redis is ${state}`, async () => {
      const target = state === "down" ? { port: await freePort(), stop: async () => {} } : await pausedServer();
      const client = new Redis(target.port, "127.0.0.1", { maxRetriesPerRequest: 1, retryStrategy: () => 200 });
      client.on("error", () => {});
      const app = express();
      app.use(rl.rateLimit({ limiter: new rl.RateLimiter(client), limits: rl.gcra(2, 2, "10s"), onError, timeout: TIMEOUT }));
      app.get("/", (req, res) => res.send("ok"));
      const http = await listen(app);
      try {
        const start = Date.now();
        const res = await get(http.base, "/", "k");
        const elapsed = Date.now() - start;
        assert.equal(res.status, expected);
        assert.equal(res.headers.get("RateLimit"), null);
        assert.ok(elapsed < TIMEOUT + 500, `took ${elapsed} ms`);
      } finally {
        await http.close();
        client.disconnect();
        await target.stop();
      }
    });
  }
}

test("express middleware with shadow: nothing denied, charged as enforced, headers as the reply", async () => {
  const client = new Redis(server.port, "127.0.0.1");
  const app = express();
  const limiter = new rl.RateLimiter(client);
  // 2 per 10 s (one unit back every 5 s, fresh after 10 s).
  app.use("/one", rl.rateLimit({ limiter, key: (req) => req.get("X-Api-Key"), shadow: true, limits: rl.gcra(2, 2, "10s"), prefix: "sh:" }));
  app.use("/many", rl.rateLimit({
    limiter, key: (req) => req.get("X-Api-Key"), shadow: true, detail: true, prefix: "shm:",
    limits: { burst: rl.gcra(2, 2, "10s"), daily: rl.fixed(1, "1d") },
  }));
  app.get(["/one", "/many"], (req, res) => res.send("ok"));
  const http = await listen(app);
  try {
    const statuses = [];
    let res;
    for (let i = 0; i < 3; i++) {
      res = await get(http.base, "/one", "s");
      statuses.push(res.status);
    }
    // The third would be denied: let through, no Retry-After, nothing left, fresh in 10 s.
    assert.deepEqual(statuses, [200, 200, 200]);
    assert.equal(res.headers.get("retry-after"), null);
    assert.ok(['"default";r=0;t=10', '"default";r=0;t=9'].includes(res.headers.get("ratelimit")), res.headers.get("ratelimit"));
    // Charged as enforced: the two granted units are used, an enforced call is denied.
    assert.equal((await limiter.gcra("sh:s", 2, 2, "10s", { peek: true })).allowed, false);
    // Several limits in detail: daily (1 a day) would deny the second request; let through, it
    // charges nothing (burst keeps the first request's unit, back in 5 s).
    await get(http.base, "/many", "m");
    res = await get(http.base, "/many", "m");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("retry-after"), null);
    assert.match(res.headers.get("ratelimit"), /^"burst";r=1;t=(4|5),"daily";r=0;t=[0-9]+$/);
  } finally {
    await http.close();
    client.disconnect();
  }
});
