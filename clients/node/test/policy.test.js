"use strict";
// Named policies against the real module on ioredis and node-redis (RESP2 and RESP3): policySet /
// policyGet / policyDel / policyList / policyDump / policyRestore, limit() and the policy option
// of all() and checkAll(). Expected values are worked out from each policy's limiters and the
// AT times, never read back.

const test = require("node:test");
const assert = require("node:assert/strict");
const Redis = require("ioredis");
const { createClient } = require("redis");
const rl = require("..");
const { startServer, pinnedNow } = require("./server");

const five = (r) => [r.granted, r.limit, r.remaining, r.retryAfterMs, r.resetAfterMs];
const detail = (name, key, cost, granted, limit, remaining, retryAfterMs, resetAfterMs, windowMs, policy) =>
  ({ name, key, cost, granted, limit, remaining, retryAfterMs, resetAfterMs, windowMs, policy });

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

// Policies are server state outside the keyspace: start each test from none.
async function clear(L) {
  for (const name of Object.keys(await L.policyList())) assert.equal(await L.policyDel(name), true);
  assert.deepEqual(await L.policyList(), {});
}

for (const [name, make] of Object.entries(clients)) {
  test(`policies: set, get, list, del, limit, all and checkAll under a policy: ${name}`, async () => {
    const client = await make();
    const L = new rl.RateLimiter(client);
    const p = `${name.replace(/\W/g, "")}:`;
    const now = pinnedNow();
    try {
      await clear(L);
      const v1 = await L.policySet("free", rl.gcra(5, 1, "1s"));
      const v2 = await L.policySet("pro", [rl.gcra(100, 50, "1s", { name: "rps" }), rl.fixed(10000, "day", { tz: "UTC" })],
        { shadow: true, desc: "paid tier" });
      assert.ok(Number.isInteger(v1) && v2 > v1);
      assert.deepEqual(await L.policyGet("free"), { name: "free", args: ["GCRA", "5", "1", "1s"], shadow: false, desc: null });
      assert.deepEqual(await L.policyGet("pro"), {
        name: "pro",
        args: ["GCRA", "100", "50", "1s", "NAME", "rps", "FIXED", "10000", "day", "TZ", "UTC", "SHADOW", "DESC", "paid tier"],
        shadow: true, desc: "paid tier",
      });
      assert.equal(await L.policyGet("nope"), null);
      assert.deepEqual(await L.policyList(), { free: v1, pro: v2 });
      // A limiter named SHADOW is not the flag, nor a DESC text SHADOW.
      await L.policySet("odd", rl.gcra(1, 1, "1s", { name: "SHADOW" }), { desc: "SHADOW" });
      const odd = await L.policyGet("odd");
      assert.deepEqual([odd.shadow, odd.desc], [false, "SHADOW"]);

      // RL.LIMIT as the limiter's own command: burst 5, 1 per second.
      for (let i = 0; i < 5; i++) {
        const want = [1, 5, 4 - i, 0, (i + 1) * 1000];
        assert.deepEqual(five(await L.limit(`${p}a`, "free", { at: now })), want);
        assert.deepEqual(five(await L.gcra(`${p}b`, 5, 1, "1s", { at: now })), want);
      }
      let r = await L.limit(`${p}a`, "free", { at: now, detail: true });
      assert.deepEqual([...five(r), r.allowed, r.reason, r.deniedBy], [0, 5, 0, 1000, 5000, false, "limit", `${p}a`]);
      assert.deepEqual(r.limiters, [detail(`${p}a`, `${p}a`, 1, 0, 5, 0, 1000, 5000, 5000, "free")]);
      r = await L.limit(`${p}a`, "free", { cost: 3, bestEffort: true, at: now + 2000 });
      assert.deepEqual(five(r), [2, 5, 0, 3000, 5000]);
      r = await L.limit(`${p}a`, "free", { at: now + 2000, shadow: true, detail: true });
      assert.deepEqual([...five(r), r.reason], [1, 5, 0, 0, 5000, "shadow"]);

      // A policy of two limiters through RL.ALL / RL.CHECKALL, one key per limiter.
      const reset = 60000 - (now % 60000);
      const limiters = [rl.gcra(5, 1, "1s"), rl.fixed(2, "1m", { name: "minute" })];
      await L.policySet("two", limiters);
      const keys = [`{${p}u}g`, `{${p}u}f`];
      assert.deepEqual(five(await L.checkAll(keys, { policy: "two", at: now })), [1, 2, 1, 0, reset]);
      r = await L.all(keys, { policy: "two", at: now, detail: true });
      assert.deepEqual([...five(r), r.reason], [1, 2, 1, 0, reset, "granted"]);
      assert.deepEqual(r.limiters, [
        detail(keys[0], keys[0], 1, 1, 5, 4, 0, 1000, 5000, "two"),
        detail("minute", keys[1], 1, 1, 2, 1, 0, reset, 60000, "two"),
      ]);
      // reset_after_ms is the largest of the two: the GCRA key's 2000 ms in a minute's last second.
      assert.deepEqual(five(await L.all(keys, { policy: "two", at: now })), [1, 2, 0, 0, Math.max(reset, 2000)]);
      r = await L.all(keys, { policy: "two", at: now, detail: true });
      assert.deepEqual([r.allowed, r.reason, r.deniedBy], [false, "limit", "minute"]);
      assert.equal((await L.gcra(keys[0], 5, 1, "1s", { cost: 0, peek: true, at: now })).remaining, 3);
      // The same policy in SHADOW: let through, charged as enforced (nothing here).
      await L.policySet("two", limiters, { shadow: true });
      r = await L.all(keys, { policy: "two", at: now, detail: true });
      assert.deepEqual([...five(r), r.reason, r.deniedBy], [1, 2, 0, 0, Math.max(reset, 2000), "shadow", "minute"]);
      assert.equal((await L.checkAll(keys, { policy: "two", at: now })).allowed, true);
      assert.equal((await L.gcra(keys[0], 5, 1, "1s", { cost: 0, peek: true, at: now })).remaining, 3);
      assert.throws(() => L.all({ [keys[0]]: rl.gcra(5, 1, "1s") }, { policy: "two" }), TypeError);
      assert.throws(() => L.all(keys), TypeError);
      await assert.rejects(L.limit("k", "two", { at: now }), /policy 'two' has 2 limiter/);

      // DEL: later calls fail naming the policy.
      assert.deepEqual([await L.policyDel("free"), await L.policyDel("free")], [true, false]);
      await assert.rejects(L.limit(`${p}a`, "free"), /unknown policy 'free'/);
      await assert.rejects(L.policySet("Bad-Name", rl.gcra(1, 1, "1s")), /policy name/);
      await assert.rejects(L.policySet("empty", []), RangeError);
      await clear(L);
    } finally {
      await close(client);
    }
  });
}

test("policyDump and policyRestore copy the policies to another server (ioredis to node-redis)", async () => {
  const other = await startServer();
  const a = new Redis(server.port, "127.0.0.1");
  const b = await createClient({ url: other.url, RESP: 3 }).connect();
  const A = new rl.RateLimiter(a);
  const B = new rl.RateLimiter(b);
  try {
    await clear(A);
    const v1 = await A.policySet("free", rl.gcra(10, 5, "1s"), { desc: "free tier" });
    const v2 = await A.policySet("pro", [rl.gcra(100, 50, "1s"), rl.fixed(1000, "day")]);
    const payload = await A.policyDump();
    assert.ok(Buffer.isBuffer(payload) && payload.length > 0);
    assert.equal(await B.policySet("mine", rl.gcra(1, 1, "1s")), 1);
    // MERGE adds the payload's policies, each with the next version of this server.
    await B.policyRestore(payload, { merge: true });
    assert.deepEqual(await B.policyList(), { mine: 1, free: 2, pro: 3 });
    assert.deepEqual(await B.policyGet("free"), await A.policyGet("free"));
    // A full restore replaces every policy, versions included; node-redis dumps bytes that
    // restore the same policies.
    await B.policyRestore(payload);
    assert.deepEqual(await B.policyList(), { free: v1, pro: v2 });
    const again = await B.policyDump();
    assert.ok(Buffer.isBuffer(again));
    await A.policyRestore(again);
    assert.deepEqual(await A.policyList(), { free: v1, pro: v2 });
    await assert.rejects(B.policyRestore(payload.subarray(0, payload.length - 1)));
    assert.deepEqual(await B.policyList(), { free: v1, pro: v2 });
    await clear(A);
  } finally {
    a.disconnect();
    await b.quit();
    await other.stop();
  }
});

for (const RESP of [2, 3]) {
  test(`node-redis module: limit and the policy commands (RESP${RESP})`, async () => {
    const client = await createClient({ url: server.url, RESP, modules: { rl: rl.RateLimitModule } }).connect();
    const now = pinnedNow();
    const p = `nrp${RESP}:`;
    try {
      for (const name of Object.keys(await client.rl.policyList())) await client.rl.policyDel(name);
      const v = await client.rl.policySet("one", rl.gcra(2, 1, "1s"), { shadow: true });
      assert.deepEqual(await client.rl.policyList(), { one: v });
      assert.deepEqual(await client.rl.policyGet("one"), { name: "one", args: ["GCRA", "2", "1", "1s", "SHADOW"], shadow: true, desc: null });
      assert.deepEqual(five(await client.rl.limit(`${p}k`, "one", { at: now })), [1, 2, 1, 0, 1000]);
      assert.deepEqual(five(await client.rl.limit(`${p}k`, "one", { at: now })), [1, 2, 0, 0, 2000]);
      const r = await client.rl.limit(`${p}k`, "one", { at: now, detail: true });
      assert.deepEqual([...five(r), r.reason, r.limiters[0].policy], [1, 2, 0, 0, 2000, "shadow", "one"]);
      assert.deepEqual(five(await client.rl.all([`{${p}}x`], { policy: "one", at: now })), [1, 2, 1, 0, 1000]);
      assert.equal((await client.rl.checkAll([`{${p}}x`], { policy: "one", at: now })).remaining, 0);
      assert.equal(await client.rl.policyDel("one"), true);
      assert.deepEqual(await client.rl.policyList(), {});
    } finally {
      await client.quit();
    }
  });
}

test("ioredis built-in rl.limit with its reply transformer", async () => {
  const client = new Redis(server.port, "127.0.0.1", { protocol: 2 });
  rl.installIoredis(client, Redis.Command);
  const now = pinnedNow();
  try {
    await client.call("RL.POLICY", "SET", "io_one", "GCRA", "5", "5", "1s");
    const r = await client["rl.limit"]("io:k", "io_one", "AT", now);
    assert.ok(r instanceof rl.Result);
    assert.deepEqual(five(r), [1, 5, 4, 0, 200]);
    await client.call("RL.POLICY", "DEL", "io_one");
  } finally {
    client.disconnect();
  }
});
