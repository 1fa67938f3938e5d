"use strict";
// Sliding-window counters with the API of the counter-sliding-window package: `add(n)` counts n
// actions now, `get()` is the number counted over the last window.
//   SlidingWindowCounterLocal(windowSize, unit): in this process's memory;
//   SlidingWindowCounterDistributed(client, key, windowSize, unit): shared by every process, on
//     RL.STREAMCOUNT: a real Redis stream with one `count` field per entry, the layout of that
//     package's Lua script (XADD key MINID ~ start * count n), so streams it wrote are counted
//     unchanged, in O(1) per call instead of an XRANGE over the whole window.

const { RateLimiter } = require("./client");

const UNITS = {
  millisecond: 1, milliseconds: 1, ms: 1,
  second: 1000, seconds: 1000, s: 1000,
  minute: 60000, minutes: 60000, m: 60000,
  hour: 3600000, hours: 3600000, h: 3600000,
  day: 86400000, days: 86400000, d: 86400000,
};

function windowMs(size, unit) {
  const per = UNITS[String(unit)];
  if (per == null) throw new RangeError(`unknown unit ${JSON.stringify(unit)}: milliseconds, seconds, minutes, hours or days`);
  const ms = size * per;
  if (!Number.isSafeInteger(ms) || ms < 1) throw new RangeError(`the window must be a positive whole number of milliseconds, not ${size} ${unit}`);
  return ms;
}

function units(n) {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`add() counts an integer >= 0, not ${n}`);
  return n;
}

class SlidingWindowCounterLocal {
  constructor(windowSize, unit = "milliseconds", options = {}) {
    this.windowMs = windowMs(windowSize, unit);
    this.now = options.now || Date.now;
    this.entries = []; // [time, n], newest first
  }
  prune(now) {
    const start = now - this.windowMs;
    while (this.entries.length && this.entries[this.entries.length - 1][0] < start) this.entries.pop();
  }
  add(n = 1) {
    const now = this.now();
    this.prune(now);
    if (units(n) > 0) this.entries.unshift([now, n]);
    return this.get();
  }
  get() {
    this.prune(this.now());
    return this.entries.reduce((sum, [, n]) => sum + n, 0);
  }
}

class SlidingWindowCounterDistributed {
  /** client: an ioredis or node-redis client (or a RateLimiter); key: the stream's key. */
  constructor(client, key, windowSize, unit = "milliseconds", options = {}) {
    this.limiter = client instanceof RateLimiter ? client : new RateLimiter(client, options);
    this.key = key;
    this.windowMs = windowMs(windowSize, unit);
    this.now = options.now || null;
  }
  at() {
    return this.now ? { at: this.now() } : {};
  }
  /** Count n actions now; resolves to the window's total after them. */
  async add(n = 1) {
    const r = await this.limiter.streamCount(this.key, this.windowMs, { add: units(n), ...this.at() });
    return r.total;
  }
  /** The window's total, counting nothing. */
  async get() {
    const r = await this.limiter.streamCount(this.key, this.windowMs, { add: 0, ...this.at() });
    return r.total;
  }
  /** Count n actions only if the total stays within limit (the package's throttle script):
   * true when they were counted, false (nothing counted) when they would exceed it. */
  async tryAdd(n, limit) {
    const r = await this.limiter.streamCount(this.key, this.windowMs, { add: units(n), limit, ...this.at() });
    return r.allowed;
  }
}

module.exports = { SlidingWindowCounterLocal, SlidingWindowCounterDistributed, SlidingWindowCounterRedis: SlidingWindowCounterDistributed };
