"use strict";
const { ModuleRequiredError } = require("./backend");
const { CALENDAR } = require("./core");
// Express middleware (any (req, res, next) framework with res.setHeader / res.statusCode / res.end).

const crypto = require("node:crypto");
const { RateLimiter } = require("./client");
const { rateLimitHeaders, moreQuotaCharges, STYLES } = require("./headers");
const { named } = require("./core");
const { normalizeLimits, derivedName, claimKeySpace } = require("./limits");
const { LimiterTimeoutError } = require("./errors");
const { clientAddress } = require("./keys");

const QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded";

function withTimeout(promise, ms) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new LimiterTimeoutError(ms)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const RENAMED = {
  timeout: "timeoutMs (milliseconds)",
  detail: "nothing: several limits always use the detailed reply, one limit its own",
};

function positiveInt(v, what) {
  if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`${what} must be an integer >= 0, not ${v}`);
  return v;
}

/** The denied answer by default: RFC 9457 problem details of the draft's quota-exceeded type;
 * retry_after in seconds (as Result.retryAfter), absent when the request can never pass. */
function problem(status, result, units, violated) {
  if (result.never) {
    return {
      type: QUOTA_EXCEEDED, title: "Request exceeds the limit", status,
      detail: `a request of ${units} units can never fit the limit of ${result.limit}`,
      "violated-policies": violated,
    };
  }
  return {
    type: QUOTA_EXCEEDED, title: "Too Many Requests", status,
    detail: `quota exceeded; retry after ${result.retryAfter} s`,
    retry_after: result.retryAfter,
    "violated-policies": violated,
  };
}

/**
 * rateLimit(options): Express middleware. See index.d.ts (RateLimitMiddlewareOptions) and the
 * README for every option.
 */
function rateLimit(options) {
  if (!options || typeof options !== "object") throw new TypeError("rateLimit needs options: { limiter, limits }");
  for (const [old, instead] of Object.entries(RENAMED)) {
    if (old in options) throw new TypeError(`rateLimit: "${old}" is no longer an option; use ${instead}`);
  }
  if (typeof options.onError === "string") {
    throw new TypeError(`rateLimit: onError is a hook (err, req) => void; the fail mode is fail: "${options.onError}"`);
  }
  const limiter = options.limiter instanceof RateLimiter ? options.limiter
    : options.client ? new RateLimiter(options.client, { backend: options.backend }) : options.limiter;
  if (!limiter || typeof limiter.all !== "function") throw new TypeError("rateLimit needs a limiter (new RateLimiter(client)) or a client");
  const limits = normalizeLimits(options.limits);
  if (limiter.shared && limiter.shared.backend === "lua") scriptCan(options, limits);
  const prefix = options.prefix ?? "rl:";
  const name = options.name ?? derivedName(limits);
  if (options.name != null && !/^[\x21-\x7a\x7c\x7e]{1,200}$/.test(options.name)) throw new RangeError("name is 1-200 printable ASCII characters without spaces, { or }");
  const owner = {};
  claimKeySpace(limiter.client, `${prefix}${name}`, options.name ?? null, `rateLimit(${JSON.stringify(name)})`, owner);

  const key = options.key || ((req) => clientAddress(req));
  const cost = options.cost || null;
  const costs = options.costs || {};
  for (const n of Object.keys(costs)) {
    if (!limits.named.some(([m]) => m === n)) throw new RangeError(`costs.${n} names no limit (limits: ${limits.named.map(([m]) => m).join(", ")})`);
    if (typeof costs[n] !== "function") throw new TypeError(`costs.${n} must be a function (req) => units`);
  }
  const fail = options.fail ?? "closed";
  if (fail !== "open" && fail !== "closed") throw new RangeError('fail must be "closed" (503) or "open"');
  const onError = options.onError || null;
  const logger = options.logger || console;
  const timeoutMs = options.timeoutMs ?? 500;
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) throw new RangeError("timeoutMs must be a positive number of milliseconds");
  const style = options.headers ?? "draft-11";
  if (!STYLES.includes(style)) throw new RangeError(`headers must be one of ${STYLES.join(", ")}`);
  const status = options.status ?? 429;
  const neverStatus = options.neverStatus ?? 413;
  const errorStatus = options.errorStatus ?? 503;
  const skip = options.skip || null;
  const allowlist = new Set((options.allowlist || []).map(String));
  const onDenied = options.onDenied || null;
  const shadow = Boolean(options.shadow);
  const block = options.block ?? null;
  const reserve = options.reserve || null;
  if (reserve && (reserve.hold == null || typeof reserve.usage !== "function")) {
    throw new TypeError("reserve needs { hold: duration, usage: (req, res) => units or { limit: units } }");
  }
  const atOf = options.at || null;

  const keys = (client) => limits.named.map(([n]) =>
    (limits.single ? `${prefix}${name}:${client}` : `${prefix}${name}:{${client}}:${n}`));

  let failing = false;
  function failed(err, req, res, next) {
    if (onError) {
      try { onError(err, req); } catch (hookErr) { logger.error(`redis-ratelimit: onError hook threw: ${hookErr && hookErr.message}`); }
    }
    if (!failing) {
      failing = true;
      const mode = fail === "open" ? "failing open (requests pass unlimited)" : `failing closed (${errorStatus})`;
      logger.warn(`redis-ratelimit: rate limiter ${JSON.stringify(name)} unavailable, ${mode}: ${err && err.message}`);
    }
    if (fail === "open") return next();
    const body = JSON.stringify({ type: "about:blank", title: "Rate limiter unavailable", status: errorStatus, detail: "the rate limiter could not answer; retry later" });
    res.statusCode = errorStatus;
    res.setHeader("Content-Type", "application/problem+json");
    return res.end(body);
  }

  // Settle a reservation once the response is done, with the units really used.
  function settleAfter(req, res, ks, id, charges) {
    let done = false;
    const settle = async () => {
      if (done) return;
      done = true;
      try {
        const used = await reserve.usage(req, res);
        const units = limits.named.map(([n], i) => {
          const u = typeof used === "number" ? used : used && used[n] != null ? used[n] : charges[i];
          return positiveInt(Number(u), `reserve.usage's units for ${n}`);
        });
        await limiter.settle(ks, id, units, atOf ? { at: atOf(req) } : {});
      } catch (err) {
        if (onError) {
          try { onError(err, req); } catch (hookErr) { void hookErr; }
        }
        logger.warn(`redis-ratelimit: settling reservation ${id} of ${JSON.stringify(name)} failed (it is given back when its hold ends): ${err && err.message}`);
      }
    };
    res.once("finish", settle);
    res.once("close", settle);
  }

  return async function rateLimitMiddleware(req, res, next) {
    // The app's functions: what they throw is the app's error (next(err)), not an outage.
    let client;
    let charges;
    let at;
    try {
      if (skip && (await skip(req))) return next();
      client = String(await key(req));
      if (allowlist.has(client)) return next();
      const base = cost ? Number(await cost(req)) : 1;
      charges = [];
      for (const [n] of limits.named) charges.push(positiveInt(costs[n] ? Number(await costs[n](req)) : base, `the cost of ${n}`));
      at = atOf ? atOf(req) : null;
    } catch (err) {
      return next(err);
    }

    const ks = keys(client);
    const deadline = Date.now() + timeoutMs;
    const view = limiter.until(deadline);
    const id = reserve ? crypto.randomUUID() : null;
    const opts = {
      shadow, ...(at != null ? { at } : {}), ...(block != null && !shadow ? { block } : {}),
      ...(reserve ? { dedup: id, hold: reserve.hold } : {}),
    };
    let result;
    let next_ = null;
    try {
      const call = async () => {
        await view.checkModule();
        let r;
        if (limits.single) {
          r = await view.apply(ks[0], limits.named[0][1], { ...opts, cost: charges[0] });
        } else {
          const specs = limits.named.map(([n, s], i) => [ks[i], named(s, n, charges[i])]);
          r = await view.all(specs, { ...opts, detail: true });
        }
        // draft-11's t: the wait until each limit has more than it has left, from a read-only
        // check of remaining + 1 units at the same time (none when every limit is full).
        const more = style === "draft-11" ? moreQuotaCharges(r) : null;
        if (more) {
          const peek = at != null ? { at } : {};
          next_ = limits.single
            ? await view.check(ks[0], limits.named[0][1], { ...peek, cost: more[0] })
            : await view.checkAll(limits.named.map(([n, s], i) => [ks[i], named(s, n, more[i])]), { ...peek, detail: true });
        }
        return r;
      };
      result = await withTimeout(call(), timeoutMs);
    } catch (err) {
      return failed(err, req, res, next);
    }
    if (failing) {
      failing = false;
      logger.warn(`redis-ratelimit: rate limiter ${JSON.stringify(name)} answers again`);
    }
    const headers = rateLimitHeaders(result, limits.single ? limits.named[0][1] : Object.fromEntries(limits.named), {
      style, next: next_, now: at ?? Date.now(),
      partitionKey: options.partitionKey ? client : null,
    });
    for (const [h, v] of Object.entries(headers)) res.setHeader(h, v);
    req.rateLimit = result;
    if (result.allowed) {
      if (reserve) settleAfter(req, res, ks, id, charges);
      return next();
    }
    const code = result.never ? neverStatus : status;
    if (onDenied) {
      try {
        return await onDenied(req, res, result);
      } catch (err) {
        return next(err);
      }
    }
    const violated = result.limiters.length
      ? result.limiters.filter((d) => d.retryAfterMs !== 0).map((d) => d.name)
      : [limits.named[0][0]];
    const units = result.limiters.length ? Math.max(...result.limiters.map((d) => d.cost)) : charges[0];
    res.statusCode = code;
    res.setHeader("Content-Type", "application/problem+json");
    return res.end(JSON.stringify(problem(code, result, units, violated)));
  };
}

// Under backend "lua", refuse at construction what the script backend cannot do.
function scriptCan(options, limits) {
  const what = [];
  if (options.reserve) what.push("reserve (HOLD, RL.SETTLE)");
  if (options.block) what.push("block (RL.BLOCK)");
  if (options.shadow) what.push("shadow (SHADOW)");
  if (options.at) what.push("at (AT)");
  for (const [n, spec] of limits.named) {
    if (!["GCRA", "TOKENBUCKET", "FIXED", "SLIDINGCOUNTER"].includes(spec.word)) what.push(`the limit ${JSON.stringify(n)} (${spec.command})`);
    else if (spec.word === "FIXED" && CALENDAR.includes(String(spec.params[1]))) what.push(`the limit ${JSON.stringify(n)} (a calendar window)`);
  }
  if (what.length) throw new ModuleRequiredError(what.join(", "));
}

module.exports = { rateLimit, withTimeout, QUOTA_EXCEEDED };
