"use strict";
// An express-rate-limit Store on the module: switch with one line,
//   rateLimit({ windowMs, limit, store: new RateLimitStore({ client }) })
// algorithm "fixed" (default): RL.FIXED counts every hit in fixed windows of windowMs ALIGNED TO
// THE CLOCK (each window starts at a multiple of windowMs since the Unix epoch, the same for every
// client), where express-rate-limit's MemoryStore starts a client's window at its first hit; the
// count and resetTime are those of the current aligned window.
// algorithm "gcra": RL.GCRA with burst = limit, limit per windowMs sustained (no windows at all);
// a denied hit is not charged and reports limit + 1 hits with resetTime when one more request
// would pass.
// Keys are prefix + name + ":" + key, name derived from the algorithm, windowMs (and limit for
// gcra) unless given: two Stores on the same key space are refused unless both give that name.

const { RateLimiter } = require("./client");
const c = require("./core");
const { claimKeySpace } = require("./limits");
const { LimiterTimeoutError } = require("./errors");

// Every call bounded by timeoutMs: the command is not sent after it (see RateLimiter), and the
// Store rejects (express-rate-limit then calls next(err), or lets the request through with
// passOnStoreError).
function bounded(store, fn) {
  const ms = store.timeoutMs;
  const view = store.limiter.until(Date.now() + ms);
  let timer;
  const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new LimiterTimeoutError(ms)), ms); });
  return Promise.race([fn(view), timeout]).finally(() => clearTimeout(timer));
}

// RL.FIXED's limit for counting: every hit is granted, remaining tells how many there were.
const COUNTER_LIMIT = 2 ** 31 - 1;

class RateLimitStore {
  constructor(options = {}) {
    if (!options.client) throw new TypeError("RateLimitStore needs a client (ioredis or node-redis)");
    this.limiter = options.limiter || new RateLimiter(options.client, { backend: options.backend });
    this.algorithm = options.algorithm || "fixed";
    if (!["fixed", "gcra"].includes(this.algorithm)) throw new RangeError('algorithm must be "fixed" or "gcra"');
    this.base = options.prefix ?? "rl:erl:";
    this.name = options.name ?? null;
    this.prefix = this.base;
    this.limit = options.limit;
    this.windowMs = options.windowMs;
    this.localKeys = false;
    this.owner = {};
    this.timeoutMs = options.timeoutMs ?? 500;
    if (!(Number.isFinite(this.timeoutMs) && this.timeoutMs > 0)) throw new RangeError("timeoutMs must be a positive number of milliseconds");
  }

  init(options) {
    this.windowMs = this.windowMs ?? options.windowMs;
    if (this.limit == null && typeof options.limit === "number") this.limit = options.limit;
    if (this.algorithm === "gcra" && !Number.isSafeInteger(this.limit)) {
      throw new TypeError('algorithm "gcra" needs a numeric limit (give RateLimitStore its own limit)');
    }
    const name = this.name ?? `${this.algorithm}-${Math.ceil(this.windowMs)}ms${this.algorithm === "gcra" ? `-${this.limit}` : ""}`;
    claimKeySpace(this.limiter.client, `${this.base}${name}`, this.name, `RateLimitStore(${JSON.stringify(name)})`, this.owner);
    this.prefix = `${this.base}${name}:`;
  }

  spec() {
    const window = `${Math.ceil(this.windowMs)}ms`;
    return this.algorithm === "gcra"
      ? c.limiters.gcra(this.limit, this.limit, window)
      : c.limiters.fixed(COUNTER_LIMIT, window);
  }

  info(result) {
    const resetTime = new Date(Date.now() + (result.allowed ? result.resetAfterMs : result.retryAfterMs));
    if (this.algorithm === "gcra") {
      const totalHits = result.allowed ? this.limit - result.remaining : this.limit + 1;
      return { totalHits, resetTime: result.allowed ? new Date(Date.now() + result.resetAfterMs) : resetTime };
    }
    return { totalHits: COUNTER_LIMIT - result.remaining, resetTime: new Date(Date.now() + result.resetAfterMs) };
  }

  async increment(key) {
    return this.info(await bounded(this, async (l) => {
      await l.checkModule();
      return l.apply(this.prefix + key, this.spec());
    }));
  }

  async get(key) {
    const result = await bounded(this, (l) => l.check(this.prefix + key, this.spec(), { cost: 0 }));
    if (result.remaining === result.limit) return undefined;
    return this.info(result);
  }

  async decrement(key) {
    await bounded(this, (l) => l.refund(this.prefix + key, 1));
  }

  async resetKey(key) {
    await bounded(this, async (l) => l.send(["DEL", await l.storageKey(this.prefix + key)]));
  }
}

module.exports = { RateLimitStore };
