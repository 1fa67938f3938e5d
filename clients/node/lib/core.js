"use strict";
// Reply parsing, limiter specifications, options and durations shared by every integration.

const FIELDS = ["granted", "limit", "remaining", "retry_after_ms", "reset_after_ms"];
const DETAIL = ["name", "key", "cost", "granted", "limit", "remaining", "retry_after_ms",
  "reset_after_ms", "window_ms", "policy"];
const UNITS = { "": 1, ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000 };

const text = (v) => (v == null ? null : Buffer.isBuffer(v) ? v.toString("utf8") : String(v));

function int(v) {
  if (typeof v === "number" && Number.isInteger(v)) return v;
  if (typeof v === "bigint") return Number(v);
  if (typeof v === "string" && /^-?[0-9]+$/.test(v)) return Number(v);
  throw new TypeError(`expected an integer in the reply, got ${String(v)}`);
}

// A map reply in any of the shapes clients give: a plain object (RESP3 mapped), a Map, or a
// flat [name, value, ...] array (ioredis' legacy RESP3 mapping). Returns null for other arrays.
function named(reply) {
  if (reply instanceof Map) {
    const out = {};
    for (const [k, v] of reply) out[text(k)] = v;
    return out;
  }
  if (Array.isArray(reply)) {
    if (reply.length % 2 !== 0 || reply.length === 0) return null;
    if (!reply.every((v, i) => i % 2 === 1 || typeof v === "string" || Buffer.isBuffer(v))) return null;
    const out = {};
    for (let i = 0; i < reply.length; i += 2) out[text(reply[i])] = reply[i + 1];
    return out;
  }
  if (reply && typeof reply === "object" && !Buffer.isBuffer(reply)) return reply;
  return null;
}

/** The result of every limiter command (see index.d.ts). */
class Result {
  constructor(granted, limit, remaining, retryAfterMs, resetAfterMs, cost, detail) {
    this.granted = granted;
    this.limit = limit;
    this.remaining = remaining;
    this.retryAfterMs = retryAfterMs;
    this.resetAfterMs = resetAfterMs;
    this.allowed = cost == null ? retryAfterMs === 0 : granted >= cost;
    this.never = retryAfterMs === -1;
    this.deniedBy = detail ? detail.deniedBy : null;
    this.reason = detail ? detail.reason : null;
    this.limiters = detail ? detail.limiters : [];
    Object.freeze(this.limiters);
    Object.freeze(this);
  }
  /** Seconds until the same request would pass, null when it never can. */
  get retryAfter() {
    return this.never ? null : this.retryAfterMs / 1000;
  }
  get resetAfter() {
    return this.resetAfterMs / 1000;
  }
  /** Retry-After in whole seconds rounded up, at least 1; null when allowed or never. */
  get retryAfterHeader() {
    if (this.allowed || this.never) return null;
    return Math.max(1, Math.ceil(this.retryAfterMs / 1000));
  }
}

function parseDetail(entry) {
  // A map (object, Map, or ioredis' flat [name, value, ...] RESP3 array) or RESP2's positional array.
  const d = named(entry);
  const vals = d && "window_ms" in d ? DETAIL.map((n) => d[n]) : DETAIL.map((_, i) => entry[i]);
  return Object.freeze({
    name: text(vals[0]), key: text(vals[1]), cost: int(vals[2]), granted: int(vals[3]),
    limit: int(vals[4]), remaining: int(vals[5]), retryAfterMs: int(vals[6]),
    resetAfterMs: int(vals[7]), windowMs: int(vals[8]), policy: text(vals[9]),
  });
}

/** A limiter reply: RESP2 array of 5 (8 with DETAIL), RESP3 map (object, Map or flat array). */
function parseResult(reply, cost) {
  if (reply instanceof Result) return reply;
  if (Array.isArray(reply) && (reply.length === 5 || reply.length === 8) &&
      reply.slice(0, 5).every((v) => typeof v === "number" || typeof v === "bigint")) {
    const v = reply.slice(0, 5).map(int);
    const detail = reply.length === 8
      ? { deniedBy: text(reply[5]), reason: text(reply[6]), limiters: (reply[7] || []).map(parseDetail) }
      : null;
    return new Result(v[0], v[1], v[2], v[3], v[4], cost, detail);
  }
  const d = named(reply);
  if (!d || !FIELDS.every((f) => f in d)) throw new TypeError(`not a limiter reply: ${String(reply)}`);
  const v = FIELDS.map((f) => int(d[f]));
  const detail = "reason" in d
    ? { deniedBy: text(d.denied_by), reason: text(d.reason), limiters: (d.limiters || []).map(parseDetail) }
    : null;
  return new Result(v[0], v[1], v[2], v[3], v[4], cost, detail);
}

function parseOptionalResult(reply, cost) {
  return reply == null ? null : parseResult(reply, cost);
}

/** RL.SETTLE: one limiter reply per key (null for a missing key); allowed means one unit could
 * be granted now. */
function parseSettle(reply) {
  if (!Array.isArray(reply)) throw new TypeError(`not an RL.SETTLE reply: ${String(reply)}`);
  return reply.map((r) => parseOptionalResult(r));
}

/** numkeys key [key ...] id units [units ...] of RL.SETTLE. */
function settleArgs(keys, id, units) {
  if (!Array.isArray(keys) || !Array.isArray(units)) throw new TypeError("keys and units are arrays, one units per key");
  if (keys.length === 0) throw new RangeError("RL.SETTLE needs at least one key");
  if (units.length !== keys.length) throw new RangeError(`one units per key: ${keys.length} keys, ${units.length} units`);
  return [String(keys.length), ...keys, id, ...units.map((u) => String(count(u, "units", 0)))];
}

/** RL.INFO: null, or { algorithm, fields } with every field by name. */
function parseInfo(reply) {
  if (reply == null) return null;
  const d = named(reply);
  if (!d) throw new TypeError("not an RL.INFO reply");
  const fields = {};
  for (const [k, v] of Object.entries(d)) fields[k] = typeof v === "number" ? v : text(v);
  return Object.freeze({ algorithm: String(fields.algorithm), fields: Object.freeze(fields) });
}

function parseThrottle(reply) {
  const v = reply.map(int);
  return Object.freeze({ limited: v[0] === 1, allowed: v[0] !== 1, limit: v[1], remaining: v[2],
    retryAfterS: v[3], resetAfterS: v[4] });
}

function parseStreamCount(reply) {
  const total = int(reply);
  return Object.freeze({ allowed: total >= 0, total: total >= 0 ? total : null });
}

/** A duration argument: ms as a number, or a string with a unit (1500ms, 30s, 1m, 24h, 1d). */
function durationArg(d) {
  durationMs(d);
  return String(d);
}

function durationMs(d) {
  const m = /^([0-9]+)(ms|s|m|h|d)?$/.exec(String(d));
  if (!m || !(Number(m[1]) > 0) || (typeof d === "number" && !Number.isSafeInteger(d))) {
    throw new RangeError(`invalid duration ${JSON.stringify(d)}: a positive integer of ms, or with ms/s/m/h/d`);
  }
  return Number(m[1]) * UNITS[m[2] || ""];
}

function count(v, what, min = 1) {
  if (!Number.isSafeInteger(v) || v < min) throw new RangeError(`${what} must be an integer >= ${min}, not ${v}`);
  return v;
}

function timeArg(t) {
  if (t instanceof Date) return String(t.getTime());
  if (typeof t !== "number" || !Number.isFinite(t) || t < 0) throw new RangeError(`invalid AT ${t}`);
  return Number.isInteger(t) ? String(t) : t.toFixed(3).replace(/0+$/, "").replace(/\.$/, "");
}

// Limiter specifications: { command, word, quota, windowMs, params, charge, name }. `params`
// are the positional arguments and own options after the key; `charge` and `name` (CHARGE n,
// NAME name) are written after them in RL.ALL, RL.CHECK and RL.CHECKALL only.
const NAME = /^[A-Za-z0-9_.:-]{1,64}$/;
const CALENDAR = ["day", "week", "month", "quarter", "year"];

function spec(command, word, quota, windowMs, params, o = {}) {
  const charge = o.charge == null ? null : count(o.charge, "charge", 0);
  const name = o.name == null ? null : String(o.name);
  if (name != null && !NAME.test(name)) throw new RangeError(`a limiter name is 1-64 of letters, digits, _ - . :, not ${JSON.stringify(name)}`);
  return Object.freeze({ command, word, quota, windowMs, params: Object.freeze(params), charge, name });
}

/** A copy of a limiter spec named `name` in detailed replies. */
const named_ = (s, name, charge) => spec(s.command, s.word, s.quota, s.windowMs, [...s.params], { charge: charge ?? s.charge, name });

/** The limiter as RL.ALL writes it: word, params, CHARGE n, NAME name. */
function specArgs(s) {
  return [s.word, ...s.params, ...(s.charge == null ? [] : ["CHARGE", String(s.charge)]),
    ...(s.name == null ? [] : ["NAME", s.name])];
}

const refillMs = (amount, period, per) => Math.ceil((amount * durationMs(period)) / per);

function fixedSpec(limit, window, o = {}) {
  const calendar = CALENDAR.includes(window);
  if (!calendar && (o.tz != null || o.anchor != null)) {
    throw new RangeError(`tz and anchor need a calendar window (${CALENDAR.join(", ")})`);
  }
  const params = [String(limit), calendar ? window : durationArg(window)];
  if (o.offset != null) params.push("OFFSET", o.offset === 0 || o.offset === "0" ? "0" : durationArg(o.offset));
  if (o.tz != null) params.push("TZ", String(o.tz));
  if (o.anchor != null) params.push("ANCHOR", String(o.anchor));
  // A calendar window's length varies: 0 here, a detailed reply's windowMs gives the current one.
  return spec("RL.FIXED", "FIXED", count(limit, "limit"), calendar ? 0 : durationMs(window), params, o);
}

const limiters = {
  gcra: (burst, rate, period, o) =>
    spec("RL.GCRA", "GCRA", count(burst, "burst"), refillMs(burst, period, count(rate, "rate")),
      [String(burst), String(rate), durationArg(period)], o),
  tokenBucket: (capacity, refill, period, o) =>
    spec("RL.TOKENBUCKET", "TOKENBUCKET", count(capacity, "capacity"),
      refillMs(capacity, period, count(refill, "refill")),
      [String(capacity), String(refill), durationArg(period)], o),
  leakyBucket: (capacity, rate, period, o) =>
    spec("RL.LEAKYBUCKET", "LEAKYBUCKET", count(capacity, "capacity"),
      refillMs(capacity, period, count(rate, "rate")),
      [String(capacity), String(rate), durationArg(period)], o),
  fixed: fixedSpec,
  sliding: (limit, window, o = {}) =>
    spec("RL.SLIDING", "SLIDING", count(limit, "limit"), durationMs(window),
      [String(limit), durationArg(window), ...(o.precision == null ? [] : ["PRECISION", durationArg(o.precision)])], o),
  slidingCounter: (limit, window, o) =>
    spec("RL.SLIDINGCOUNTER", "SLIDINGCOUNTER", count(limit, "limit"), durationMs(window),
      [String(limit), durationArg(window)], o),
  concurrency: (limit, lease, o) =>
    spec("RL.ACQUIRE", "CONCURRENCY", count(limit, "limit"), 0, [String(limit), durationArg(lease)], o),
};

/** The shared options of the limiter commands: cost, peek, shadow, bestEffort, dedup, hold,
 * block, delay, detail, at. */
function optionArgs(o = {}) {
  const out = [];
  const cost = o.cost == null ? 1 : count(o.cost, "cost", 0);
  if (o.hold != null && o.dedup == null) throw new RangeError("hold needs dedup: a reservation is settled by its id");
  if (cost !== 1) out.push("COST", String(cost));
  if (o.peek) out.push("PEEK");
  if (o.shadow) out.push("SHADOW");
  if (o.bestEffort) out.push("BESTEFFORT");
  if (o.dedup != null) out.push("DEDUP", o.dedup);
  if (o.hold != null) out.push("HOLD", durationArg(o.hold));
  if (o.block != null) out.push("BLOCK", durationArg(o.block));
  if (o.delay != null) out.push("DELAY", durationArg(o.delay));
  if (o.detail) out.push("DETAIL");
  if (o.at != null) out.push("AT", timeArg(o.at));
  return out;
}

const atArgs = (o = {}) => (o.at == null ? [] : ["AT", timeArg(o.at)]);

/** numkeys key [key ...] then the limiters, or POLICY name with the keys (one per limiter of the
 * policy, in order). */
function allOrPolicyArgs(list, policy) {
  if (policy == null) {
    if (Array.isArray(list) && list.some((p) => !Array.isArray(p))) {
      throw new TypeError("pass the limiters ({key: spec} or [[key, spec], ...]), or the keys with policy");
    }
    return allArgs(list);
  }
  if (!Array.isArray(list) || !list.every((k) => typeof k === "string" || Buffer.isBuffer(k))) {
    throw new TypeError("with policy, pass the keys: an array, one key per limiter of the policy");
  }
  if (list.length === 0) throw new RangeError("RL.ALL needs at least one key");
  return [String(list.length), ...list, "POLICY", String(policy)];
}

// A policy's limiters as RL.ALL writes them: the word and its positional arguments, then
// options of one value each (RL.POLICY GET is read with these).
const ARITY = { GCRA: 3, TOKENBUCKET: 3, LEAKYBUCKET: 3, FIXED: 2, SLIDING: 2, SLIDINGCOUNTER: 2, CONCURRENCY: 2 };
const LIMITER_OPTIONS = new Set(["CHARGE", "NAME", "OFFSET", "TZ", "ANCHOR", "PRECISION"]);

/** RL.POLICY GET: null for an unknown policy, else { name, args, shadow, desc }: the arguments of
 * the SET that made it (after the name), read limiter by limiter for SHADOW and DESC text. */
function parsePolicy(name, reply) {
  if (reply == null) return null;
  if (!Array.isArray(reply)) throw new TypeError(`not an RL.POLICY GET reply: ${String(reply)}`);
  const args = reply.map(text);
  let shadow = false;
  let desc = null;
  for (let i = 0; i < args.length;) {
    const word = args[i].toUpperCase();
    if (word === "SHADOW") {
      shadow = true;
      i += 1;
    } else if (word === "DESC" && i + 1 < args.length) {
      desc = args[i + 1];
      i += 2;
    } else if (word in ARITY) {
      i += 1 + ARITY[word];
      while (i + 1 < args.length && LIMITER_OPTIONS.has(args[i].toUpperCase())) i += 2;
    } else {
      break;
    }
  }
  return Object.freeze({ name: text(name), args: Object.freeze(args), shadow, desc });
}

/** RL.POLICY LIST: { name: version } (RESP2 flat pairs, RESP3 a map). */
function parsePolicyList(reply) {
  if (Array.isArray(reply) && reply.length === 0) return {};
  const d = named(reply);
  if (!d) throw new TypeError(`not an RL.POLICY LIST reply: ${String(reply)}`);
  const out = {};
  for (const [k, v] of Object.entries(d)) out[k] = int(v);
  return out;
}

/** RL.POLICY SET name limiter [limiter ...] [SHADOW] [DESC text]. */
function policySetArgs(name, limiters, o = {}) {
  const specs = Array.isArray(limiters) ? limiters : [limiters];
  if (specs.length === 0) throw new RangeError("a policy needs at least one limiter");
  if (!specs.every((s) => s && typeof s.word === "string" && Array.isArray(s.params))) {
    throw new TypeError("a policy's limiters are limiter specifications (gcra(...), fixed(...))");
  }
  const out = ["RL.POLICY", "SET", String(name), ...specs.flatMap(specArgs)];
  if (o.shadow) out.push("SHADOW");
  if (o.desc != null) out.push("DESC", o.desc);
  return out;
}

function allArgs(list) {
  const pairs = Array.isArray(list) ? list : Object.entries(list);
  if (pairs.length === 0) throw new RangeError("RL.ALL needs at least one limiter");
  return [String(pairs.length), ...pairs.map(([k]) => k), ...pairs.flatMap(([, s]) => specArgs(s))];
}

module.exports = {
  Result, parseResult, parseOptionalResult, parseSettle, settleArgs, parseInfo, parseThrottle, parseStreamCount,
  durationArg, durationMs, timeArg, optionArgs, atArgs, allArgs, allOrPolicyArgs, specArgs, limiters, count,
  parsePolicy, parsePolicyList, policySetArgs,
  named: named_, CALENDAR,
};
