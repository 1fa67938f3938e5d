"use strict";
// Client-side rate-limiting metrics, named after OpenTelemetry's rate-limiting conventions
// (aspnetcore.rate_limiting.*, as ratelimit.*): events for any backend, and a prom-client hook.
//
//   const { RateLimiter } = require("redis-ratelimit-client");
//   const { RateLimitMetrics, promClientMetrics } = require("redis-ratelimit-client/metrics");
//   const metrics = new RateLimitMetrics();
//   promClientMetrics(metrics, require("prom-client"));        // or metrics.on("request", ...)
//   const rl = metrics.instrument(new RateLimiter(redis));
//
// Events (labelled by command and named policy, never by key):
//   "request"     { command: "rl.gcra", policy: "" | name, result: "acquired" | "limited", near }
//   "queued"      { delta: +1 | -1, waiting }      an acquire(..., { wait }) begins / ends
//   "timeInQueue" { seconds, result }              how long an acquire(..., { wait }) took
// `near`: granted with remaining below nearLimitPercent (20, the module's default
// ratelimit.near-limit-percent) of the limit.

const { EventEmitter } = require("node:events");

/** The command each limiter method of RateLimiter sends. */
const COMMANDS = Object.freeze({
  gcra: "rl.gcra",
  tokenBucket: "rl.tokenbucket",
  leakyBucket: "rl.leakybucket",
  fixed: "rl.fixed",
  sliding: "rl.sliding",
  slidingCounter: "rl.slidingcounter",
  apply: null, // the spec's own command
  all: "rl.all",
  check: "rl.check",
  checkAll: "rl.checkall",
  limit: "rl.limit",
  acquire: "rl.acquire",
  throttle: "cl.throttle",
});

/** A grant leaving `remaining` below `percent`% of `limit` (the module's rule). */
function nearLimit(remaining, limit, percent) {
  return remaining * 100 < limit * percent;
}

const resultOf = (acquired) => (acquired ? "acquired" : "limited");

class RateLimitMetrics extends EventEmitter {
  /** opts.nearLimitPercent (default 20, as the server's ratelimit.near-limit-percent);
   * opts.onError(err): a listener that throws never fails the call counted; the error goes
   * here (default: process.emitWarning). */
  constructor(opts = {}) {
    super();
    const percent = opts.nearLimitPercent ?? 20;
    if (!Number.isInteger(percent) || percent < 0 || percent > 100) {
      throw new RangeError("nearLimitPercent must be an integer from 0 to 100");
    }
    this.nearLimitPercent = percent;
    this.onError = opts.onError ?? ((e) => process.emitWarning(`redis-ratelimit-client metrics: ${e}`));
    this.waiting = 0;
  }

  /** Emit without ever throwing into the caller. */
  safeEmit(event, data) {
    try {
      this.emit(event, data);
    } catch (e) {
      try { this.onError(e); } catch { /* nothing left to tell */ }
    }
  }

  /** Count one limiter reply (a Result or ThrottleResult) of `command` under `policy`. */
  record(command, policy, result) {
    if (result == null || typeof result.allowed !== "boolean") return;
    const acquired = result.allowed;
    const near = acquired && nearLimit(Number(result.remaining), Number(result.limit), this.nearLimitPercent);
    this.safeEmit("request", { command, policy: policy ?? "", result: resultOf(acquired), near });
  }

  /** `limiter` (a RateLimiter) with every limiter call counted: the same methods, replies and
   * errors (a call that rejects is not counted). */
  instrument(limiter) {
    const metrics = this;
    return new Proxy(limiter, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver);
        if (typeof name !== "string" || !(name in COMMANDS) || typeof value !== "function") {
          return typeof value === "function" ? value.bind(target) : value;
        }
        return async (...args) => {
          const command = COMMANDS[name] ?? String(args[1]?.command ?? "").toLowerCase();
          const opts = args[{ acquire: 4, limit: 2, all: 1, checkAll: 1 }[name] ?? -1] ?? {};
          const policy = name === "limit" ? String(args[1]) : opts.policy ?? "";
          const queued = name === "acquire" && opts.wait != null;
          if (queued) {
            metrics.waiting += 1;
            metrics.safeEmit("queued", { delta: 1, waiting: metrics.waiting });
          }
          const t0 = process.hrtime.bigint();
          let result;
          try {
            // Called on the limiter itself: its own calls between methods are not counted twice.
            result = await value.apply(target, args);
          } finally {
            if (queued) {
              metrics.waiting -= 1;
              metrics.safeEmit("queued", { delta: -1, waiting: metrics.waiting });
            }
          }
          metrics.record(command, policy, result);
          if (queued && result != null && typeof result.allowed === "boolean") {
            const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
            metrics.safeEmit("timeInQueue", { seconds, result: resultOf(result.allowed) });
          }
          return result;
        };
      },
    });
  }
}

/** Register prom-client metrics fed by `metrics`' events: ratelimit_requests_total{command,
 * policy,result}, ratelimit_near_limit_requests_total{command,policy}, ratelimit_queued_requests
 * and the histogram ratelimit_request_time_in_queue_seconds{result}. `promClient` is the
 * prom-client module; opts.registers (default [promClient.register]), opts.buckets. */
function promClientMetrics(metrics, promClient, opts = {}) {
  const registers = opts.registers ?? [promClient.register];
  const requests = new promClient.Counter({
    name: "ratelimit_requests_total",
    help: "Rate-limiting calls decided, by command, named policy and result.",
    labelNames: ["command", "policy", "result"],
    registers,
  });
  const near = new promClient.Counter({
    name: "ratelimit_near_limit_requests_total",
    help: "Granted calls that left less than the near-limit share of the limit.",
    labelNames: ["command", "policy"],
    registers,
  });
  const queued = new promClient.Gauge({
    name: "ratelimit_queued_requests",
    help: "RL.ACQUIRE ... WAIT calls waiting now.",
    registers,
  });
  const waited = new promClient.Histogram({
    name: "ratelimit_request_time_in_queue_seconds",
    help: "Time an RL.ACQUIRE ... WAIT call took, by result.",
    labelNames: ["result"],
    registers,
    ...(opts.buckets ? { buckets: opts.buckets } : {}),
  });
  metrics.on("request", (e) => {
    requests.inc({ command: e.command, policy: e.policy, result: e.result });
    if (e.near) near.inc({ command: e.command, policy: e.policy });
  });
  metrics.on("queued", (e) => queued.inc(e.delta));
  metrics.on("timeInQueue", (e) => waited.observe({ result: e.result }, e.seconds));
  return { requests, near, queued, waited };
}

module.exports = { RateLimitMetrics, promClientMetrics, nearLimit, COMMANDS };
