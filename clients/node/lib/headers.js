"use strict";
// The header fields of a limiter result, in four styles:
//   "draft-11" (default): RateLimit-Policy and RateLimit of draft-ietf-httpapi-ratelimit-headers-11,
//     one item per limit: `"burst";q=100;w=60` and `"burst";r=50;t=0`, where t is the whole seconds
//     (rounded up) until more quota is available for this request's cost (0 when it is now);
//   "draft-7": RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset of the most restrictive limit,
//     and RateLimit-Policy (`100;w=60`), as draft 6/7 (and express-rate-limit's "draft-7") write them;
//   "legacy": X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (Unix seconds);
//   "none": no RateLimit fields.
// Retry-After (whole seconds rounded up, at least every item's t) on a retryable denial, in every
// style; never when the request can never pass.

const crypto = require("node:crypto");

const STYLES = ["draft-11", "draft-7", "legacy", "none"];
const ceilS = (ms) => Math.ceil(ms / 1000);

function sfString(value) {
  if (!/^[\x20-\x7e]*$/.test(value)) throw new RangeError(`a policy name must be printable ASCII: ${value}`);
  return `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

/** The draft's pk: a Byte Sequence, here the first 12 bytes of SHA-256 of the client key. */
function partitionKey(client) {
  return `:${crypto.createHash("sha256").update(String(client)).digest().subarray(0, 12).toString("base64")}:`;
}

/** t of one limit: seconds until `cost` units are available again (0 when they are now). A
 * denying limit's retry_after_ms is exactly that; a granting one with fewer than `cost` left needs
 * the next identical request's retry_after_ms (`nextRetryMs`, from a PEEK after the call); a
 * request that can never pass reports the time to the limit's fresh state. */
function secondsUntilAvailable(remaining, cost, retryAfterMs, resetAfterMs, nextRetryMs) {
  if (retryAfterMs === -1) return ceilS(resetAfterMs);
  if (retryAfterMs > 0) return ceilS(retryAfterMs);
  if (remaining >= cost) return 0;
  return ceilS(nextRetryMs ?? resetAfterMs);
}

const asNamed = (limits) => {
  if (limits == null) return [];
  if (typeof limits.word === "string") return [["default", limits]];
  return Object.entries(limits);
};

/** One { name, q, w, r, t, resetMs } per limit of a result. A detailed result (DETAIL) gives each
 * limit its own numbers; a plain one is the single limit of `limits`. `next` is the PEEK result
 * of the same request after the call, when some limit has fewer units left than its cost. */
function limitItems(result, limits, { cost, next } = {}) {
  if (result.limiters && result.limiters.length) {
    return result.limiters.map((d, i) => {
      const n = next && next.limiters && next.limiters[i];
      return {
        name: d.name, q: d.limit, w: d.windowMs ? ceilS(d.windowMs) : null, r: Math.max(d.remaining, 0),
        t: secondsUntilAvailable(d.remaining, d.cost, d.retryAfterMs, d.resetAfterMs, n ? n.retryAfterMs : null),
        resetMs: d.resetAfterMs,
      };
    });
  }
  const pairs = asNamed(limits);
  const [name, spec] = pairs.length === 1 ? pairs[0] : (pairs.find(([, s]) => s.quota === result.limit) || ["default", null]);
  const units = cost ?? (result.granted > 0 ? result.granted : 1);
  const w = spec && spec.windowMs ? ceilS(spec.windowMs) : null;
  const retry = result.allowed ? 0 : result.retryAfterMs;
  return [{
    name, q: result.limit, w, r: Math.max(result.remaining, 0),
    t: secondsUntilAvailable(result.remaining, units, retry, result.resetAfterMs, next ? next.retryAfterMs : null),
    resetMs: result.resetAfterMs,
  }];
}

/** The header fields of a result (see the styles above). options: { style, cost, next,
 * partitionKey (the client key, to add pk), now (Unix ms of the call, for legacy's reset) }. */
function rateLimitHeaders(result, limits, options = {}) {
  const style = options.style ?? options.headers ?? "draft-11";
  if (!STYLES.includes(style)) throw new RangeError(`headers must be one of ${STYLES.join(", ")}, not ${JSON.stringify(style)}`);
  const items = limitItems(result, limits, options);
  const out = {};
  const pk = options.partitionKey != null ? `;pk=${partitionKey(options.partitionKey)}` : "";
  if (style === "draft-11") {
    out["RateLimit-Policy"] = items.map((i) => `${sfString(i.name)};q=${i.q}${i.w != null ? `;w=${i.w}` : ""}${pk}`).join(", ");
    out.RateLimit = items.map((i) => `${sfString(i.name)};r=${i.r};t=${i.t}${pk}`).join(", ");
  } else if (style !== "none") {
    // The most restrictive limit: the one that makes the client wait longest, else the fewest left.
    const top = items.reduce((a, b) => (b.t > a.t || (b.t === a.t && b.r < a.r) ? b : a));
    if (style === "draft-7") {
      out["RateLimit-Policy"] = items.map((i) => `${i.q}${i.w != null ? `;w=${i.w}` : ""}`).join(", ");
      out["RateLimit-Limit"] = String(top.q);
      out["RateLimit-Remaining"] = String(top.r);
      out["RateLimit-Reset"] = String(ceilS(top.resetMs));
    } else {
      out["X-RateLimit-Limit"] = String(top.q);
      out["X-RateLimit-Remaining"] = String(top.r);
      out["X-RateLimit-Reset"] = String(ceilS((options.now ?? Date.now()) + top.resetMs));
    }
  }
  if (!result.allowed && !result.never) {
    out["Retry-After"] = String(Math.max(result.retryAfterHeader ?? 1, ...items.map((i) => i.t)));
  }
  return out;
}

module.exports = { rateLimitHeaders, limitItems, secondsUntilAvailable, partitionKey, sfString, STYLES };
