"use strict";
// An express-rate-limit Store on the module: switch with one line,
//   rateLimit({ windowMs, limit, store: new RateLimitStore({ client }) })
// algorithm "fixed" (default): RL.FIXED counts every hit in fixed windows of windowMs, exactly as
// express-rate-limit's own stores do (totalHits, resetTime at the window's end).
// algorithm "gcra": RL.GCRA with burst = limit, limit per windowMs sustained; a denied hit is not
// charged and reports limit + 1 hits with resetTime when one more request would pass.

const { RateLimiter } = require("./client");
const c = require("./core");

// RL.FIXED's limit for counting: every hit is granted, remaining tells how many there were.
const COUNTER_LIMIT = 2 ** 31 - 1;

class RateLimitStore {
  constructor(options = {}) {
    if (!options.client) throw new TypeError("RateLimitStore needs a client (ioredis or node-redis)");
    this.limiter = options.limiter || new RateLimiter(options.client);
    this.algorithm = options.algorithm || "fixed";
    if (!["fixed", "gcra"].includes(this.algorithm)) throw new RangeError('algorithm must be "fixed" or "gcra"');
    this.prefix = options.prefix ?? "rl:erl:";
    this.limit = options.limit;
    this.windowMs = options.windowMs;
    this.localKeys = false;
  }

  init(options) {
    this.windowMs = this.windowMs ?? options.windowMs;
    if (this.limit == null && typeof options.limit === "number") this.limit = options.limit;
    if (this.algorithm === "gcra" && !Number.isSafeInteger(this.limit)) {
      throw new TypeError('algorithm "gcra" needs a numeric limit (give RateLimitStore its own limit)');
    }
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
    return this.info(await this.limiter.apply(this.prefix + key, this.spec()));
  }

  async get(key) {
    const result = await this.limiter.check(this.prefix + key, this.spec(), { cost: 0 });
    if (result.remaining === result.limit) return undefined;
    return this.info(result);
  }

  async decrement(key) {
    await this.limiter.refund(this.prefix + key, 1);
  }

  async resetKey(key) {
    await this.limiter.send(["DEL", this.prefix + key]);
  }
}

module.exports = { RateLimitStore };
