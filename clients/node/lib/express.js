"use strict";
// Express middleware (works with any (req, res, next) framework that has res.setHeader).

const { rateLimitHeaders } = require("./headers");
const { named } = require("./core");

function withTimeout(promise, ms) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`rate limiter did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * rateLimit({ limiter, limits, key, cost, onError, timeout, prefix }): an Express middleware.
 * limits: one spec (named "default") or { name: spec } (applied with RL.ALL, one hash tag per
 * client). A denied request is answered 429 with Retry-After (413 without it when it can never
 * pass); every answer carries RateLimit-Policy and RateLimit. onError "open" lets requests
 * through when Redis does not answer within `timeout` ms, "closed" (the default) answers 503.
 * detail: true asks RL.ALL for a detailed reply, each limiter named by its name in `limits` (a
 * single one "default"), so that the headers carry one item per limiter from the reply.
 * shadow: true makes every call with SHADOW (to roll a limit out): charged as enforced, never
 * denied, the headers as the module replies (no Retry-After).
 */
function rateLimit(options) {
  const { limiter, limits } = options;
  if (!limiter || !limits) throw new TypeError("rateLimit needs a limiter and limits");
  const key = options.key || ((req) => req.ip || (req.socket && req.socket.remoteAddress) || "unknown");
  const cost = options.cost || (() => 1);
  const onError = options.onError || "closed";
  if (onError !== "open" && onError !== "closed") throw new RangeError('onError must be "open" or "closed"');
  const timeout = options.timeout ?? 500;
  const prefix = options.prefix ?? "rl:";
  const single = typeof limits.word === "string";
  const detail = Boolean(options.detail);
  const shadow = Boolean(options.shadow);
  const namedSpecs = detail
    ? (single ? [["", named(limits, "default")]] : Object.entries(limits).map(([n, s]) => [n, named(s, n)]))
    : null;

  return async function rateLimitMiddleware(req, res, next) {
    let units;
    let result;
    try {
      const client = String(await key(req));
      units = Number(await cost(req));
      const call = detail
        ? limiter.all(namedSpecs.map(([n, s]) => [single ? `${prefix}${client}` : `${prefix}{${client}}:${n}`, s]), { cost: units, detail: true, shadow })
        : single
        ? limiter.apply(`${prefix}${client}`, limits, { cost: units, shadow })
        : limiter.all(Object.entries(limits).map(([n, s]) => [`${prefix}{${client}}:${n}`, s]), { cost: units, shadow });
      result = await withTimeout(call, timeout);
    } catch (err) {
      if (onError === "open") return next();
      res.statusCode = 503;
      res.setHeader("Content-Type", "application/json");
      return res.end(JSON.stringify({ error: "rate limiter unavailable" }));
    }
    const headers = rateLimitHeaders(result, limits);
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    req.rateLimit = result;
    if (result.allowed) return next();
    res.statusCode = result.never ? 413 : 429;
    res.setHeader("Content-Type", "application/json");
    const body = result.never
      ? { error: `a request of ${units} units exceeds the limit of ${result.limit}` }
      : { error: "too many requests", retry_after_ms: result.retryAfterMs };
    return res.end(JSON.stringify(body));
  };
}

module.exports = { rateLimit, withTimeout };
