"use strict";
// Reservations (hold: HOLD ttl with dedup) and settle() (RL.SETTLE) against the real module on
// ioredis and node-redis (RESP2 and RESP3). Expected values are worked out from the parameters
// and AT times, never read back.

const test = require("node:test");
const assert = require("node:assert/strict");
const Redis = require("ioredis");
const { createClient } = require("redis");
const rl = require("..");
const { startServer, pinnedNow } = require("./server");

const five = (r) => [r.granted, r.limit, r.remaining, r.retryAfterMs, r.resetAfterMs];
// A token bucket of 100 refilling 100 per hour: one token every 36 s, so calls at one AT see no
// refill and a debt of d tokens is repaid in d * 36 s.
const CAP = 100;
const TOKEN_MS = 36000;

let server;
test.before(async () => { server = await startServer(); });
test.after(async () => { await server.stop(); });

const clients = {
  "ioredis resp2": async () => new Redis(server.port, "127.0.0.1", { protocol: 2 }),
  "ioredis resp3 (legacy flat maps)": async () => new Redis(server.port, "127.0.0.1", { protocol: 3 }),
  "ioredis resp3 replyMapping resp3": async () => new Redis(server.port, "127.0.0.1", { protocol: 3, replyMapping: "resp3" }),
  "node-redis resp2": async () => createClient({ url: server.url, RESP: 2 }).connect(),
  "node-redis resp3": async () => createClient({ url: server.url, RESP: 3 }).connect(),
};

async function close(client) {
  if (typeof client.disconnect === "function" && typeof client.quit !== "function") client.disconnect();
  else await client.quit();
}

for (const [name, make] of Object.entries(clients)) {
  test(`hold and settle: ${name}`, async () => {
    const client = await make();
    const L = new rl.RateLimiter(client);
    const p = `${name.replace(/\W/g, "")}:`;
    const now = pinnedNow();
    try {
      const t = `${p}t`;
      let r = await L.tokenBucket(t, CAP, CAP, "1h", { cost: 40, dedup: "r1", hold: "30s", at: now });
      assert.deepEqual(five(r), [40, CAP, 60, 0, 40 * TOKEN_MS]);
      // 25 used of the 40 held: 15 come back; a retried settle replies the same.
      let s = await L.settle([t], "r1", [25], { at: now });
      assert.deepEqual(s.map(five), [[25, CAP, 75, 0, 25 * TOKEN_MS]]);
      s = await L.settle([t], "r1", [25], { at: now });
      assert.deepEqual(s.map(five), [[25, CAP, 75, 0, 25 * TOKEN_MS]]);
      // 10 held, 90 used: 80 more are charged, 75 - 10 - 80 = -15 tokens: one unit is 16
      // tokens (16 * 36 s) away.
      assert.ok((await L.tokenBucket(t, CAP, CAP, "1h", { cost: 10, dedup: "r2", hold: "30s", at: now })).allowed);
      s = await L.settle([t], "r2", [90], { at: now });
      assert.deepEqual(s.map(five), [[90, CAP, 0, 16 * TOKEN_MS, 115 * TOKEN_MS]]);
      assert.equal(s[0].allowed, false);
      r = await L.tokenBucket(t, CAP, CAP, "1h", { at: now });
      assert.deepEqual([r.allowed, r.retryAfterMs], [false, 16 * TOKEN_MS]);

      // RL.ALL holds every limiter's charge under one id; settle per key.
      const tag = `{${p}c}`;
      const limits = {
        [`${tag}:rpm`]: rl.gcra(60, 60, "1m", { name: "rpm" }),
        [`${tag}:tpm`]: rl.tokenBucket(9000, 9000, "1m", { name: "tpm", charge: 3000 }),
      };
      r = await L.all(limits, { dedup: "q1", hold: "30s", at: now, detail: true });
      assert.deepEqual(r.limiters.map((d) => d.remaining), [59, 6000]);
      // 1 request and 1200 tokens (9000 per minute: 150 per s); a missing key is null.
      s = await L.settle([`${tag}:rpm`, `${tag}:tpm`, `${tag}:none`], "q1", [1, 1200, 5], { at: now });
      assert.deepEqual(s.slice(0, 2).map(five), [[1, 60, 59, 0, 1000], [1200, 9000, 7800, 0, 8000]]);
      assert.equal(s[2], null);

      // Unsettled, a reservation comes back at exactly its ttl. A fixed hour window, 1 s after
      // an hour starts (ahead of the clock: the server lets AT run ahead).
      const t0 = (Math.floor(now / 3600000) + 1) * 3600000 + 1000;
      r = await L.fixed(`${p}f`, 100, "1h", { cost: 30, dedup: "crash", hold: "10s", at: t0 });
      assert.deepEqual(five(r), [30, 100, 70, 0, 3599000]);
      r = await L.fixed(`${p}f`, 100, "1h", { cost: 0, peek: true, at: t0 + 9999 });
      assert.equal(r.remaining, 70);
      r = await L.fixed(`${p}f`, 100, "1h", { cost: 0, peek: true, at: t0 + 10000 });
      assert.equal(r.remaining, 100);
      s = await L.settle([`${p}f`], "crash", [30], { at: t0 + 10000 });
      assert.deepEqual(s.map(five), [[0, 100, 100, 0, 0]]);
    } finally {
      await close(client);
    }
  });
}

test("hold and settle arguments", async () => {
  const L = new rl.RateLimiter({ call: async () => { throw new Error("not sent"); } });
  assert.throws(() => L.gcra("g", 1, 1, "1s", { hold: "1s" }), /hold needs dedup/);
  await assert.rejects(L.settle(["a", "b"], "id", [1]), /one units per key/);
  await assert.rejects(L.settle(["a"], "id", [-1]), RangeError);
  await assert.rejects(L.settle([], "id", []), RangeError);
  await assert.rejects(L.settle("a", "id", [1]), TypeError);
  assert.deepEqual(rl.parseResult([1, 2, 3, 0, 4]).allowed, true);
});

for (const RESP of [2, 3]) {
  test(`node-redis module: settle (RESP${RESP})`, async () => {
    const client = await createClient({ url: server.url, RESP, modules: { rl: rl.RateLimitModule } }).connect();
    const now = pinnedNow();
    const k = `nrs${RESP}`;
    try {
      const r = await client.rl.gcra(k, 5, 5, "5s", { cost: 2, dedup: "y", hold: "5s", at: now });
      assert.deepEqual(five(r), [2, 5, 3, 0, 2000]);
      const s = await client.rl.settle([k], "y", [3], { at: now });
      assert.deepEqual(s.map(five), [[3, 5, 2, 0, 3000]]);
    } finally {
      await client.quit();
    }
  });
}

test("ioredis built-in rl.settle with its reply transformer", async () => {
  const client = new Redis(server.port, "127.0.0.1", { protocol: 2 });
  rl.installIoredis(client, Redis.Command);
  const now = pinnedNow();
  try {
    await client["rl.gcra"]("ios", 5, 5, "5s", "COST", 2, "DEDUP", "z", "HOLD", "5s", "AT", now);
    const s = await client["rl.settle"](1, "ios", "z", 0, "AT", now);
    assert.ok(s[0] instanceof rl.Result);
    assert.deepEqual(s.map(five), [[0, 5, 5, 0, 0]]);
  } finally {
    client.disconnect();
  }
});
