"use strict";
// shadow: true (SHADOW) against the real module on ioredis and node-redis (RESP2 and RESP3): a
// call enforcement would deny is granted, with reason "shadow" and the would-be denier, and it
// leaves the state enforcement leaves. Expected values are worked out from the parameters and
// AT times, never read back.

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
  "node-redis resp2": async () => createClient({ url: server.url, RESP: 2 }).connect(),
  "node-redis resp3": async () => createClient({ url: server.url, RESP: 3 }).connect(),
};

async function close(client) {
  if (typeof client.disconnect === "function" && typeof client.quit !== "function") client.disconnect();
  else await client.quit();
}

for (const [name, make] of Object.entries(clients)) {
  test(`shadow on the limiter methods, all, check, checkAll, acquire: ${name}`, async () => {
    const client = await make();
    const L = new rl.RateLimiter(client);
    const p = `${name.replace(/\W/g, "")}:`;
    const now = pinnedNow();
    const [e, s] = [`${p}e`, `${p}s`];
    try {
      // GCRA burst 2, 1 per second: one unit is 1 s, fresh after 2 s. The same calls on e
      // (enforced) and s (shadow) leave the same state after each.
      for (const i of [1, 2]) {
        const expected = [1, 2, 2 - i, 0, 1000 * i];
        assert.deepEqual(five(await L.gcra(e, 2, 1, "1s", { at: now })), expected);
        const r = await L.gcra(s, 2, 1, "1s", { at: now, shadow: true });
        assert.deepEqual([...five(r), r.allowed, r.reason], [...expected, true, null]);
      }
      assert.deepEqual(five(await L.gcra(e, 2, 1, "1s", { at: now })), [0, 2, 0, 1000, 2000]);
      let r = await L.gcra(s, 2, 1, "1s", { at: now, shadow: true });
      assert.deepEqual([...five(r), r.allowed, r.retryAfterHeader], [1, 2, 0, 0, 2000, true, null]);
      r = await L.gcra(s, 2, 1, "1s", { at: now, shadow: true, detail: true });
      assert.deepEqual([...five(r), r.allowed, r.reason, r.deniedBy], [1, 2, 0, 0, 2000, true, "shadow", s]);
      // The limiter's entry is what enforcement would have replied.
      assert.deepEqual(r.limiters, [detail(s, s, 1, 0, 2, 0, 1000, 2000, 2000)]);
      // RateLimit headers as the reply says: granted, no Retry-After; t (one more unit is 1 s
      // away) from the check of one unit.
      assert.deepEqual(rl.rateLimitHeaders(r, rl.gcra(2, 1, "1s"), { next: await L.check(s, rl.gcra(2, 1, "1s", { name: s }), { at: now, detail: true }) }), {
        "RateLimit-Policy": `"${s}";q=2;w=2`, RateLimit: `"${s}";r=0;t=1`,
      });
      // Nothing was charged by the calls let through: PEEK and enforced calls see on s what
      // they see on e, one unit back at now + 1 s.
      for (const key of [e, s]) {
        assert.deepEqual(five(await L.gcra(key, 2, 1, "1s", { peek: true, at: now })), [0, 2, 0, 1000, 2000]);
        assert.deepEqual(five(await L.gcra(key, 2, 1, "1s", { at: now + 999 })), [0, 2, 0, 1, 1001]);
        assert.deepEqual(five(await L.gcra(key, 2, 1, "1s", { peek: true, at: now + 1000 })), [1, 2, 0, 0, 2000]);
      }
      // A cost above the limit is let through too; its entry says never.
      r = await L.gcra(s, 2, 1, "1s", { cost: 3, at: now, shadow: true, detail: true });
      assert.deepEqual([...five(r), r.allowed, r.never, r.reason], [3, 2, 0, 0, 2000, true, false, "shadow"]);
      assert.deepEqual(r.limiters, [detail(s, s, 3, 0, 2, 0, -1, 2000, 2000)]);

      // Fixed window 1 per minute (now is on a whole second).
      const reset = 60000 - (now % 60000);
      assert.deepEqual(five(await L.fixed(`${p}f`, 1, "1m", { at: now, shadow: true })), [1, 1, 0, 0, reset]);
      r = await L.fixed(`${p}f`, 1, "1m", { at: now, shadow: true, detail: true });
      assert.deepEqual([...five(r), r.reason], [1, 1, 0, 0, reset, "shadow"]);
      assert.deepEqual(r.limiters, [detail(`${p}f`, `${p}f`, 1, 0, 1, 0, reset, reset, 60000)]);
      assert.deepEqual(five(await L.fixed(`${p}f`, 1, "1m", { at: now })), [0, 1, 0, reset, reset]);
      // Sliding log 1 per 10 s: 4 s after the first call a second one would wait 6 s.
      await L.sliding(`${p}l`, 1, "10s", { at: now, shadow: true });
      r = await L.sliding(`${p}l`, 1, "10s", { at: now + 4000, shadow: true, detail: true });
      assert.deepEqual([...five(r), r.reason], [1, 1, 0, 0, 6000, "shadow"]);
      assert.deepEqual(five(await L.sliding(`${p}l`, 1, "10s", { at: now + 4000 })), [0, 1, 0, 6000, 6000]);
      // Token bucket 2, 1 per second, emptied by shadow calls that fit.
      await L.tokenBucket(`${p}t`, 2, 1, "1s", { cost: 2, at: now, shadow: true });
      r = await L.tokenBucket(`${p}t`, 2, 1, "1s", { at: now, shadow: true, detail: true });
      assert.deepEqual([...five(r), r.reason], [1, 2, 0, 0, 2000, "shadow"]);
      assert.deepEqual(five(await L.tokenBucket(`${p}t`, 2, 1, "1s", { at: now })), [0, 2, 0, 1000, 2000]);
      r = await L.apply(`${p}f`, rl.fixed(1, "1m"), { at: now, shadow: true, detail: true });
      assert.deepEqual([r.allowed, r.reason], [true, "shadow"]);

      // RL.ALL: rpm GCRA 60 per minute; tpm FIXED 100 per minute with 90 used, charged 20.
      const tag = `{${p}u}`;
      await L.fixed(`${tag}:tpm`, 100, "1m", { cost: 90, at: now });
      const limits = {
        [`${tag}:rpm`]: rl.gcra(60, 1, "1s", { name: "rpm" }),
        [`${tag}:tpm`]: rl.fixed(100, "1m", { name: "tpm", charge: 20 }),
      };
      r = await L.all(limits, { at: now, detail: true });
      assert.deepEqual([r.allowed, r.reason, r.deniedBy], [false, "limit", "tpm"]);
      // Shadowed: granted with no wait; limit and remaining tpm's (10 left / 20 a call = 0
      // more calls), the longest reset (tpm's); the entries what enforcement replied.
      r = await L.all(limits, { at: now, shadow: true, detail: true });
      assert.deepEqual([...five(r), r.allowed, r.reason, r.deniedBy], [1, 100, 10, 0, reset, true, "shadow", "tpm"]);
      assert.deepEqual(r.limiters, [
        detail("rpm", `${tag}:rpm`, 1, 0, 60, 60, 0, 0, 60000),
        detail("tpm", `${tag}:tpm`, 20, 0, 100, 10, reset, reset, 60000),
      ]);
      // All or nothing as enforced: rpm never charged, tpm still at 10 left.
      assert.equal(await L.info(`${tag}:rpm`), null);
      assert.equal((await L.fixed(`${tag}:tpm`, 100, "1m", { peek: true, cost: 10, at: now })).remaining, 0);
      // RL.CHECK / RL.CHECKALL: the shadow call's reply, charging nothing.
      r = await L.check(`${tag}:tpm`, rl.fixed(100, "1m"), { cost: 20, at: now, shadow: true, detail: true });
      assert.deepEqual([...five(r), r.reason, r.deniedBy], [20, 100, 10, 0, reset, "shadow", `${tag}:tpm`]);
      assert.equal((await L.check(`${tag}:tpm`, rl.fixed(100, "1m"), { cost: 20, at: now })).allowed, false);
      r = await L.checkAll(limits, { at: now, shadow: true, detail: true });
      assert.deepEqual([...five(r), r.reason, r.deniedBy], [1, 100, 10, 0, reset, "shadow", "tpm"]);
      assert.equal((await L.checkAll(limits, { at: now })).allowed, false);
      // RL.ACQUIRE: a lease that does not fit is let through and recorded nowhere.
      assert.deepEqual(five(await L.acquire(`${p}c`, 1, "10s", "a", { at: now })), [1, 1, 0, 0, 10000]);
      r = await L.acquire(`${p}c`, 1, "10s", "b", { at: now, shadow: true, detail: true });
      assert.deepEqual([...five(r), r.reason, r.deniedBy], [1, 1, 0, 0, 10000, "shadow", `${p}c`]);
      assert.deepEqual([await L.release(`${p}c`, "b", { at: now }), await L.release(`${p}c`, "a", { at: now })], [0, 1]);
    } finally {
      await close(client);
    }
  });
}

for (const RESP of [2, 3]) {
  test(`node-redis module: shadow (RESP${RESP})`, async () => {
    const client = await createClient({ url: server.url, RESP, modules: { rl: rl.RateLimitModule } }).connect();
    const now = pinnedNow();
    const p = `nrs${RESP}:`;
    try {
      assert.deepEqual(five(await client.rl.gcra(`${p}g`, 1, 1, "1s", { at: now })), [1, 1, 0, 0, 1000]);
      let r = await client.rl.gcra(`${p}g`, 1, 1, "1s", { at: now, shadow: true, detail: true });
      assert.deepEqual([...five(r), r.reason, r.deniedBy], [1, 1, 0, 0, 1000, "shadow", `${p}g`]);
      assert.deepEqual(five(await client.rl.gcra(`${p}g`, 1, 1, "1s", { at: now })), [0, 1, 0, 1000, 1000]);
      const limits = { [`{${p}}a`]: rl.gcra(1, 1, "1s") };
      assert.ok((await client.rl.all(limits, { at: now })).allowed);
      assert.ok((await client.rl.all(limits, { at: now, shadow: true })).allowed);
      assert.equal((await client.rl.all(limits, { at: now })).allowed, false);
      r = await client.rl.check(`${p}g`, rl.gcra(1, 1, "1s"), { at: now, shadow: true, detail: true });
      assert.deepEqual([r.allowed, r.reason], [true, "shadow"]);
      r = await client.rl.checkAll(limits, { at: now, shadow: true, detail: true });
      assert.deepEqual([r.allowed, r.reason], [true, "shadow"]);
      assert.ok((await client.rl.acquire(`${p}c`, 1, "1m", "a", { at: now })).allowed);
      r = await client.rl.acquire(`${p}c`, 1, "1m", "b", { at: now, shadow: true, detail: true });
      assert.deepEqual([r.allowed, r.reason], [true, "shadow"]);
      assert.ok((await client.rl.fixed(`${p}f`, 1, "1m", { at: now })).allowed);
      assert.ok((await client.rl.fixed(`${p}f`, 1, "1m", { at: now, shadow: true })).allowed);
    } finally {
      await client.quit();
    }
  });
}

test("optionArgs writes SHADOW only when asked", () => {
  const { optionArgs } = require("../lib/core");
  assert.deepEqual(optionArgs({ shadow: true, detail: true }), ["SHADOW", "DETAIL"]);
  assert.deepEqual(optionArgs({ shadow: false }), []);
});
