"use strict";
// redis-ratelimit-client/metrics against the real module: the events and the prom-client
// metrics equal what the calls imply (AT pins every call's time) and what the module counted
// itself (RL.METRICS, the numbers redis_exporter exports).

const test = require("node:test");
const assert = require("node:assert/strict");
const Redis = require("ioredis");
const promClient = require("prom-client");
const rl = require("..");
const { RateLimitMetrics, promClientMetrics, nearLimit } = require("redis-ratelimit-client/metrics");
const { startServer, pinnedNow } = require("./server");

let server;
test.before(async () => { server = await startServer(); });
test.after(async () => { await server.stop(); });

async function serverMetrics(client) {
  const flat = await client.call("RL.METRICS");
  const out = {};
  for (let i = 0; i < flat.length; i += 2) out[String(flat[i])] = Number(flat[i + 1]);
  return out;
}
const cmd = (m, counter, command) => m[`ratelimit_command_${counter}_total{command="${command}"}`];

test("nearLimit is the module's rule", () => {
  assert.ok(nearLimit(1, 10, 20) && !nearLimit(2, 10, 20));
  assert.ok(nearLimit(0, 1, 20) && !nearLimit(0, 1, 0));
  assert.throws(() => new RateLimitMetrics({ nearLimitPercent: 101 }), RangeError);
});

test("prom-client counts match the calls and the server", async () => {
  const client = new Redis(server.port, "127.0.0.1");
  const registry = new promClient.Registry();
  const metrics = new RateLimitMetrics();
  promClientMetrics(metrics, promClient, { registers: [registry] });
  const events = [];
  metrics.on("request", (e) => events.push(e));
  const L = metrics.instrument(new rl.RateLimiter(client));
  const now = pinnedNow();
  try {
    await L.policySet("free", rl.gcra(5, 1, "1m"));
    const before = await serverMetrics(client);
    // A limit of 10, 12 calls at one instant: 10 acquired (remaining 9..0; 1 and 0 are below
    // 20% of 10: near), 2 limited. gcra() goes through apply(): counted once.
    for (let i = 0; i < 12; i++) await L.gcra("g", 10, 1, "1m", { at: now });
    // Policy free (limit 5): 7 calls, 5 acquired (remaining 0 near), 2 limited.
    for (let i = 0; i < 7; i++) await L.limit("f", "free", { at: now });
    const after = await serverMetrics(client);

    assert.equal(events.length, 19);
    const value = async (name, labels) => {
      const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
      const v = m.values.find((x) => Object.entries(labels).every(([k, l]) => x.labels[k] === l));
      return v ? v.value : 0;
    };
    const req = "ratelimit_requests_total";
    assert.equal(await value(req, { command: "rl.gcra", policy: "", result: "acquired" }), 10);
    assert.equal(await value(req, { command: "rl.gcra", policy: "", result: "limited" }), 2);
    assert.equal(await value("ratelimit_near_limit_requests_total", { command: "rl.gcra", policy: "" }), 2);
    assert.equal(await value(req, { command: "rl.limit", policy: "free", result: "acquired" }), 5);
    assert.equal(await value(req, { command: "rl.limit", policy: "free", result: "limited" }), 2);
    assert.equal(await value("ratelimit_near_limit_requests_total", { command: "rl.limit", policy: "free" }), 1);
    // The module counted the same calls the same way.
    for (const [command, policy] of [["rl.gcra", ""], ["rl.limit", "free"]]) {
      const d = (counter) => cmd(after, counter, command) - cmd(before, counter, command);
      assert.equal(d("granted"), await value(req, { command, policy, result: "acquired" }));
      assert.equal(d("denied"), await value(req, { command, policy, result: "limited" }));
      assert.equal(d("near_limit"), await value("ratelimit_near_limit_requests_total", { command, policy }));
    }
    const text = await registry.metrics();
    assert.match(text, /ratelimit_requests_total\{command="rl.gcra",policy="",result="acquired"\} 10/);
  } finally {
    await client.quit();
  }
});

test("waits: queued, time in queue, and a listener that throws never fails the call", async () => {
  const client = new Redis(server.port, "127.0.0.1");
  const waiterClient = new Redis(server.port, "127.0.0.1");
  const registry = new promClient.Registry();
  const errors = [];
  const metrics = new RateLimitMetrics({ onError: (e) => errors.push(String(e)) });
  promClientMetrics(metrics, promClient, { registers: [registry] });
  metrics.on("request", () => { throw new Error("listener down"); });
  const queued = [];
  metrics.on("queued", (e) => queued.push(e.waiting));
  const L = metrics.instrument(new rl.RateLimiter(client));
  const W = metrics.instrument(new rl.RateLimiter(waiterClient));
  try {
    assert.ok((await L.acquire("c", 1, "1m", "holder")).allowed);
    const late = await L.acquire("c", 1, "1m", "late", { wait: "100ms" });
    assert.equal(late.allowed, false);
    const next = W.acquire("c", 1, "1m", "next", { wait: "10s" });
    const deadline = Date.now() + 10000;
    while ((await serverMetrics(client)).ratelimit_wait_waiting < 1) {
      assert.ok(Date.now() < deadline);
      await new Promise((r) => setTimeout(r, 10));
    }
    await new Promise((r) => setTimeout(r, 100));
    await L.release("c", "holder");
    assert.ok((await next).allowed);
    assert.deepEqual(queued, [1, 0, 1, 0]);
    assert.equal(metrics.waiting, 0);
    assert.deepEqual(errors, ["Error: listener down", "Error: listener down", "Error: listener down"]);
    const hist = (await registry.getMetricsAsJSON()).find((x) => x.name === "ratelimit_request_time_in_queue_seconds");
    const get = (suffix, result) => hist.values.find((v) => v.metricName === `ratelimit_request_time_in_queue_seconds_${suffix}` && v.labels.result === result).value;
    assert.equal(get("count", "limited"), 1);
    assert.equal(get("count", "acquired"), 1);
    assert.ok(get("sum", "limited") >= 0.1 && get("sum", "acquired") >= 0.1);
    const req = (await registry.getMetricsAsJSON()).find((x) => x.name === "ratelimit_requests_total");
    const n = (result) => req.values.find((v) => v.labels.command === "rl.acquire" && v.labels.result === result).value;
    assert.equal(n("acquired"), 2);
    assert.equal(n("limited"), 1);
  } finally {
    await client.quit();
    await waiterClient.quit();
  }
});
