"use strict";
// Detailed replies (DETAIL), RL.ALL's CHARGE and NAME, RL.CHECKALL, DELAY, calendar windows and
// RL.ACQUIRE ... WAIT against the real module on ioredis and node-redis (RESP2 and RESP3).
// Expected values are worked out from the parameters and AT times, never read back.

const test = require("node:test");
const assert = require("node:assert/strict");
const Redis = require("ioredis");
const { createClient } = require("redis");
const rl = require("..");
const { startServer, pinnedNow } = require("./server");

const five = (r) => [r.granted, r.limit, r.remaining, r.retryAfterMs, r.resetAfterMs];
const detail = (name, key, cost, granted, limit, remaining, retryAfterMs, resetAfterMs, windowMs) =>
  ({ name, key, cost, granted, limit, remaining, retryAfterMs, resetAfterMs, windowMs, policy: null });

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

// Unix ms of a wall-clock time in a fixed UTC offset (minutes).
const at = (y, mo, d, offsetMin = 0) => Date.UTC(y, mo - 1, d) - offsetMin * 60000;

for (const [name, make] of Object.entries(clients)) {
  test(`detail, charge, name, checkAll, delay, calendar: ${name}`, async () => {
    const client = await make();
    const L = new rl.RateLimiter(client);
    const p = `${name.replace(/\W/g, "")}:`;
    const now = pinnedNow();
    try {
      // GCRA 5 per 10 s: one unit is 2 s, fresh after 5 * 10 s / 5.
      let r = await L.gcra(`${p}g`, 5, 5, "10s", { at: now, detail: true });
      assert.deepEqual(five(r), [1, 5, 4, 0, 2000]);
      assert.deepEqual([r.deniedBy, r.reason], [null, "granted"]);
      assert.deepEqual(r.limiters, [detail(`${p}g`, `${p}g`, 1, 1, 5, 4, 0, 2000, 10000)]);
      r = await L.gcra(`${p}g`, 5, 5, "10s", { at: now });
      assert.deepEqual([r.reason, r.limiters], [null, []]);
      r = await L.gcra(`${p}g`, 5, 5, "10s", { cost: 6, at: now, detail: true });
      assert.deepEqual([r.never, r.deniedBy, r.reason], [true, `${p}g`, "never"]);
      // A concurrency limiter has no window.
      r = await L.acquire(`${p}c`, 3, "10s", "x", { at: now, detail: true });
      assert.deepEqual(r.limiters, [detail(`${p}c`, `${p}c`, 1, 1, 3, 2, 0, 10000, 0)]);

      // RL.ALL: rpm 60/min and tpm 9000 tokens at 1500/s, charged 3000 each call.
      const tag = `{${p}t}`;
      const limits = {
        [`${tag}:rpm`]: rl.gcra(60, 60, "1m", { name: "rpm" }),
        [`${tag}:tpm`]: rl.tokenBucket(9000, 1500, "1s", { name: "tpm", charge: 3000 }),
      };
      for (let i = 0; i < 2; i++) {
        r = await L.checkAll(limits, { cost: 2, at: now, detail: true });
        assert.ok(r.allowed);
        assert.deepEqual(r.limiters.map((d) => d.remaining), [58, 6000]);
      }
      r = await L.all(limits, { at: now, detail: true });
      // limit/remaining from the limiter allowing the fewest more calls: tpm (6000 / 3000 = 2).
      assert.deepEqual(five(r), [1, 9000, 6000, 0, 2000]);
      assert.deepEqual(r.limiters, [
        detail("rpm", `${tag}:rpm`, 1, 1, 60, 59, 0, 1000, 60000),
        detail("tpm", `${tag}:tpm`, 3000, 3000, 9000, 6000, 0, 2000, 6000),
      ]);
      await L.all(limits, { at: now });
      await L.all(limits, { at: now });
      r = await L.all(limits, { at: now, detail: true });
      assert.deepEqual([r.allowed, r.deniedBy, r.reason, r.retryAfterMs, r.limiters[0].remaining], [false, "tpm", "limit", 2000, 57]);
      // DELAY: a wait of exactly the delay is granted now.
      assert.equal((await L.all(limits, { at: now, delay: "1999ms" })).allowed, false);
      r = await L.all(limits, { at: now, delay: "2s" });
      assert.deepEqual([r.allowed, r.granted, r.retryAfterMs], [true, 1, 2000]);
      // RL.CHECK with a name and a charge changes nothing.
      r = await L.check(`${p}k`, rl.fixed(10, "1m", { name: "quota", charge: 4 }), { at: now, detail: true });
      assert.deepEqual([r.limiters[0].name, r.limiters[0].cost, r.limiters[0].remaining], ["quota", 4, 6]);
      assert.equal(await L.info(`${p}k`), null);

      // DELAY on the GCRA family: 2 units at 1 per second, the third is 1 s away (the leaky
      // bucket's wait is its queue delay, behind the 2 queued units).
      for (const [method, wait] of [["gcra", 1000], ["tokenBucket", 1000], ["leakyBucket", 2000]]) {
        const key = `${p}d${method}`;
        assert.ok((await L[method](key, 2, 1, "1s", { cost: 2, at: now })).allowed);
        assert.equal((await L[method](key, 2, 1, "1s", { at: now, delay: 999 })).allowed, false);
        r = await L[method](key, 2, 1, "1s", { at: now, delay: "1s" });
        assert.deepEqual([r.allowed, r.granted, r.retryAfterMs], [true, 1, wait], method);
      }

      // Calendar windows. 2031-01-20 12:00 UTC; a month anchored on the 15th in Paris (UTC+1 in
      // winter) runs from Jan 15 to Feb 15 local midnight.
      const t = Date.UTC(2031, 0, 20, 12);
      r = await L.fixed(`${p}m`, 10, "month", { tz: "Europe/Paris", anchor: 15, cost: 2, at: t });
      assert.deepEqual(five(r), [2, 10, 8, 0, at(2031, 2, 15, 60) - t]);
      // A week starting on Sunday at +05:30: Monday Jan 20's week ends on Sunday Jan 26.
      r = await L.fixed(`${p}w`, 5, "week", { tz: "+05:30", anchor: "sun", at: t, detail: true });
      assert.deepEqual(five(r), [1, 5, 4, 0, at(2031, 1, 26, 330) - t]);
      r = await L.check(`${p}y`, rl.fixed(100, "year", { anchor: "04-15" }), { at: t });
      assert.deepEqual(five(r), [1, 100, 99, 0, at(2031, 4, 15) - t]);
      r = await L.all({ [`{${p}d}:day`]: rl.fixed(3, "day", { tz: "Europe/Paris" }) }, { at: t });
      assert.deepEqual(five(r), [1, 3, 2, 0, at(2031, 1, 21, 60) - t]);
    } finally {
      await close(client);
    }
  });
}

test("specs: charge, name, calendar options, validation", () => {
  assert.deepEqual(rl.fixed(5, "day", { tz: "UTC", anchor: 1, charge: 0, name: "d" }).params, ["5", "day", "TZ", "UTC", "ANCHOR", "1"]);
  assert.equal(rl.fixed(5, "month").windowMs, 0);
  assert.throws(() => rl.fixed(10, "1m", { tz: "UTC" }), RangeError);
  assert.throws(() => rl.gcra(1, 1, "1s", { name: "a b" }), RangeError);
  assert.throws(() => rl.gcra(1, 1, "1s", { charge: -1 }), RangeError);
});

for (const RESP of [2, 3]) {
  test(`node-redis module: checkAll, detail, delay, calendar, wait (RESP${RESP})`, async () => {
    const client = await createClient({ url: server.url, RESP, modules: { rl: rl.RateLimitModule } }).connect();
    const now = pinnedNow();
    const p = `nrd${RESP}:`;
    try {
      const limits = { [`{${p}}a`]: rl.gcra(10, 10, "1s", { name: "a" }), [`{${p}}b`]: rl.tokenBucket(100, 100, "1h", { charge: 5 }) };
      let r = await client.rl.checkAll(limits, { at: now, detail: true });
      assert.deepEqual(r.limiters.map((d) => [d.name, d.cost, d.remaining]), [["a", 1, 9], [`{${p}}b`, 5, 95]]);
      r = await client.rl.all(limits, { at: now, detail: true, delay: "1s" });
      assert.deepEqual(r.limiters.map((d) => d.remaining), [9, 95]);
      r = await client.rl.fixed(`${p}f`, 2, "day", { tz: "UTC", at: now, detail: true });
      assert.equal(r.resetAfterMs, 86400000 - (now % 86400000));
      r = await client.rl.acquire(`${p}q`, 1, "10s", "x", { detail: true, wait: "1s" });
      assert.ok(r.allowed && r.limiters[0].windowMs === 0);
    } finally {
      await client.quit();
    }
  });
}

test("ioredis built-in rl.checkall with its reply transformer", async () => {
  const client = new Redis(server.port, "127.0.0.1", { protocol: 2 });
  rl.installIoredis(client, Redis.Command);
  const now = pinnedNow();
  try {
    const r = await client["rl.checkall"](1, "io:x", "GCRA", 5, 5, "1s", "DETAIL", "AT", now);
    assert.ok(r instanceof rl.Result && r.reason === "granted");
    assert.equal(r.limiters[0].windowMs, 1000);
  } finally {
    client.disconnect();
  }
});

for (const [name, make] of Object.entries(clients)) {
  test(`acquire wait: granted when a lease is released, denied at the timeout: ${name}`, async () => {
    const holder = await make();
    const waiter = await make();
    const H = new rl.RateLimiter(holder);
    const W = new rl.RateLimiter(waiter);
    const key = `wait:${name.replace(/\W/g, "")}`;
    try {
      assert.ok((await H.acquire(key, 1, "10s", "a")).allowed);
      // Times out: nothing is released within 300 ms.
      let start = Date.now();
      let r = await W.acquire(key, 1, "10s", "b", { wait: "300ms" });
      assert.ok(!r.allowed && r.retryAfterMs > 0 && Date.now() - start >= 290);
      // Granted as soon as "a" is released.
      start = Date.now();
      const pending = W.acquire(key, 1, "10s", "b", { wait: "5s" });
      await new Promise((res) => setTimeout(res, 200));
      assert.equal(await H.release(key, "a"), 1);
      r = await pending;
      assert.ok(r.allowed && r.granted === 1 && Date.now() - start < 4000);
      assert.throws(() => W.acquire(key, 1, "10s", "c", { wait: "0" }), RangeError);
    } finally {
      await close(holder);
      await close(waiter);
    }
  });
}
