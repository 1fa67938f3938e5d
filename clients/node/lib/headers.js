"use strict";
// The header fields of a limiter result, in four styles:
//   "draft-11" (default): RateLimit-Policy and RateLimit of draft-ietf-httpapi-ratelimit-headers-11,
//     one item per limit: `"burst";q=100;w=60` and `"burst";r=50;t=30`, where t is the whole
//     seconds (rounded up) until additional quota is available, i.e. until the limit has more than
//     the r units it has now (0 when it is full);
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

/** t of one limit: the seconds until it has more than `remaining` units, i.e. the wait of a
 * request of remaining + 1 units (`nextRetryMs`, from a read-only check right after the call);
 * 0 when the limit is full; null (t left out, as the draft allows) when that wait is unknown. */
function secondsUntilMore(remaining, limit, nextRetryMs) {
  if (remaining >= limit) return 0;
  if (nextRetryMs == null) return null;
  return nextRetryMs >= 0 ? ceilS(nextRetryMs) : 0;
}

const asNamed = (limits) => {
  if (limits == null) return [];
  if (typeof limits.word === "string") return [["default", limits]];
  return Object.entries(limits);
};

/** One { name, q, w, r, t, resetMs, denied } per limit of a result. A detailed result (DETAIL)
 * gives each limit its own numbers; a plain one is the single limit of `limits`. `next` is the
 * read-only check of remaining + 1 units of each limit at the call's time (see
 * moreQuotaCharges). */
function limitItems(result, limits, { next } = {}) {
  if (result.limiters && result.limiters.length) {
    return result.limiters.map((d, i) => {
      const n = next && next.limiters && next.limiters[i];
      return {
        name: d.name, q: d.limit, w: d.windowMs ? ceilS(d.windowMs) : null, r: Math.max(d.remaining, 0),
        t: secondsUntilMore(d.remaining, d.limit, n ? n.retryAfterMs : null),
        resetMs: d.resetAfterMs, denied: d.retryAfterMs !== 0 && !result.allowed,
      };
    });
  }
  const pairs = asNamed(limits);
  const [name, spec] = pairs.length === 1 ? pairs[0] : (pairs.find(([, s]) => s.quota === result.limit) || ["default", null]);
  const w = spec && spec.windowMs ? ceilS(spec.windowMs) : null;
  return [{
    name, q: result.limit, w, r: Math.max(result.remaining, 0),
    t: secondsUntilMore(result.remaining, result.limit, next ? next.retryAfterMs : null),
    resetMs: result.resetAfterMs, denied: !result.allowed,
  }];
}

/** The units of the check that gives t: remaining + 1 of each limit (one per limiter of a
 * detailed result, in order); null when every limit is full (t is 0 without asking). */
function moreQuotaCharges(result) {
  const entries = result.limiters && result.limiters.length ? result.limiters : [result];
  if (entries.every((d) => d.remaining >= d.limit)) return null;
  return entries.map((d) => Math.min(Math.max(d.remaining, 0) + 1, d.limit));
}

/** The header fields of a result (see the styles above). options: { style, next (the check of
 * moreQuotaCharges(result) units at the call's time, for t), partitionKey (the client key, to
 * add pk), now (Unix ms of the call, for legacy's reset) }. */
function rateLimitHeaders(result, limits, options = {}) {
  const style = options.style ?? options.headers ?? "draft-11";
  if (!STYLES.includes(style)) throw new RangeError(`headers must be one of ${STYLES.join(", ")}, not ${JSON.stringify(style)}`);
  const items = limitItems(result, limits, options);
  const out = {};
  const pk = options.partitionKey != null ? `;pk=${partitionKey(options.partitionKey)}` : "";
  if (style === "draft-11") {
    out["RateLimit-Policy"] = items.map((i) => `${sfString(i.name)};q=${i.q}${i.w != null ? `;w=${i.w}` : ""}${pk}`).join(", ");
    out.RateLimit = items.map((i) => `${sfString(i.name)};r=${i.r}${i.t == null ? "" : `;t=${i.t}`}${pk}`).join(", ");
  } else if (style !== "none") {
    // The most restrictive limit: one that denied (the longest reset), else the fewest left.
    const denied = items.filter((i) => i.denied);
    const pool = denied.length ? denied : items;
    const top = pool.reduce((a, b) => (b.r < a.r || (b.r === a.r && b.resetMs > a.resetMs) ? b : a));
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
    // Never earlier than the t of a limit that denied.
    const ts = style === "draft-11" ? items.filter((i) => i.denied && i.t != null).map((i) => i.t) : [];
    out["Retry-After"] = String(Math.max(result.retryAfterHeader ?? 1, ...ts));
  }
  return out;
}

module.exports = { rateLimitHeaders, limitItems, moreQuotaCharges, secondsUntilMore, partitionKey, sfString, STYLES };
