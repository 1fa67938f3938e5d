"use strict";
// The Express middleware, the express-rate-limit Store and the header fields, against the real
// module. Every header string is worked out from the limits and the AT the test pins (the
// middleware's `now`), never read back from a reply.

const test = require("node:test");
const assert = require("node:assert/strict");
const crypto = require("node:crypto");
const express = require("express");
const { rateLimit: expressRateLimit } = require("express-rate-limit");
const Redis = require("ioredis");
const { createClient } = require("redis");
const rl = require("..");
const { startServer, freePort, pinnedNow } = require("./server");

let server;
let redis;
test.before(async () => {
  server = await startServer();
  redis = new Redis(server.port, "127.0.0.1");
});
test.after(async () => {
  redis.disconnect();
  await server.stop();
});

async function listen(app) {
  const s = app.listen(0, "127.0.0.1");
  await new Promise((r) => s.once("listening", r));
  return { base: `http://127.0.0.1:${s.address().port}`, close: () => new Promise((r) => s.close(r)) };
}

const get = (base, path, key, headers = {}) => fetch(base + path, { headers: { "X-Api-Key": key, ...headers } });
const keyOf = (req) => req.get("X-Api-Key");
const fields = (res) => [res.status, res.headers.get("RateLimit-Policy"), res.headers.get("RateLimit"), res.headers.get("Retry-After")];

async function withApp(setup, fn) {
  const app = express();
  setup(app);
  app.all("/{*path}", (req, res) => res.send("ok"));
  const http = await listen(app);
  try {
    await fn(http.base);
  } finally {
    await http.close();
  }
}

test("headers: draft-11 items from a result, t the seconds until the limit has more than r", () => {
  // The draft's example: 50 left, more in 30 s (the check of 51 units waits 30 s).
  const r = new rl.Result(1, 100, 50, 0, 30000, 1);
  const more = (retryAfterMs) => new rl.Result(0, 100, 50, retryAfterMs, 30000, 51);
  assert.deepEqual(rl.rateLimitHeaders(r, rl.fixed(100, "10s"), { next: more(30000) }), {
    "RateLimit-Policy": '"default";q=100;w=10',
    RateLimit: '"default";r=50;t=30',
  });
  // Without that check t is left out (the draft makes it optional); a full limit has t=0.
  assert.equal(rl.rateLimitHeaders(r, rl.fixed(100, "10s")).RateLimit, '"default";r=50');
  assert.equal(rl.rateLimitHeaders(new rl.Result(1, 100, 100, 0, 0, 0), rl.fixed(100, "10s")).RateLimit, '"default";r=100;t=0');
  // Denied: Retry-After the request's wait, never before t; never: no Retry-After.
  const denied = rl.rateLimitHeaders(new rl.Result(0, 5, 0, 3001, 10000, 2), rl.gcra(5, 5, "10s"), { next: new rl.Result(0, 5, 0, 1001, 10000, 1) });
  assert.deepEqual(denied, { "RateLimit-Policy": '"default";q=5;w=10', RateLimit: '"default";r=0;t=2', "Retry-After": "4" });
  assert.equal(rl.rateLimitHeaders(new rl.Result(0, 5, 0, 1, 1, 1), rl.gcra(5, 5, "10s"))["Retry-After"], "1");
  assert.ok(!("Retry-After" in rl.rateLimitHeaders(new rl.Result(0, 5, 5, -1, 0, 6), rl.gcra(5, 5, "10s"))));
  // A detailed result: each item its own limit's numbers.
  const d = (name, cost, limit, remaining, retryAfterMs, resetAfterMs, windowMs) =>
    ({ name, key: `{u}:${name}`, cost, granted: 0, limit, remaining, retryAfterMs, resetAfterMs, windowMs, policy: null });
  const many = new rl.Result(0, 100, 0, 12000, 86000000, 1, { deniedBy: "tpm", reason: "limit", limiters: [
    d("rpm", 1, 60, 58, 0, 2000, 60000), d("tpm", 400, 1000, 200, 12000, 48000, 60000), d("inflight", 1, 5, 4, 0, 30000, 0)] });
  // The check of remaining + 1 of each: 59 rpm in 1 s, 201 tokens in 60 ms, 5 leases in 30 s.
  assert.deepEqual(rl.rateLimitHeaders(many, {}).RateLimit, '"rpm";r=58, "tpm";r=200, "inflight";r=4');
  const next = new rl.Result(0, 60, 58, 30000, 86000000, 1, { deniedBy: "rpm", reason: "limit", limiters: [
    d("rpm", 59, 60, 58, 1000, 2000, 60000), d("tpm", 201, 1000, 200, 60, 48000, 60000), d("inflight", 5, 5, 4, 30000, 30000, 0)] });
  assert.deepEqual(rl.rateLimitHeaders(many, {}, { next }), {
    "RateLimit-Policy": '"rpm";q=60;w=60, "tpm";q=1000;w=60, "inflight";q=5',
    RateLimit: '"rpm";r=58;t=1, "tpm";r=200;t=1, "inflight";r=4;t=30',
    "Retry-After": "12",
  });
  // The other styles, of the most restrictive limit (tpm: the longest wait).
  assert.deepEqual(rl.rateLimitHeaders(many, {}, { style: "draft-7" }), {
    "RateLimit-Policy": "60;w=60, 1000;w=60, 5", "RateLimit-Limit": "1000", "RateLimit-Remaining": "200",
    "RateLimit-Reset": "48", "Retry-After": "12",
  });
  assert.deepEqual(rl.rateLimitHeaders(many, {}, { style: "legacy", now: 1700000000500 }), {
    "X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "200", "X-RateLimit-Reset": String(Math.ceil((1700000000500 + 48000) / 1000)),
    "Retry-After": "12",
  });
  assert.deepEqual(rl.rateLimitHeaders(many, {}, { style: "none" }), { "Retry-After": "12" });
  // pk: a Byte Sequence of the client key's hash.
  const pk = `:${crypto.createHash("sha256").update("alice").digest().subarray(0, 12).toString("base64")}:`;
  assert.equal(rl.partitionKey("alice"), pk);
  assert.equal(rl.rateLimitHeaders(r, rl.fixed(100, "10s"), { partitionKey: "alice", next: more(30000) }).RateLimit, `"default";r=50;t=30;pk=${pk}`);
  assert.throws(() => rl.rateLimitHeaders(r, rl.fixed(100, "10s"), { style: "draft-6" }), /headers must be one of/);
});

test("limit strings map to GCRA exactly: N at once, then N per unit period", async () => {
  assert.deepEqual(rl.parseLimit("5/minute"), rl.gcra(5, 5, "1m"));
  assert.deepEqual(rl.parseLimit("10 per second"), rl.gcra(10, 10, "1s"));
  assert.deepEqual(rl.parseLimit("3/h"), rl.gcra(3, 3, "1h"));
  assert.deepEqual(rl.parseLimit("2/day"), rl.gcra(2, 2, "1d"));
  assert.deepEqual(rl.parseLimit("7/s"), rl.gcra(7, 7, "1s"));
  for (const bad of ["0/minute", "5/fortnight", "five/minute", "5"]) assert.throws(() => rl.parseLimit(bad), /invalid limit/);
  // 3/minute: three at once, the fourth waits 20 s (one per 20 s): each time, one more unit is
  // 20 s away.
  const T = pinnedNow();
  await withApp((app) => app.use(rl.rateLimit({ client: redis, limits: "3/minute", name: "strings", key: keyOf, at: () => T })), async (base) => {
    const seen = [];
    for (let i = 0; i < 4; i++) seen.push(fields(await get(base, "/", "s")));
    assert.deepEqual(seen, [
      [200, '"default";q=3;w=60', '"default";r=2;t=20', null],
      [200, '"default";q=3;w=60', '"default";r=1;t=20', null],
      [200, '"default";q=3;w=60', '"default";r=0;t=20', null],
      [429, '"default";q=3;w=60', '"default";r=0;t=20', "20"],
    ]);
  });
});

test("middleware: exact draft-11 fields, 429 problem+json with Retry-After, 413 without", async () => {
  // gcra(5, 5, "10s"): bursts of 5, one unit back every 2 s: whatever is used, one more unit is
  // 2 s away.
  const T = pinnedNow();
  await withApp((app) => app.use(rl.rateLimit({
    client: redis, limits: rl.gcra(5, 5, "10s"), name: "exact", key: keyOf, at: () => T,
    cost: (req) => Number(req.query.items || 1),
  })), async (base) => {
    for (let i = 1; i <= 4; i++) assert.deepEqual(fields(await get(base, "/", "a")), [200, '"default";q=5;w=10', `"default";r=${5 - i};t=2`, null]);
    assert.deepEqual(fields(await get(base, "/", "a")), [200, '"default";q=5;w=10', '"default";r=0;t=2', null]);
    const res = await get(base, "/", "a");
    assert.deepEqual(fields(res), [429, '"default";q=5;w=10', '"default";r=0;t=2', "2"]);
    assert.equal(res.headers.get("Content-Type"), "application/problem+json");
    assert.deepEqual(await res.json(), {
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded", title: "Too Many Requests", status: 429,
      detail: "quota exceeded; retry after 2 s", retry_after: 2, "violated-policies": ["default"],
    });
    // 3 units with 0 left: 6 s until 3 units are back (one is back in 2 s).
    assert.deepEqual(fields(await get(base, "/?items=3", "a")), [429, '"default";q=5;w=10', '"default";r=0;t=2', "6"]);
    const never = await get(base, "/?items=6", "b");
    assert.deepEqual(fields(never), [413, '"default";q=5;w=10', '"default";r=5;t=0', null]);
    assert.deepEqual(await never.json(), {
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded", title: "Request exceeds the limit", status: 413,
      detail: "a request of 6 units can never fit the limit of 5", "violated-policies": ["default"],
    });
    // A fresh client spending all 5 at once: the first is back in 2 s.
    assert.deepEqual(fields(await get(base, "/?items=5", "c")), [200, '"default";q=5;w=10', '"default";r=0;t=2', null]);
    assert.equal(await redis.exists("rl:exact:a", "rl:exact:b", "rl:exact:c"), 2);
  });
});

test("middleware: per-limit costs (requests and tokens per minute on one route)", async () => {
  const T = pinnedNow();
  await withApp((app) => app.use(rl.rateLimit({
    client: redis, name: "llm", key: keyOf, at: () => T,
    limits: { rpm: "60/minute", tpm: rl.tokenBucket(1000, 1000, "1m") },
    costs: { tpm: (req) => Number(req.get("X-Tokens")) },
  })), async (base) => {
    const policy = '"rpm";q=60;w=60, "tpm";q=1000;w=60';
    const tokens = { "X-Tokens": "400" };
    // One more request in 1 s (60 a minute), one more token in 60 ms (1000 a minute).
    assert.deepEqual(fields(await get(base, "/", "t", tokens)), [200, policy, '"rpm";r=59;t=1, "tpm";r=600;t=1', null]);
    assert.deepEqual(fields(await get(base, "/", "t", tokens)), [200, policy, '"rpm";r=58;t=1, "tpm";r=200;t=1', null]);
    // 200 tokens left, 400 asked: 200 more come back in 12 s.
    const res = await get(base, "/", "t", tokens);
    assert.deepEqual(fields(res), [429, policy, '"rpm";r=58;t=1, "tpm";r=200;t=1', "12"]);
    assert.deepEqual((await res.json())["violated-policies"], ["tpm"]);
    // Above tpm's capacity: never (413), whatever rpm says.
    assert.deepEqual(fields(await get(base, "/", "u", { "X-Tokens": "1001" })), [413, policy, '"rpm";r=60;t=0, "tpm";r=1000;t=0', null]);
    assert.equal(await redis.exists("rl:llm:{t}:rpm", "rl:llm:{t}:tpm"), 2);
  });
  assert.throws(() => rl.rateLimit({ client: redis, name: "llm2", limits: { rpm: "1/s" }, costs: { tpm: () => 1 } }), /costs\.tpm names no limit/);
});

test("no shared key by accident: limits of different routes never cancel each other", async () => {
  // The trap: a strict login limit and a looser feed limit on one client key.
  await withApp((app) => {
    app.use("/login", rl.rateLimit({ client: redis, limits: "3/minute", key: keyOf }));
    app.use("/feed", rl.rateLimit({ client: redis, limits: "100/minute", key: keyOf }));
  }, async (base) => {
    const statuses = [];
    for (let i = 0; i < 6; i++) {
      await get(base, "/feed", "victim");
      statuses.push((await get(base, "/login", "victim")).status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429, 429, 429]);
    assert.equal(await redis.exists("rl:gcra-3-3-1m:victim", "rl:gcra-100-100-1m:victim"), 2);
  });
  // The same limits twice without a name: refused; the same explicit name: shared on purpose.
  assert.throws(() => rl.rateLimit({ client: redis, limits: "3/minute", key: keyOf }),
    /key space "rl:gcra-3-3-1m" of an earlier rateLimit.*give each a distinct name/);
  rl.rateLimit({ client: redis, limits: "4/minute", name: "shared" });
  rl.rateLimit({ client: redis, limits: "4/minute", name: "shared" });
  // The same limits on another server are another key space.
  rl.rateLimit({ client: new Redis({ lazyConnect: true, port: server.port + 1 }), limits: "3/minute", key: keyOf });
  // An explicit name equal to another's derived one: not both explicit, refused.
  rl.rateLimit({ client: redis, limits: "9/minute", name: "gcra-9-9-1m" });
  assert.throws(() => rl.rateLimit({ client: redis, limits: "9/minute" }), /give each a distinct name/);
  assert.throws(() => rl.rateLimit({ client: redis, limits: "1/s", timeout: 100 }), /timeoutMs/);
  assert.throws(() => rl.rateLimit({ client: redis, limits: "1/s", onError: "open" }), /fail: "open"/);
});

test("express-rate-limit Stores: two on one key space are refused, named ones count apart", async () => {
  const store = (o) => new rl.RateLimitStore({ client: redis, ...o });
  expressRateLimit({ windowMs: 60000, limit: 3, store: store({}) });
  assert.throws(() => expressRateLimit({ windowMs: 60000, limit: 5, store: store({}) }),
    /key space "rl:erl:fixed-60000ms" of an earlier RateLimitStore/);
  await withApp((app) => {
    const opts = { standardHeaders: "draft-8", legacyHeaders: false, keyGenerator: keyOf };
    app.use("/strict", expressRateLimit({ windowMs: 30000, limit: 3, store: store({ name: "strict" }), ...opts }));
    app.use("/loose", expressRateLimit({ windowMs: 30000, limit: 100, store: store({ name: "loose" }), ...opts }));
  }, async (base) => {
    const statuses = [];
    for (let i = 0; i < 4; i++) {
      await get(base, "/loose", "k");
      statuses.push((await get(base, "/strict", "k")).status);
    }
    // A 30 s window may roll over between two requests (windows are aligned to the clock).
    assert.ok(JSON.stringify(statuses) === "[200,200,200,429]" || statuses.every((s, i) => i < 3 || s === 200), String(statuses));
    assert.equal(await redis.exists("rl:erl:strict:k", "rl:erl:loose:k"), 2);
  });
});

for (const algorithm of ["fixed", "gcra"]) {
  test(`express-rate-limit Store (${algorithm})`, async () => {
    const client = new Redis(server.port, "127.0.0.1");
    const name = `erl-${algorithm}`;
    try {
      await withApp((app) => app.use(expressRateLimit({
        windowMs: 10000, limit: 3, standardHeaders: "draft-8", legacyHeaders: false, keyGenerator: keyOf,
        store: new rl.RateLimitStore({ client, algorithm, name }),
      })), async (base) => {
        const statuses = [];
        for (let i = 0; i < 4; i++) statuses.push((await get(base, "/", "s")).status);
        // fixed: the 10 s window aligned to the clock may end between two requests.
        if (algorithm === "gcra" || statuses[3] === 429) assert.deepEqual(statuses, [200, 200, 200, 429]);
        const res = await get(base, "/", "s");
        const retry = Number(res.headers.get("Retry-After"));
        if (res.status === 429) assert.ok(algorithm === "fixed" ? retry >= 1 && retry <= 10 : retry >= 1 && retry <= 4, String(retry));
        assert.equal((await get(base, "/", "other")).status, 200);
        const store = new rl.RateLimitStore({ client, algorithm, name });
        store.init({ windowMs: 10000, limit: 3 });
        const info = await store.get("other");
        assert.equal(info.totalHits, 1);
        if (algorithm === "fixed") {
          // Windows aligned to the clock: the window ends at the next multiple of 10 s.
          const end = Math.ceil(Date.now() / 10000) * 10000;
          assert.ok(Math.abs(info.resetTime.getTime() - end) < 100 || Math.abs(info.resetTime.getTime() - end - 10000) < 100, String(info.resetTime.getTime() - end));
        }
        await store.decrement("other");
        assert.equal(await store.get("other"), undefined);
        await store.resetKey("s");
        assert.equal((await get(base, "/", "s")).status, 200);
      });
    } finally {
      client.disconnect();
    }
  });
}

test("skip and allowlist: not limited, not charged", async () => {
  const T = pinnedNow();
  await withApp((app) => app.use(rl.rateLimit({
    client: redis, limits: "1/minute", name: "skips", key: keyOf, at: () => T,
    skip: (req) => req.path === "/health", allowlist: ["ops"],
  })), async (base) => {
    for (let i = 0; i < 3; i++) {
      assert.equal((await get(base, "/health", "k")).status, 200);
      assert.equal((await get(base, "/", "ops")).status, 200);
    }
    assert.equal(await redis.exists("rl:skips:k", "rl:skips:ops"), 0);
    assert.deepEqual(fields(await get(base, "/", "k")), [200, '"default";q=1;w=60', '"default";r=0;t=60', null]);
    assert.equal((await get(base, "/", "k")).status, 429);
  });
});

test("custom denied answer and statuses", async () => {
  const T = pinnedNow();
  await withApp((app) => {
    app.use("/custom", rl.rateLimit({
      client: redis, limits: "1/minute", name: "custom", key: keyOf, at: () => T,
      onDenied: (req, res, result) => res.status(420).json({ calm: true, wait: result.retryAfterMs }),
    }));
    app.use("/codes", rl.rateLimit({ client: redis, limits: "1/minute", name: "codes", key: keyOf, at: () => T, status: 503, neverStatus: 400,
      cost: (req) => Number(req.query.n || 1) }));
  }, async (base) => {
    await get(base, "/custom", "k");
    const res = await get(base, "/custom", "k");
    assert.deepEqual([res.status, res.headers.get("Retry-After"), await res.json()], [420, "60", { calm: true, wait: 60000 }]);
    await get(base, "/codes", "k");
    assert.equal((await get(base, "/codes", "k")).status, 503);
    assert.equal((await get(base, "/codes?n=2", "j")).status, 400);
  });
});

test("block: a denied client is blocked for the duration (BLOCK)", async () => {
  let T = pinnedNow();
  await withApp((app) => app.use(rl.rateLimit({
    client: redis, limits: "2/minute", name: "blocked", key: keyOf, at: () => T, block: "5m",
  })), async (base) => {
    await get(base, "/", "b");
    await get(base, "/", "b");
    assert.deepEqual(fields(await get(base, "/", "b")), [429, '"default";q=2;w=60', '"default";r=0;t=300', "300"]);
    // 30 s later a unit would be back, but the block holds for 270 s more.
    T += 30000;
    assert.deepEqual(fields(await get(base, "/", "b")), [429, '"default";q=2;w=60', '"default";r=0;t=270', "270"]);
    T += 270000;
    assert.equal((await get(base, "/", "b")).status, 200);
  });
});

test("reserve: hold before the handler, settle after it with the real usage", async () => {
  const T = pinnedNow();
  const limiter = new rl.RateLimiter(redis);
  const settled = [];
  await withApp((app) => {
    app.use(rl.rateLimit({
      limiter, name: "reserve", key: keyOf, at: () => T,
      limits: { rpm: "60/minute", tpm: rl.tokenBucket(1000, 1000, "1m") },
      costs: { tpm: (req) => Number(req.get("X-Estimate")) },
      reserve: { hold: "30s", usage: (req, res) => { settled.push(req.path); return { tpm: Number(res.get("X-Used")) }; } },
    }));
    app.post("/", (req, res) => res.set("X-Used", "150").send("done"));
  }, async (base) => {
    const res = await fetch(base, { method: "POST", headers: { "X-Api-Key": "r", "X-Estimate": "800" } });
    assert.equal(res.status, 200);
    // The hold's numbers: 800 tokens reserved, 200 left.
    assert.equal(res.headers.get("RateLimit"), '"rpm";r=59;t=1, "tpm";r=200;t=1');
    for (let i = 0; i < 50 && settled.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 50));
    // Settled with 150 tokens (and the request itself for rpm).
    const after = await limiter.all([["rl:reserve:{r}:rpm", rl.gcra(60, 60, "1m")], ["rl:reserve:{r}:tpm", rl.tokenBucket(1000, 1000, "1m")]],
      { peek: true, cost: 0, detail: true, at: T });
    assert.deepEqual(after.limiters.map((d) => d.remaining), [59, 850]);
  });
  assert.throws(() => rl.rateLimit({ client: redis, limits: "1/s", name: "r2", reserve: { hold: "1s" } }), /reserve needs/);
});

test("header styles: draft-7, legacy, none; pk on request", async () => {
  const T = pinnedNow();
  const pk = `:${crypto.createHash("sha256").update("p").digest().subarray(0, 12).toString("base64")}:`;
  await withApp((app) => {
    app.use("/d7", rl.rateLimit({ client: redis, limits: "5/minute", name: "d7", key: keyOf, at: () => T, headers: "draft-7" }));
    app.use("/legacy", rl.rateLimit({ client: redis, limits: "5/minute", name: "legacy", key: keyOf, at: () => T, headers: "legacy" }));
    app.use("/none", rl.rateLimit({ client: redis, limits: "5/minute", name: "none", key: keyOf, at: () => T, headers: "none" }));
    app.use("/pk", rl.rateLimit({ client: redis, limits: "5/minute", name: "pk", key: keyOf, at: () => T, partitionKey: true }));
  }, async (base) => {
    const h = (res, ...names) => names.map((n) => res.headers.get(n));
    // One of 5 used: back to full 12 s later (one per 12 s).
    assert.deepEqual(h(await get(base, "/d7", "p"), "RateLimit-Policy", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit"),
      ["5;w=60", "5", "4", "12", null]);
    assert.deepEqual(h(await get(base, "/legacy", "p"), "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit"),
      ["5", "4", String(Math.ceil((T + 12000) / 1000)), null]);
    assert.deepEqual(h(await get(base, "/none", "p"), "RateLimit-Policy", "RateLimit", "X-RateLimit-Limit"), [null, null, null]);
    assert.deepEqual(h(await get(base, "/pk", "p"), "RateLimit-Policy", "RateLimit"),
      [`"default";q=5;w=60;pk=${pk}`, `"default";r=4;t=12;pk=${pk}`]);
  });
});

test("client keys: the peer address, X-Forwarded-For only for trusted hops, IPv6 by /56", () => {
  const req = (remoteAddress, xff) => ({ socket: { remoteAddress }, headers: xff ? { "x-forwarded-for": xff } : {} });
  assert.equal(rl.clientAddress(req("10.0.0.9", "1.2.3.4")), "10.0.0.9");
  assert.equal(rl.clientAddress(req("10.0.0.9", "1.2.3.4"), { trustProxy: 1 }), "1.2.3.4");
  assert.equal(rl.clientAddress(req("10.0.0.9", "6.6.6.6, 1.2.3.4, 10.0.0.8"), { trustProxy: 2 }), "1.2.3.4");
  assert.equal(rl.clientAddress(req("10.0.0.9", "1.2.3.4"), { trustProxy: 5 }), "1.2.3.4");
  assert.equal(rl.clientAddress(req("::ffff:192.0.2.7")), "192.0.2.7");
  assert.equal(rl.clientAddress(req("2001:db8:abcd:12ff:1:2:3:4")), "2001:db8:abcd:1200::/56");
  assert.equal(rl.clientAddress(req("2001:db8:abcd:12ff:1:2:3:4"), { ipv6Subnet: 64 }), "2001:db8:abcd:12ff::/64");
  assert.equal(rl.ipKey("2001:0db8:0000:0000:0000:ff00:0042:8329", { ipv6Subnet: 128 }), "2001:db8::ff00:42:8329");
  assert.equal(rl.ipKey("fe80::1%eth0"), "fe80::/56");
  assert.equal(rl.byAddress({ trustProxy: 1 })(req("10.0.0.9", "2001:db8::1")), "2001:db8::/56");
  assert.equal(rl.clientAddress({ ip: "203.0.113.5", socket: { remoteAddress: "10.0.0.1" }, headers: {} }), "203.0.113.5");
});

const TIMEOUT = 300;

async function pausedServer() {
  const s = await startServer();
  const c = new Redis(s.port, "127.0.0.1");
  const sleeping = c.call("DEBUG", "SLEEP", "1").catch(() => {});
  await new Promise((r) => setTimeout(r, 100));
  return { port: s.port, async stop() { await sleeping; c.disconnect(); await s.stop(); } };
}

for (const state of ["down", "paused"]) {
  for (const [fail, expected] of [["open", 200], ["closed", 503]]) {
    test(`fails ${fail} within timeoutMs when Redis is ${state}`, async () => {
      const target = state === "down" ? { port: await freePort(), stop: async () => {} } : await pausedServer();
      const client = new Redis(target.port, "127.0.0.1", { maxRetriesPerRequest: 1, retryStrategy: () => 200 });
      client.on("error", () => {});
      const lines = [];
      try {
        await withApp((app) => app.use(rl.rateLimit({
          client, limits: rl.gcra(2, 2, "10s"), name: `${state}-${fail}`, fail, timeoutMs: TIMEOUT,
          logger: { warn: (m) => lines.push(m), error: (m) => lines.push(m) },
        })), async (base) => {
          const start = Date.now();
          const res = await get(base, "/", "k");
          const elapsed = Date.now() - start;
          assert.equal(res.status, expected);
          assert.equal(res.headers.get("RateLimit"), null);
          assert.ok(elapsed < TIMEOUT + 500, `took ${elapsed} ms`);
          assert.equal(lines.length, 1);
        });
      } finally {
        client.disconnect();
        await target.stop();
      }
    });
  }
}

test("middleware with shadow: nothing denied, charged as enforced, headers as the reply", async () => {
  const T = pinnedNow();
  const client = await createClient({ url: server.url, RESP: 3 }).connect();
  const limiter = new rl.RateLimiter(client);
  try {
    await withApp((app) => {
      // 2 per 10 s (one unit back every 5 s).
      app.use("/one", rl.rateLimit({ limiter, key: keyOf, shadow: true, limits: rl.gcra(2, 2, "10s"), name: "sh", at: () => T }));
      app.use("/many", rl.rateLimit({ limiter, key: keyOf, shadow: true, name: "shm", at: () => T,
        limits: { burst: rl.gcra(2, 2, "10s"), daily: rl.fixed(1, "1d") } }));
    }, async (base) => {
      const seen = [];
      for (let i = 0; i < 3; i++) seen.push(fields(await get(base, "/one", "s")));
      // The third would be denied: let through, no Retry-After, one unit back in 5 s.
      assert.deepEqual(seen, [
        [200, '"default";q=2;w=10', '"default";r=1;t=5', null],
        [200, '"default";q=2;w=10', '"default";r=0;t=5', null],
        [200, '"default";q=2;w=10', '"default";r=0;t=5', null],
      ]);
      // Charged as enforced: the two granted units are used, an enforced call is denied.
      assert.equal((await limiter.gcra("rl:sh:s", 2, 2, "10s", { peek: true, at: T })).allowed, false);
      // daily (1 a day) would deny the second request: let through, charging nothing.
      const day = 86400000;
      const dayLeft = Math.ceil((day - (T % day)) / 1000);
      await get(base, "/many", "m");
      assert.deepEqual(fields(await get(base, "/many", "m")), [200, '"burst";q=2;w=10, "daily";q=1;w=86400',
        `"burst";r=1;t=5, "daily";r=0;t=${dayLeft}`, null]);
    });
  } finally {
    await client.quit();
  }
});
