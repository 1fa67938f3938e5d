"use strict";
// counter-sliding-window's API (add/get over a window) on RL.STREAMCOUNT, against the real
// module: the package's own example, streams in the layout its Lua script writes, and the
// throttle (LIMIT) it implements.

const test = require("node:test");
const assert = require("node:assert/strict");
const Redis = require("ioredis");
const { createClient } = require("redis");
const { SlidingWindowCounterLocal, SlidingWindowCounterDistributed, SlidingWindowCounterRedis } = require("..");
const { startServer, pinnedNow } = require("./server");

let server;
test.before(async () => { server = await startServer(); });
test.after(async () => { await server.stop(); });

// The package's example: a 5 s window; 1 at t=0, 2 at t=3; get() at t=4, 7 and 9 is 3, 2, 0.
async function example(make) {
  let now = 0;
  const counter = make(() => now);
  await counter.add(1);
  now = 3000;
  await counter.add(2);
  const seen = [];
  for (const t of [4000, 7000, 9000]) {
    now = t;
    seen.push(await counter.get());
  }
  return seen;
}

test("the package's example, in memory and on Redis alike", async () => {
  assert.deepEqual(await example((clock) => new SlidingWindowCounterLocal(5, "seconds", { now: clock })), [3, 2, 0]);
  const client = new Redis(server.port, "127.0.0.1");
  const base = pinnedNow();
  try {
    assert.deepEqual(await example((clock) => new SlidingWindowCounterDistributed(client, "example", 5, "seconds", { now: () => base + clock() })), [3, 2, 0]);
    // The stream holds what the package's script writes: one entry per add, field count = n.
    const entries = await client.xrange("example", "-", "+");
    assert.deepEqual(entries.map(([id, f]) => [id, f]), [[`${base}-0`, ["count", "1"]], [`${base + 3000}-0`, ["count", "2"]]]);
  } finally {
    client.disconnect();
  }
});

test("streams written by the package's Lua script (XADD ... count n) are counted unchanged", async () => {
  const client = await createClient({ url: server.url }).connect();
  const base = pinnedNow();
  try {
    // As `XADD key MINID ~ start * count n` writes them: ms IDs, one count field.
    await client.sendCommand(["XADD", "legacy", `${base}-0`, "count", "4"]);
    await client.sendCommand(["XADD", "legacy", `${base + 1000}-0`, "count", "1"]);
    await client.sendCommand(["XADD", "legacy", `${base + 1000}-1`, "count", "2"]);
    const at = (ms) => ({ now: () => base + ms });
    assert.equal(await new SlidingWindowCounterRedis(client, "legacy", 10, "seconds", at(2000)).get(), 7);
    // 10.5 s later the first entry (4) has left the 10 s window.
    assert.equal(await new SlidingWindowCounterDistributed(client, "legacy", 10000, "ms", at(10500)).get(), 3);
    assert.equal(await new SlidingWindowCounterDistributed(client, "legacy", 1, "minute", at(10500)).add(5), 12);
    // The throttle: count only within the limit.
    const limited = new SlidingWindowCounterDistributed(client, "legacy", 1, "minute", at(11000));
    assert.equal(await limited.tryAdd(3, 15), true);
    assert.equal(await limited.tryAdd(1, 15), false);
    assert.equal(await limited.get(), 15);
  } finally {
    await client.quit();
  }
});

test("units and arguments", () => {
  assert.equal(new SlidingWindowCounterLocal(2, "minutes").windowMs, 120000);
  assert.throws(() => new SlidingWindowCounterLocal(5, "fortnights"), /unknown unit/);
  assert.throws(() => new SlidingWindowCounterLocal(0.5, "ms"), /whole number/);
  assert.throws(() => new SlidingWindowCounterLocal(5, "s").add(-1), /integer >= 0/);
});
