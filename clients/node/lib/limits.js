"use strict";
// Limit strings ("5/minute"), the names that keep two limits' keys apart, and the registry that
// refuses two integrations sharing a key space by accident.

const { limiters } = require("./core");

const PERIODS = { second: "1s", sec: "1s", s: "1s", minute: "1m", min: "1m", m: "1m", hour: "1h", h: "1h", day: "1d", d: "1d" };
const LIMIT_STRING = /^\s*([0-9]+)\s*(?:\/|per\s+)\s*(second|sec|s|minute|min|m|hour|h|day|d)\s*$/i;

/** "N/second|minute|hour|day" (also N/s, N/m, N/h, N/d, "N per minute") as GCRA: bursts of N,
 * N per one unit period (N requests at once, then N per period). */
function parseLimit(text) {
  const m = LIMIT_STRING.exec(String(text));
  if (!m || !(Number(m[1]) > 0) || !Number.isSafeInteger(Number(m[1]))) {
    throw new RangeError(`invalid limit ${JSON.stringify(text)}: "N/second", "N/minute", "N/hour" or "N/day" (N >= 1)`);
  }
  const n = Number(m[1]);
  return limiters.gcra(n, n, PERIODS[m[2].toLowerCase()]);
}

const isSpec = (v) => v != null && typeof v === "object" && typeof v.word === "string" && Array.isArray(v.params);
const toSpec = (v) => (typeof v === "string" ? parseLimit(v) : v);

/** limits as given (one spec, one limit string, or { name: spec | string }) -> { single, named }
 * where named is [[name, spec], ...]. */
function normalizeLimits(limits) {
  if (limits == null) throw new TypeError("limits is required: a limiter (gcra(...)), a limit string (\"5/minute\") or { name: limiter }");
  if (typeof limits === "string" || isSpec(limits)) {
    const spec = toSpec(limits);
    if (spec.word === "CONCURRENCY") throw new TypeError("a concurrency limiter needs a lease id; use acquire()");
    return { single: true, named: [["default", spec]] };
  }
  const named = Object.entries(limits).map(([n, s]) => {
    const spec = toSpec(s);
    if (!isSpec(spec)) throw new TypeError(`limits.${n} is not a limiter or a limit string`);
    if (spec.word === "CONCURRENCY") throw new TypeError(`limits.${n}: a concurrency limiter needs a lease id; use acquire()`);
    return [n, spec];
  });
  if (named.length === 0) throw new RangeError("limits has no limiter");
  return { single: false, named };
}

const specName = (s) => [s.word.toLowerCase(), ...s.params].join("-").replace(/ /g, "_").replace(/\{/g, "(").replace(/\}/g, ")");

/** The name derived from the limits' parameters: gcra-10-5-1s, or burst.gcra-5-5-10s+daily.fixed-3-1d. */
function derivedName({ single, named }) {
  return single ? specName(named[0][1]) : named.map(([n, s]) => `${n}.${specName(s)}`).join("+");
}

// The server a client talks to ("host:port/db"), or one identity per client object when it
// cannot be told (a Cluster, a socket path).
const clientIds = new WeakMap();
let nextClientId = 0;
function serverOf(client) {
  const c = client && typeof client.client === "object" && client.client ? client.client : client; // a RateLimiter's client
  const o = c && c.options;
  if (o && typeof o.port === "number") return `${o.path || `${o.host || "localhost"}:${o.port}`}/${o.db || 0}`;
  if (o && typeof o.url === "string") {
    try {
      const u = new URL(o.url);
      return `${u.hostname}:${u.port || 6379}/${o.database ?? (u.pathname.slice(1) || 0)}`;
    } catch { /* fall through */ }
  }
  if (o && o.socket && o.socket.port) return `${o.socket.host || "localhost"}:${o.socket.port}/${o.database || 0}`;
  if (!c || typeof c !== "object") return "unknown";
  if (!clientIds.has(c)) clientIds.set(c, `client-${++nextClientId}`);
  return clientIds.get(c);
}

// server + prefix + name -> { explicit name or null, what } of the integration that holds it.
const claims = new Map();

/** Refuse a second integration on the same key space (of one server) unless both give the same
 * explicit name. */
function claimKeySpace(client, space, explicitName, what, owner) {
  const held = claims.get(`${serverOf(client)} ${space}`);
  if (held && held.owner !== owner) {
    const shared = held.explicit != null && explicitName != null && held.explicit === explicitName;
    if (!shared) {
      throw new Error(`${what} would use the key space "${space}" of an earlier ${held.what}, so the two would ` +
        "count against each other's limits: give each a distinct name (name: \"login\") or prefix, or give both " +
        "the same explicit name to share the counts on purpose");
    }
    return;
  }
  claims.set(`${serverOf(client)} ${space}`, { explicit: explicitName ?? null, what, owner });
}

module.exports = { parseLimit, normalizeLimits, derivedName, claimKeySpace, specName, serverOf };
