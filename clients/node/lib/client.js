"use strict";
// RateLimiter: the module's commands over ioredis or node-redis, with typed results.

const crypto = require("node:crypto");
const c = require("./core");

class RateLimitExceeded extends Error {
  constructor(result) {
    super(`rate limit exceeded (${result.never ? "never: the cost is above the limit" : `retry after ${result.retryAfterMs} ms`})`);
    this.name = "RateLimitExceeded";
    this.result = result;
  }
}

// How to send one command on a client: ioredis has call(), node-redis sendCommand().
function transport(client) {
  if (client && typeof client.call === "function") return (args) => client.call(...args);
  if (client && typeof client.sendCommand === "function") {
    return (args) => client.sendCommand(args.map((a) => (Buffer.isBuffer(a) ? a : String(a))));
  }
  throw new TypeError("expected an ioredis client (call) or a node-redis client (sendCommand)");
}

// The same, with bulk replies as Buffers (RL.POLICY DUMP's binary payload).
function bufferTransport(client) {
  if (typeof client.callBuffer === "function") return (args) => client.callBuffer(...args);
  // node-redis: blob strings (RESP type 36) as Buffers.
  return (args) => client.sendCommand(args.map((a) => (Buffer.isBuffer(a) ? a : String(a))),
    { typeMapping: { 36: Buffer } });
}

class RateLimiter {
  /** @param client an ioredis Redis/Cluster or a node-redis client (RESP2 or RESP3). */
  constructor(client) {
    this.client = client;
    this.send = transport(client);
    this.sendBuffer = bufferTransport(client);
  }

  async result(args, cost) {
    return c.parseResult(await this.send(args), cost);
  }

  apply(key, spec, opts = {}) {
    if (spec.word === "CONCURRENCY") throw new TypeError("a concurrency limiter takes a lease id: use acquire() or withLease()");
    return this.result([spec.command, key, ...spec.params, ...c.optionArgs(opts)], opts.cost ?? 1);
  }
  gcra(key, burst, rate, period, opts) { return this.apply(key, c.limiters.gcra(burst, rate, period), opts); }
  tokenBucket(key, capacity, refill, period, opts) { return this.apply(key, c.limiters.tokenBucket(capacity, refill, period), opts); }
  leakyBucket(key, capacity, rate, period, opts) { return this.apply(key, c.limiters.leakyBucket(capacity, rate, period), opts); }
  fixed(key, limit, window, opts = {}) { return this.apply(key, c.limiters.fixed(limit, window, opts), opts); }
  sliding(key, limit, window, opts = {}) { return this.apply(key, c.limiters.sliding(limit, window, opts), opts); }
  slidingCounter(key, limit, window, opts) { return this.apply(key, c.limiters.slidingCounter(limit, window), opts); }

  /** RL.ALL: every limiter grants or none is charged. `limiters`: {key: spec} or [[key, spec], ...];
   * with opts.policy, the keys, one per limiter of the named policy (POLICY name). */
  all(limiters, opts = {}) {
    return this.result(["RL.ALL", ...c.allOrPolicyArgs(limiters, opts.policy), ...c.optionArgs(opts)], opts.cost ?? 1);
  }

  /** RL.CHECK: the PEEK reply from a read-only command. */
  check(key, spec, opts = {}) {
    const o = { cost: opts.cost, bestEffort: opts.bestEffort, shadow: opts.shadow, detail: opts.detail, at: opts.at };
    return this.result(["RL.CHECK", key, ...c.specArgs(spec), ...c.optionArgs(o)], opts.cost ?? 1);
  }

  /** RL.CHECKALL: the PEEK reply of all() from a read-only command (runs on replicas). */
  checkAll(limiters, opts = {}) {
    const o = { cost: opts.cost, shadow: opts.shadow, detail: opts.detail, at: opts.at };
    return this.result(["RL.CHECKALL", ...c.allOrPolicyArgs(limiters, opts.policy), ...c.optionArgs(o)], opts.cost ?? 1);
  }

  /** RL.LIMIT key policy: the named one-limiter policy on key, with the options and reply of its
   * limiter's own command. */
  limit(key, policy, opts = {}) {
    return this.result(["RL.LIMIT", key, String(policy), ...c.optionArgs(opts)], opts.cost ?? 1);
  }

  /** RL.POLICY SET: define or replace a policy; resolves to its version. */
  async policySet(name, limiters, opts = {}) {
    return Number(await this.send(c.policySetArgs(name, limiters, opts)));
  }
  /** RL.POLICY GET: { name, args, shadow, desc }, null for an unknown name. */
  async policyGet(name) { return c.parsePolicy(name, await this.send(["RL.POLICY", "GET", name])); }
  /** RL.POLICY DEL: true if the policy existed. */
  async policyDel(name) { return Number(await this.send(["RL.POLICY", "DEL", name])) === 1; }
  /** RL.POLICY LIST: { name: version }. */
  async policyList() { return c.parsePolicyList(await this.send(["RL.POLICY", "LIST"])); }
  /** RL.POLICY DUMP: every policy as one binary payload (a Buffer). */
  async policyDump() {
    const reply = await this.sendBuffer(["RL.POLICY", "DUMP"]);
    return Buffer.isBuffer(reply) ? reply : Buffer.from(String(reply));
  }
  /** RL.POLICY RESTORE payload [MERGE]: replace every policy with the payload's, or with
   * merge add or replace only the payload's, each policy added or changed taking this server's
   * next version. */
  async policyRestore(payload, opts = {}) {
    await this.send(["RL.POLICY", "RESTORE", payload, ...(opts.merge ? ["MERGE"] : [])]);
  }

  async refund(key, units, opts = {}) {
    const args = ["RL.REFUND", key, String(c.count(units, "units"))];
    if (opts.dedup != null) args.push("DEDUP", opts.dedup);
    return c.parseOptionalResult(await this.send([...args, ...c.atArgs(opts)]), 0);
  }

  /** RL.SETTLE: settle the reservation `id` (made with hold and dedup) with the units really
   * used, one per key; one Result per key (null for a missing key): granted is what the id is
   * charged there after the settle. */
  async settle(keys, id, units, opts = {}) {
    return c.parseSettle(await this.send(["RL.SETTLE", ...c.settleArgs(keys, id, units), ...c.atArgs(opts)]));
  }

  /** RL.BLOCK: returns the block's remaining ms. */
  async block(key, duration, opts = {}) {
    return Number(await this.send(["RL.BLOCK", key, c.durationArg(duration), ...c.atArgs(opts)]));
  }
  async unblock(key) { return Number(await this.send(["RL.UNBLOCK", key])) === 1; }

  acquire(key, limit, lease, id, opts = {}) {
    const s = c.limiters.concurrency(limit, lease);
    const o = { cost: opts.cost, peek: opts.peek, shadow: opts.shadow, block: opts.block, detail: opts.detail, at: opts.at };
    const wait = opts.wait == null ? [] : ["WAIT", c.durationArg(opts.wait)];
    return this.result(["RL.ACQUIRE", key, ...s.params, "ID", id, ...c.optionArgs(o), ...wait], opts.cost ?? 1);
  }
  async release(key, id, opts = {}) { return Number(await this.send(["RL.RELEASE", key, id, ...c.atArgs(opts)])); }

  /** Run fn(lease) holding units of a concurrency limiter; released after. Throws RateLimitExceeded. */
  async withLease(key, limit, lease, fn, opts = {}) {
    const id = opts.id ?? crypto.randomUUID();
    const result = await this.acquire(key, limit, lease, id, { cost: opts.cost });
    if (!result.allowed) throw new RateLimitExceeded(result);
    try {
      return await fn({ id, result, renew: () => this.acquire(key, limit, lease, id, { cost: opts.cost }) });
    } finally {
      await this.release(key, id);
    }
  }

  async streamCount(key, window, opts = {}) {
    const args = ["RL.STREAMCOUNT", key, c.durationArg(window)];
    if (opts.add != null && opts.add !== 1) args.push("ADD", String(c.count(opts.add, "add", 0)));
    if (opts.limit != null) args.push("LIMIT", String(c.count(opts.limit, "limit")));
    return c.parseStreamCount(await this.send([...args, ...c.atArgs(opts)]));
  }

  async throttle(key, maxBurst, countPerPeriod, periodS, quantity = 1, opts = {}) {
    const args = ["CL.THROTTLE", key, String(maxBurst), String(countPerPeriod), String(periodS), String(quantity)];
    return c.parseThrottle(await this.send([...args, ...c.atArgs(opts)]));
  }

  async info(key) { return c.parseInfo(await this.send(["RL.INFO", key])); }
}

module.exports = { RateLimiter, RateLimitExceeded };
