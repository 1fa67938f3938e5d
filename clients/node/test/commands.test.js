"use strict";
// Every command through RateLimiter against the real module, on ioredis (RESP2, RESP3 with its
// legacy flat maps, RESP3 with replyMapping "resp3") and node-redis v5 (RESP2, RESP3, and its
// module interface). Times are pinned with AT; expected values are worked out from the
// parameters, never read back from the module.

const test = require("node:test");
const assert = require("node:assert/strict");
const Redis = require("ioredis");
const { createClient } = require("redis");
const rl = require("..");
const { startServer, pinnedNow } = require("./server");

const five = (r) => [r.granted, r.limit, r.remaining, r.retryAfterMs, r.resetAfterMs];

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
  test(`every command: ${name}`, async () => {
    const client = await make();
    const L = new rl.RateLimiter(client);
    const p = `${name.replace(/\W/g, "")}:`;
    const now = pinnedNow();
    try {
      // GCRA burst 10, 5/s: T = 200 ms.
      let r = await L.gcra(`${p}g`, 10, 5, "1s", { at: now });
      assert.deepEqual(five(r), [1, 10, 9, 0, 200]);
      assert.ok(r.allowed && !r.never && r.retryAfter === 0 && r.resetAfter === 0.2);
      assert.deepEqual(five(await L.gcra(`${p}g`, 10, 5, "1s", { cost: 9, at: now })), [9, 10, 0, 0, 2000]);
      r = await L.gcra(`${p}g`, 10, 5, "1s", { at: now });
      assert.deepEqual(five(r), [0, 10, 0, 200, 2000]);
      assert.ok(!r.allowed && r.retryAfterHeader === 1);
      r = await L.gcra(`${p}g`, 10, 5, "1s", { cost: 11, at: now });
      assert.ok(r.never && !r.allowed && r.retryAfter === null && r.retryAfterHeader === null);
      r = await L.gcra(`${p}g`, 10, 5, "1s", { cost: 3, bestEffort: true, at: now + 400 });
      assert.ok(r.granted === 2 && !r.allowed);
      // Token bucket: 100, 10/s.
      assert.deepEqual(five(await L.tokenBucket(`${p}t`, 100, 10, "1s", { cost: 30, at: now })), [30, 100, 70, 0, 3000]);
      assert.deepEqual(five(await L.tokenBucket(`${p}t`, 100, 10, "1s", { cost: 80, at: now })), [0, 100, 70, 1000, 3000]);
      // Leaky bucket: a granted call with a queue delay is allowed.
      await L.leakyBucket(`${p}l`, 10, 2, "1s", { at: now });
      r = await L.leakyBucket(`${p}l`, 10, 2, "1s", { at: now });
      assert.deepEqual(five(r), [1, 10, 8, 500, 1000]);
      assert.ok(r.allowed && r.retryAfterHeader === null);
      // Fixed: minute windows, 10 s into the next one.
      const t = (Math.floor(now / 60000) + 1) * 60000 + 10000;
      assert.deepEqual(five(await L.fixed(`${p}f`, 5, "1m", { cost: 4, at: t })), [4, 5, 1, 0, 50000]);
      assert.deepEqual(five(await L.fixed(`${p}f`, 5, "1m", { cost: 2, at: t })), [0, 5, 1, 50000, 50000]);
      assert.deepEqual(five(await L.fixed(`${p}fo`, 5, "1m", { offset: "10s", at: t })), [1, 5, 4, 0, 60000]);
      // Sliding log.
      assert.deepEqual(five(await L.sliding(`${p}s`, 5, "1m", { at: now })), [1, 5, 4, 0, 60000]);
      assert.deepEqual(five(await L.sliding(`${p}s`, 5, "1m", { cost: 4, at: now + 1000 })), [4, 5, 0, 0, 60000]);
      assert.deepEqual(five(await L.sliding(`${p}s`, 5, "1m", { at: now + 2000 })), [0, 5, 0, 58000, 59000]);
      assert.equal((await L.sliding(`${p}sp`, 5, "1m", { precision: "10s", at: now })).granted, 1);
      // Sliding counter: 88 at a window's start, then a quarter into the next.
      const w = 100000;
      const k = Math.floor(now / w) + 1;
      assert.deepEqual(five(await L.slidingCounter(`${p}c`, 100, "100s", { cost: 88, at: k * w })), [88, 100, 12, 0, 2 * w]);
      const tq = (k + 1) * w + w / 4;
      assert.equal((await L.slidingCounter(`${p}c`, 100, "100s", { cost: 12, at: tq })).remaining, 22);
      r = await L.slidingCounter(`${p}c`, 100, "100s", { cost: 30, at: tq });
      assert.deepEqual([r.granted, r.remaining, r.retryAfterMs], [0, 22, 9091]);
      // RL.ALL and RL.CHECK.
      const tag = `{${p}u}`;
      const limits = { [`${tag}:s`]: rl.gcra(10, 10, "1s"), [`${tag}:h`]: rl.gcra(1000, 1000, "1h") };
      assert.deepEqual(five(await L.all(limits, { at: now })), [1, 10, 9, 0, 3600]);
      assert.ok((await L.all(limits, { cost: 11, at: now })).never);
      assert.deepEqual(five(await L.all([[`${tag}:h`, rl.gcra(1000, 1000, "1h")], [`${tag}:s`, rl.gcra(10, 10, "1s")]], { at: now })), [1, 10, 8, 0, 7200]);
      assert.deepEqual(five(await L.check(`${tag}:s`, rl.gcra(10, 10, "1s"), { at: now })), [1, 10, 7, 0, 300]);
      assert.deepEqual(five(await L.check(`${tag}:s`, rl.gcra(10, 10, "1s"), { at: now })), [1, 10, 7, 0, 300]);
      assert.ok((await L.check(`${p}fresh`, rl.slidingCounter(3, "1m"), { cost: 4, at: now })).never);
      // Refund.
      assert.deepEqual(five(await L.tokenBucket(`${p}llm`, 1000, 1000, "1m", { cost: 100, dedup: "req-1", at: now })), [100, 1000, 900, 0, 6000]);
      assert.deepEqual(five(await L.refund(`${p}llm`, 70, { dedup: "req-1", at: now })), [70, 1000, 970, 0, 1800]);
      assert.equal((await L.refund(`${p}llm`, 70, { dedup: "req-1", at: now })).granted, 0);
      assert.equal(await L.refund(`${p}missing`, 1), null);
      // Block / unblock.
      assert.equal(await L.block(`${p}b`, "1h", { at: now }), 3600000);
      r = await L.gcra(`${p}b`, 10, 5, "1s", { at: now });
      assert.deepEqual(five(r), [0, 10, 0, 3600000, 3600000]);
      assert.equal(r.retryAfterHeader, 3600);
      assert.equal(await L.unblock(`${p}b`), true);
      assert.equal(await L.unblock(`${p}b`), false);
      // Acquire / release / withLease.
      assert.deepEqual(five(await L.acquire(`${p}q`, 2, "10s", "a", { at: now })), [1, 2, 1, 0, 10000]);
      assert.deepEqual(five(await L.acquire(`${p}q`, 2, "10s", "b", { at: now + 1000 })), [1, 2, 0, 0, 10000]);
      assert.deepEqual(five(await L.acquire(`${p}q`, 2, "10s", "x", { at: now + 1000 })), [0, 2, 0, 9000, 10000]);
      assert.equal(await L.release(`${p}q`, "a"), 1);
      assert.equal(await L.release(`${p}q`, "a"), 0);
      const out = await L.withLease(`${p}w`, 2, "10s", async (lease) => {
        assert.equal(lease.result.remaining, 0);
        await assert.rejects(L.withLease(`${p}w`, 2, "10s", async () => {}), (e) => e instanceof rl.RateLimitExceeded && !e.result.never);
        assert.ok((await lease.renew()).allowed);
        assert.equal((await L.info(`${p}w`)).fields.held, 2);
        return "done";
      }, { cost: 2 });
      assert.equal(out, "done");
      assert.ok((await L.acquire(`${p}w`, 2, "10s", "y", { cost: 2 })).allowed);
      assert.throws(() => L.apply(`${p}z`, rl.concurrency(2, "10s")), TypeError);
      // Stream counter, CL.THROTTLE, RL.INFO.
      assert.deepEqual(await L.streamCount(`${p}x`, "1m", { add: 3, limit: 100, at: now }), { allowed: true, total: 3 });
      assert.deepEqual(await L.streamCount(`${p}x`, "1m", { add: 2, limit: 4, at: now }), { allowed: false, total: null });
      assert.deepEqual(await L.throttle(`${p}cl`, 15, 30, 60), { limited: false, allowed: true, limit: 16, remaining: 15, retryAfterS: -1, resetAfterS: 2 });
      assert.equal(await L.info(`${p}nothing`), null);
      await L.gcra(`${p}i`, 10, 5, "1h", { cost: 4, at: now });
      const info = await L.info(`${p}i`);
      assert.equal(info.algorithm, "gcra");
      assert.deepEqual([info.fields.burst, info.fields.rate, info.fields.period_ms, info.fields.remaining], [10, 5, 3600000, 6]);
      // Errors pass through; bad arguments are refused before sending.
      await assert.rejects(L.gcra(`${p}g`, 10, 5, "1s", { cost: 1, dedup: "x".repeat(300) }), /ERR/);
      assert.throws(() => rl.gcra(0, 5, "1s"), RangeError);
      assert.throws(() => rl.gcra(1, 5, "1 s"), RangeError);
    } finally {
      await close(client);
    }
  });
}

test("ioredis built-in commands with reply transformers", async () => {
  const client = new Redis(server.port, "127.0.0.1", { protocol: 3 });
  rl.installIoredis(client, Redis.Command);
  const now = pinnedNow();
  try {
    const r = await client["rl.gcra"]("io:g", 10, 5, "1s", "AT", now);
    assert.ok(r instanceof rl.Result);
    assert.deepEqual(five(r), [1, 10, 9, 0, 200]);
    assert.equal((await client["rl.info"]("io:g")).algorithm, "gcra");
    assert.equal(await client["rl.info"]("io:none"), null);
  } finally {
    client.disconnect();
  }
});

for (const RESP of [2, 3]) {
  test(`node-redis module (RESP${RESP})`, async () => {
    const client = await createClient({ url: server.url, RESP, modules: { rl: rl.RateLimitModule } }).connect();
    const now = pinnedNow();
    const p = `nrm${RESP}:`;
    try {
      assert.deepEqual(five(await client.rl.gcra(`${p}g`, 10, 5, "1s", { at: now })), [1, 10, 9, 0, 200]);
      assert.ok((await client.rl.gcra(`${p}g`, 10, 5, "1s", { cost: 11, at: now })).never);
      await client.rl.leakyBucket(`${p}l`, 10, 2, "1s", { at: now });
      assert.ok((await client.rl.leakyBucket(`${p}l`, 10, 2, "1s", { at: now })).allowed);
      assert.equal((await client.rl.fixed(`${p}f`, 5, "1m", { offset: "10s" })).limit, 5);
      assert.equal((await client.rl.tokenBucket(`${p}t`, 100, 10, "1s", { cost: 30 })).remaining, 70);
      assert.equal((await client.rl.sliding(`${p}s`, 5, "1m", { precision: "1s" })).remaining, 4);
      assert.equal((await client.rl.slidingCounter(`${p}c`, 5, "1m")).remaining, 4);
      const limits = { [`{${p}}a`]: rl.gcra(10, 10, "1s"), [`{${p}}b`]: rl.gcra(1000, 1000, "1h") };
      assert.deepEqual(five(await client.rl.all(limits, { at: now })), [1, 10, 9, 0, 3600]);
      assert.equal((await client.rl.check(`{${p}}a`, rl.gcra(10, 10, "1s"), { at: now })).remaining, 8);
      assert.equal((await client.rl.refund(`${p}t`, 10)).granted, 10);
      assert.equal(await client.rl.block(`${p}b`, "1s"), 1000);
      assert.equal(await client.rl.unblock(`${p}b`), true);
      assert.ok((await client.rl.acquire(`${p}q`, 1, "10s", "id")).allowed);
      assert.equal(await client.rl.release(`${p}q`, "id"), 1);
      assert.equal((await client.rl.streamCount(`${p}x`, "1m", { add: 2 })).total, 2);
      assert.equal((await client.rl.throttle(`${p}cl`, 15, 30, 60)).limit, 16);
      assert.equal((await client.rl.info(`${p}g`)).algorithm, "gcra");
    } finally {
      await client.quit();
    }
  });
}
