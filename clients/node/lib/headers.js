"use strict";
// Retry-After and the RateLimit-Policy / RateLimit fields of draft-ietf-httpapi-ratelimit-headers-11
// (RFC 8941 structured fields: `"default";q=100;w=10` and `"default";r=50;t=30`).

const ceilS = (ms) => Math.ceil(ms / 1000);

function sfString(value) {
  if (!/^[\x20-\x7e]*$/.test(value)) throw new RangeError(`a policy name must be printable ASCII: ${value}`);
  return `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

const named = (limits) => (limits && typeof limits.word === "string" ? { default: limits } : limits);

const policyItem = (name, q, windowMs) => `${sfString(name)};q=${q}${windowMs ? `;w=${ceilS(windowMs)}` : ""}`;

/** RateLimit-Policy of a detailed result: one item per limiter of the reply (its name, q = its
 * limit, w = its windowMs in seconds rounded up, none for a concurrency limiter), joined by ","
 * as in the draft's examples: "burst";q=100;w=60,"daily";q=1000;w=86400. */
function detailedPolicy(result) {
  return result.limiters.map((d) => policyItem(d.name, d.limit, d.windowMs)).join(",");
}

function ratelimitPolicy(limits) {
  return Object.entries(named(limits))
    .map(([name, s]) => policyItem(name, s.quota, s.windowMs))
    .join(", ");
}

const item = (name, r, t) => `${sfString(name)};r=${Math.max(r, 0)};t=${Math.max(t, 0)}`;

function ratelimit(result, limits) {
  if (result.limiters && result.limiters.length) {
    return result.limiters.map((d) => item(d.name, d.remaining, ceilS(d.resetAfterMs))).join(",");
  }
  const pairs = Object.entries(named(limits));
  const match = pairs.find(([, s]) => s.quota === result.limit) || pairs[0] || ["default"];
  return item(match[0], result.remaining, ceilS(result.resetAfterMs));
}

/** RateLimit-Policy, RateLimit and (denied, not never) Retry-After for a result. A detailed
 * result gives one item per limiter from the reply alone. */
function rateLimitHeaders(result, limits) {
  const detailed = result.limiters && result.limiters.length > 0;
  const policy = detailed ? detailedPolicy(result) : ratelimitPolicy(limits);
  const out = { "RateLimit-Policy": policy, RateLimit: ratelimit(result, limits) };
  const retry = result.retryAfterHeader;
  if (retry != null) out["Retry-After"] = String(retry);
  return out;
}

module.exports = { rateLimitHeaders, ratelimitPolicy, detailedPolicy, ratelimit, sfString };
