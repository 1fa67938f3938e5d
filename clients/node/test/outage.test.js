"use strict";
// Failures are seen and never charged late, against real servers: one stopped and restarted on
// the same port mid-test (its state saved and loaded, so the count after the outage is exact),
// and one without the module.

const test = require("node:test");
const assert = require("node:assert/strict");
const express = require("express");
const { rateLimit: expressRateLimit } = require("express-rate-limit");
const Redis = require("ioredis");
const { createClient } = require("redis");
const rl = require("..");
const { startServer, pinnedNow } = require("./server");

async function listen(app) {
  const s = app.listen(0, "127.0.0.1");
  await new Promise((r) => s.once("listening", r));
  return { base: `http://127.0.0.1:${s.address().port}`, close: () => new Promise((r) => s.close(r)) };
}

const get = (base, path = "/", key = "k") => fetch(base + path, { headers: { "X-Api-Key": key } });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function recorder() {
  const lines = [];
  return { lines, warn: (m) => lines.push(["warn", m]), error: (m) => lines.push(["error", m]) };
}

const clients = {
  // Default options: offline queue on, reconnecting forever; the commands of requests made during
  // the outage would be queued and sent (charged) on reconnection.
  ioredis: async (port) => {
    const c = new Redis(port, "127.0.0.1", { retryStrategy: () => 50 });
    c.on("error", () => {});
    await new Promise((r) => c.once("ready", r));
    return { client: c, ready: () => new Promise((r) => (c.status === "ready" ? r() : c.once("ready", r))), close: () => c.disconnect() };
  },
  "node-redis": async (port) => {
    const c = createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: () => 50 } });
    c.on("error", () => {});
    await c.connect();
    return { client: c, ready: () => new Promise((r) => (c.isReady ? r() : c.once("ready", r))), close: () => c.destroy() };
  },
};

for (const [name, make] of Object.entries(clients)) {
  test(`${name}: requests answered 503 during an outage are never charged after reconnection`, async () => {
    let server = await startServer();
    const { port, dir } = server;
    const { client, ready, close } = await make(port);
    const at = pinnedNow();
    const log = recorder();
    const errors = [];
    const app = express();
    app.use(rl.rateLimit({
      client, limits: rl.gcra(5, 5, "1m"), name: `outage-${name}`, key: (req) => req.get("X-Api-Key"),
      timeoutMs: 300, logger: log, onError: (err) => errors.push(err), at: () => at,
    }));
    app.get("/", (req, res) => res.send("ok"));
    const http = await listen(app);
    try {
      let res = await get(http.base);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("RateLimit"), '"default";r=4;t=12');
      // The state so far is saved; the server stops (and loads it when it starts again).
      await new rl.RateLimiter(client).send(["SAVE"]);
      await server.stop({ keep: true });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await get(http.base)).status);
      assert.deepEqual(statuses, [503, 503, 503, 503]);
      assert.equal(errors.length, 4);
      assert.ok(errors.every((e) => e instanceof rl.NotConnectedError || e instanceof rl.LimiterTimeoutError), String(errors[0]));
      // One line when it started failing closed.
      assert.equal(log.lines.length, 1);
      assert.match(log.lines[0][1], new RegExp(`rate limiter "outage-${name}" unavailable, failing closed \\(503\\)`));

      server = await startServer(undefined, { port, dir });
      await ready();
      await sleep(300); // anything the client queued would have been sent by now
      // Exactly the one request made before the outage is charged: 4 of 5 left.
      const peek = await new rl.RateLimiter(client).gcra(`rl:outage-${name}:k`, 5, 5, "1m", { peek: true, cost: 0, at });
      assert.equal(peek.remaining, 4);
      res = await get(http.base);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("RateLimit"), '"default";r=3;t=12');
      assert.equal(log.lines.length, 2);
      assert.match(log.lines[1][1], /answers again/);
    } finally {
      await http.close();
      await close();
      await server.stop();
    }
  });
}

test("without the module: 503 (or open) with a line and a hook naming the module and how to load it", async () => {
  const server = await startServer(undefined, { module: false });
  const client = new Redis(server.port, "127.0.0.1");
  const app = express();
  const closedLog = recorder();
  const openLog = recorder();
  const errors = [];
  const backend = "module";
  app.use("/closed", rl.rateLimit({ client, backend, limits: "5/minute", name: "nomod-closed", logger: closedLog, onError: (e, req) => errors.push([e, req.path]) }));
  app.use("/open", rl.rateLimit({ client, backend, limits: "5/minute", name: "nomod-open", fail: "open", logger: openLog }));
  app.use("/erl", expressRateLimit({
    windowMs: 60000, limit: 5, store: new rl.RateLimitStore({ client, backend, name: "nomod-store" }),
  }));
  app.get(["/closed", "/open", "/erl"], (req, res) => res.send("ok"));
  // express-rate-limit passes the Store's error to next(err): the app's error handler sees it.
  const seen = [];
  app.use((err, req, res, next) => { seen.push(err); res.status(500).send(err.message); void next; });
  const http = await listen(app);
  try {
    for (let i = 0; i < 3; i++) {
      const res = await get(http.base, "/closed");
      assert.equal(res.status, 503);
      assert.equal(res.headers.get("Content-Type"), "application/problem+json");
    }
    assert.equal(errors.length, 3);
    assert.ok(errors[0][0] instanceof rl.ModuleNotLoadedError);
    assert.equal(errors[0][1], "/");
    assert.match(errors[0][0].message, /redis-ratelimit module is not loaded.*loadmodule \/path\/to\/libredis_ratelimit\.so/);
    assert.equal(closedLog.lines.length, 1);
    assert.match(closedLog.lines[0][1], /failing closed \(503\).*loadmodule \/path\/to\/libredis_ratelimit\.so/);
    for (let i = 0; i < 2; i++) assert.equal((await get(http.base, "/open")).status, 200);
    assert.equal(openLog.lines.length, 1);
    assert.match(openLog.lines[0][1], /failing open \(requests pass unlimited\).*not loaded/);
    const res = await get(http.base, "/erl");
    assert.equal(res.status, 500);
    assert.ok(seen[0] instanceof rl.ModuleNotLoadedError);
    // The client alone: the server's "unknown command" becomes the same error.
    await assert.rejects(new rl.RateLimiter(client, { backend }).gcra("k", 1, 1, "1s"),
      (e) => e instanceof rl.ModuleNotLoadedError && /RL\.GCRA is an unknown command.*loadmodule/.test(e.message));
    await assert.rejects(new rl.RateLimiter(client, { backend }).checkModule(), rl.ModuleNotLoadedError);
  } finally {
    await http.close();
    client.disconnect();
    await server.stop();
  }
});

test("a key or cost function that throws is the app's error (next(err)), not an outage", async () => {
  const server = await startServer();
  const client = new Redis(server.port, "127.0.0.1");
  const log = recorder();
  const errors = [];
  const app = express();
  app.use("/key", rl.rateLimit({ client, limits: "5/minute", name: "throws-key", logger: log, onError: (e) => errors.push(e),
    key: () => { throw new Error("no tenant header"); } }));
  app.use("/cost", rl.rateLimit({ client, limits: "5/minute", name: "throws-cost", logger: log, onError: (e) => errors.push(e),
    cost: async () => { throw new Error("bad body"); } }));
  app.get(["/key", "/cost"], (req, res) => res.send("ok"));
  const seen = [];
  app.use((err, req, res, next) => { seen.push(err.message); res.status(500).send("app error"); void next; });
  const http = await listen(app);
  try {
    assert.equal((await get(http.base, "/key")).status, 500);
    assert.equal((await get(http.base, "/cost")).status, 500);
    assert.deepEqual(seen, ["no tenant header", "bad body"]);
    assert.deepEqual([errors.length, log.lines.length], [0, 0]);
  } finally {
    await http.close();
    client.disconnect();
    await server.stop();
  }
});

test("RateLimiter: a command is never queued while disconnected (fails within timeoutMs)", async () => {
  const server = await startServer();
  const { port } = server;
  const client = new Redis(port, "127.0.0.1", { retryStrategy: () => 50 });
  client.on("error", () => {});
  await new Promise((r) => client.once("ready", r));
  const L = new rl.RateLimiter(client, { timeoutMs: 200 });
  const at = pinnedNow();
  let restarted;
  try {
    await L.send(["SAVE"]);
    await server.stop({ keep: true });
    const start = Date.now();
    await assert.rejects(L.gcra("direct", 2, 2, "1m", { at }), rl.NotConnectedError);
    assert.ok(Date.now() - start < 600);
    restarted = await startServer(undefined, { port, dir: server.dir });
    await new Promise((r) => (client.status === "ready" ? r() : client.once("ready", r)));
    await sleep(200);
    assert.equal((await L.gcra("direct", 2, 2, "1m", { peek: true, cost: 0, at })).remaining, 2);
  } finally {
    client.disconnect();
    if (restarted) await restarted.stop();
  }
});

test("express-rate-limit Store: a paused server fails the call within timeoutMs (next(err), or passOnStoreError)", async () => {
  const server = await startServer();
  const client = new Redis(server.port, "127.0.0.1");
  const sleeper = new Redis(server.port, "127.0.0.1");
  const app = express();
  app.use("/strict", expressRateLimit({ windowMs: 60000, limit: 5, store: new rl.RateLimitStore({ client, name: "paused-strict", timeoutMs: 200 }) }));
  app.use("/lenient", expressRateLimit({ windowMs: 60000, limit: 5, passOnStoreError: true, validate: false,
    store: new rl.RateLimitStore({ client, name: "paused-lenient", timeoutMs: 200 }) }));
  app.get(["/strict", "/lenient"], (req, res) => res.send("ok"));
  const seen = [];
  app.use((err, req, res, next) => { seen.push(err); res.status(500).send("store error"); void next; });
  const http = await listen(app);
  try {
    assert.equal((await get(http.base, "/strict")).status, 200);
    const sleeping = sleeper.call("DEBUG", "SLEEP", "1.5");
    await sleep(100);
    const start = Date.now();
    assert.equal((await get(http.base, "/strict")).status, 500);
    assert.equal((await get(http.base, "/lenient")).status, 200);
    assert.ok(Date.now() - start < 1000, `took ${Date.now() - start} ms`);
    assert.ok(seen[0] instanceof rl.LimiterTimeoutError, String(seen[0]));
    await sleeping;
  } finally {
    await http.close();
    client.disconnect();
    sleeper.disconnect();
    await server.stop();
  }
});

for (const [name, make] of Object.entries(clients)) {
  test(`${name}: a command in flight when the server dies is not resent (and charged) after reconnection`, async () => {
    let server = await startServer();
    const { port, dir } = server;
    const { client, ready, close } = await make(port);
    const sleeper = new Redis(port, "127.0.0.1");
    sleeper.on("error", () => {});
    const at = pinnedNow();
    const L = new rl.RateLimiter(client, { timeoutMs: 300 });
    try {
      await L.send(["SAVE"]);
      // The server stops reading; the command is written and waits for a reply that never comes.
      sleeper.call("DEBUG", "SLEEP", "5").catch(() => {});
      await sleep(100);
      const call = L.gcra("inflight", 3, 3, "1m", { at }).then(() => "answered", (e) => e);
      await sleep(100);
      await server.stop({ keep: true, signal: "SIGKILL" });
      await sleep(400); // the call's 300 ms are up before the server is back
      server = await startServer(undefined, { port, dir });
      await ready();
      await sleep(300);
      const outcome = await Promise.race([call, sleep(1000).then(() => "pending")]);
      assert.ok(outcome instanceof Error, String(outcome));
      // Nothing charged: the command was not executed before the kill, nor after reconnection.
      assert.equal((await L.gcra("inflight", 3, 3, "1m", { peek: true, cost: 0, at })).remaining, 3);
    } finally {
      sleeper.disconnect();
      await close();
      await server.stop();
    }
  });
}
