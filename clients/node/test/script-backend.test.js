"use strict";
// The script backend (backend "lua", or "auto" on a server without the module): the package's
// copy of the script is the repository's, the limiters work on a server without the module on
// ioredis and node-redis, everything the script cannot do rejects naming the module, and the
// Express middleware and the express-rate-limit Store limit there too.

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const express = require("express");
const { rateLimit: expressRateLimit } = require("express-rate-limit");
const Redis = require("ioredis");
const { createClient } = require("redis");
const rl = require("..");
const { startServer } = require("./server");

let bare;
let withModule;
test.before(async () => {
  bare = await startServer(undefined, { module: false });
  withModule = await startServer();
});
test.after(async () => {
  await bare.stop();
  await withModule.stop();
});

async function listen(app) {
  const s = app.listen(0, "127.0.0.1");
  await new Promise((r) => s.once("listening", r));
  return { base: `http://127.0.0.1:${s.address().port}`, close: () => new Promise((r) => s.close(r)) };
}

const quiet = () => {
  const lines = [];
  return { lines, info: (m) => lines.push(m), warn: (m) => lines.push(m) };
};

test("the packaged script is the repository's lua/ratelimit.lua, byte for byte", () => {
  const repo = fs.readFileSync(path.join(__dirname, "..", "..", "..", "lua", "ratelimit.lua"), "utf8");
  assert.equal(rl.SCRIPT, repo, "run scripts/sync-lua.sh");
});

for (const kind of ["ioredis", "node-redis"]) {
  test(`${kind}: auto uses the script where the module is missing; the rest names the module`, async () => {
    const client = kind === "ioredis" ? new Redis(bare.port, "127.0.0.1")
      : await createClient({ url: bare.url }).connect();
    try {
      await (kind === "ioredis" ? client.flushall() : client.flushAll());
      const logger = quiet();
      const limiter = new rl.RateLimiter(client, { logger });
      const got = [];
      for (let i = 0; i < 4; i++) got.push(await limiter.gcra("u", 3, 1, "1h"));
      assert.deepEqual(got.map((r) => [r.allowed, r.remaining]), [[true, 2], [true, 1], [true, 0], [false, 0]]);
      assert.ok(got[3].retryAfterMs > 3590000);
      assert.equal(await limiter.backend(), "lua");
      assert.equal(logger.lines.length, 1);
      assert.match(logger.lines[0], /script backend/);
      const keys = kind === "ioredis" ? await client.keys("*") : await client.keys("*");
      assert.deepEqual(keys, ["u:lua"]);
      const all = await limiter.all({ "{a}:1": rl.gcra(10, 1, "1m"), "{a}:2": rl.fixed(3, "1m") }, { cost: 2, detail: true });
      assert.equal(all.allowed, true);
      assert.equal(all.remaining, 1);
      assert.deepEqual(all.limiters.map((d) => d.name), ["{a}:1:lua", "{a}:2:lua"]);
      const never = await limiter.check("t", rl.tokenBucket(5, 1, "1m"), { cost: 6 });
      assert.equal(never.never, true);
      const sc = await limiter.slidingCounter("s", 4, "1m", { cost: 5, bestEffort: true });
      assert.deepEqual([sc.granted, sc.remaining], [4, 0]);
      // The server's script cache flushed: the next call loads it again.
      await (kind === "ioredis" ? client.script("FLUSH") : client.sendCommand(["SCRIPT", "FLUSH"]));
      assert.equal((await limiter.gcra("u2", 3, 1, "1h")).remaining, 2);
      const refused = {
        DEDUP: () => limiter.gcra("k", 5, 1, "1s", { dedup: "x" }),
        SHADOW: () => limiter.gcra("k", 5, 1, "1s", { shadow: true }),
        BLOCK: () => limiter.gcra("k", 5, 1, "1s", { block: "1m" }),
        AT: () => limiter.gcra("k", 5, 1, "1s", { at: Date.now() }),
        calendar: () => limiter.fixed("k", 5, "month"),
        "RL.LEAKYBUCKET": () => limiter.leakyBucket("k", 5, 1, "1s"),
        "RL.SETTLE": () => limiter.settle(["k"], "id", [1]),
        "RL.BLOCK": () => limiter.block("k", "1m"),
        "RL.INFO": () => limiter.info("k"),
        policies: () => limiter.policyList(),
      };
      for (const [what, call] of Object.entries(refused)) {
        await assert.rejects(call(), (e) => e instanceof rl.ModuleRequiredError && e.message.includes(what) &&
          e.message.includes("redis-ratelimit module"), what);
      }
      assert.equal(kind === "ioredis" ? await client.exists("k", "k:lua") : await client.exists(["k", "k:lua"]), 0);
    } finally {
      if (kind === "ioredis") client.disconnect();
      else await client.quit();
    }
  });
}

test("Express middleware and the express-rate-limit Store on the script", async () => {
  const client = new Redis(bare.port, "127.0.0.1");
  await client.flushall();
  const app = express();
  app.use("/mw", rl.rateLimit({
    client, name: "lua-mw", key: () => "ip1",
    limits: { burst: rl.gcra(2, 1, "1m"), day: rl.slidingCounter(100, "1d") },
  }));
  app.use("/erl", expressRateLimit({
    windowMs: 60000, limit: 2, store: new rl.RateLimitStore({ client, name: "lua-store" }), keyGenerator: () => "ip1",
  }));
  app.get(["/mw", "/erl"], (req, res) => res.send("ok"));
  const http = await listen(app);
  try {
    const mw = [];
    for (let i = 0; i < 3; i++) mw.push(await fetch(`${http.base}/mw`));
    assert.deepEqual(mw.map((r) => r.status), [200, 200, 429]);
    assert.equal(mw[0].headers.get("RateLimit-Policy"), '"burst";q=2;w=120, "day";q=100;w=86400');
    assert.equal(mw[2].headers.get("Retry-After"), "60");
    const erl = [];
    for (let i = 0; i < 3; i++) erl.push((await fetch(`${http.base}/erl`)).status);
    assert.deepEqual(erl, [200, 200, 429]);
    assert.deepEqual((await client.keys("rl:*")).sort(),
      ["rl:erl:lua-store:ip1:lua", "rl:lua-mw:{ip1}:burst:lua", "rl:lua-mw:{ip1}:day:lua"]);
    // resetKey removes the script's own key.
    const store = new rl.RateLimitStore({ client, name: "lua-store-2" });
    store.init({ windowMs: 60000, limit: 2 });
    await store.increment("x");
    assert.equal(await client.exists("rl:erl:lua-store-2:x:lua"), 1);
    await store.resetKey("x");
    assert.equal(await client.exists("rl:erl:lua-store-2:x:lua"), 0);
  } finally {
    await http.close();
    client.disconnect();
  }
});

test("backend lua: the middleware refuses what the script cannot do when it is built", () => {
  const client = new Redis(bare.port, "127.0.0.1", { lazyConnect: true });
  const make = (o) => rl.rateLimit({ client, backend: "lua", limits: "5/minute", ...o });
  assert.throws(() => make({ name: "r1", shadow: true }), (e) => e instanceof rl.ModuleRequiredError && /shadow/.test(e.message));
  assert.throws(() => make({ name: "r2", limits: rl.fixed(5, "day") }), (e) => e instanceof rl.ModuleRequiredError && /calendar/.test(e.message));
  client.disconnect();
});

test("auto uses the module where it is loaded; a script limiter beside it keeps its own keys", async () => {
  const client = new Redis(withModule.port, "127.0.0.1");
  await client.del("bm", "bm:lua");
  const limiter = new rl.RateLimiter(client, { logger: quiet() });
  assert.equal((await limiter.gcra("bm", 2, 1, "1m")).remaining, 1);
  assert.equal(await limiter.backend(), "module");
  const lua = new rl.RateLimiter(client, { backend: "lua" });
  assert.equal((await lua.gcra("bm", 2, 1, "1m")).remaining, 1);
  assert.equal(await client.type("bm:lua"), "string");
  assert.notEqual(await client.type("bm"), "string");
  client.disconnect();
});
