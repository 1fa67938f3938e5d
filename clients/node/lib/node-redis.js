"use strict";
// node-redis v5: a module in the shape of @redis/bloom's, for createClient({ modules: { rl: RateLimitModule } }).
// client.rl.gcra(key, burst, rate, period, opts) and the others resolve to typed results.

const c = require("./core");

function limiterCommand(make) {
  return {
    IS_READ_ONLY: false,
    parseCommand(parser, key, ...rest) {
      const opts = rest.length && typeof rest[rest.length - 1] === "object" ? rest.pop() : {};
      const s = make(...rest, opts);
      parser.push(s.command);
      parser.pushKey(key);
      parser.push(...s.params, ...c.optionArgs(opts));
      parser.preserve = opts.cost ?? 1;
    },
    transformReply: { 2: (r, cost) => c.parseResult(r, cost), 3: (r, cost) => c.parseResult(r, cost) },
  };
}

const both = (fn) => ({ 2: fn, 3: fn });

const RateLimitModule = {
  gcra: limiterCommand((b, r, p) => c.limiters.gcra(b, r, p)),
  tokenBucket: limiterCommand((cap, r, p) => c.limiters.tokenBucket(cap, r, p)),
  leakyBucket: limiterCommand((cap, r, p) => c.limiters.leakyBucket(cap, r, p)),
  fixed: limiterCommand((l, w, o) => c.limiters.fixed(l, w, o)),
  sliding: limiterCommand((l, w, o) => c.limiters.sliding(l, w, o)),
  slidingCounter: limiterCommand((l, w) => c.limiters.slidingCounter(l, w)),
  all: {
    IS_READ_ONLY: false,
    parseCommand(parser, limiters, opts = {}) {
      const args = c.allOrPolicyArgs(limiters, opts.policy);
      const n = Number(args[0]);
      parser.push("RL.ALL", args[0]);
      parser.pushKeys(args.slice(1, 1 + n));
      parser.push(...args.slice(1 + n), ...c.optionArgs(opts));
      parser.preserve = opts.cost ?? 1;
    },
    transformReply: both((r, cost) => c.parseResult(r, cost)),
  },
  check: {
    IS_READ_ONLY: true,
    parseCommand(parser, key, spec, opts = {}) {
      parser.push("RL.CHECK");
      parser.pushKey(key);
      parser.push(...c.specArgs(spec), ...c.optionArgs({ cost: opts.cost, bestEffort: opts.bestEffort, shadow: opts.shadow, detail: opts.detail, at: opts.at }));
      parser.preserve = opts.cost ?? 1;
    },
    transformReply: both((r, cost) => c.parseResult(r, cost)),
  },
  checkAll: {
    IS_READ_ONLY: true,
    parseCommand(parser, limiters, opts = {}) {
      const args = c.allOrPolicyArgs(limiters, opts.policy);
      const n = Number(args[0]);
      parser.push("RL.CHECKALL", args[0]);
      parser.pushKeys(args.slice(1, 1 + n));
      parser.push(...args.slice(1 + n), ...c.optionArgs({ cost: opts.cost, shadow: opts.shadow, detail: opts.detail, at: opts.at }));
      parser.preserve = opts.cost ?? 1;
    },
    transformReply: both((r, cost) => c.parseResult(r, cost)),
  },
  limit: {
    IS_READ_ONLY: false,
    parseCommand(parser, key, policy, opts = {}) {
      parser.push("RL.LIMIT");
      parser.pushKey(key);
      parser.push(String(policy), ...c.optionArgs(opts));
      parser.preserve = opts.cost ?? 1;
    },
    transformReply: both((r, cost) => c.parseResult(r, cost)),
  },
  policySet: {
    IS_READ_ONLY: false,
    parseCommand(parser, name, limiters, opts = {}) { parser.push(...c.policySetArgs(name, limiters, opts)); },
    transformReply: both(Number),
  },
  policyGet: {
    IS_READ_ONLY: true,
    parseCommand(parser, name) { parser.push("RL.POLICY", "GET", name); parser.preserve = name; },
    transformReply: both((r, name) => c.parsePolicy(name, r)),
  },
  policyDel: {
    IS_READ_ONLY: false,
    parseCommand(parser, name) { parser.push("RL.POLICY", "DEL", name); },
    transformReply: both((r) => Number(r) === 1),
  },
  policyList: {
    IS_READ_ONLY: true,
    parseCommand(parser) { parser.push("RL.POLICY", "LIST"); },
    transformReply: both(c.parsePolicyList),
  },
  refund: {
    IS_READ_ONLY: false,
    parseCommand(parser, key, units, opts = {}) {
      parser.push("RL.REFUND");
      parser.pushKey(key);
      parser.push(String(units), ...(opts.dedup != null ? ["DEDUP", opts.dedup] : []), ...c.atArgs(opts));
    },
    transformReply: both((r) => c.parseOptionalResult(r, 0)),
  },
  settle: {
    IS_READ_ONLY: false,
    parseCommand(parser, keys, id, units, opts = {}) {
      const args = c.settleArgs(keys, id, units);
      parser.push("RL.SETTLE", args[0]);
      parser.pushKeys(args.slice(1, 1 + keys.length));
      parser.push(...args.slice(1 + keys.length), ...c.atArgs(opts));
    },
    transformReply: both(c.parseSettle),
  },
  block: {
    parseCommand(parser, key, d, opts = {}) {
      parser.push("RL.BLOCK");
      parser.pushKey(key);
      parser.push(c.durationArg(d), ...c.atArgs(opts));
    },
    transformReply: both(Number),
  },
  unblock: {
    parseCommand(parser, key) { parser.push("RL.UNBLOCK"); parser.pushKey(key); },
    transformReply: both((r) => Number(r) === 1),
  },
  acquire: {
    parseCommand(parser, key, limit, lease, id, opts = {}) {
      const s = c.limiters.concurrency(limit, lease);
      parser.push("RL.ACQUIRE");
      parser.pushKey(key);
      parser.push(...s.params, "ID", id, ...c.optionArgs({ cost: opts.cost, peek: opts.peek, shadow: opts.shadow, block: opts.block, detail: opts.detail, at: opts.at }));
      if (opts.wait != null) parser.push("WAIT", c.durationArg(opts.wait));
      parser.preserve = opts.cost ?? 1;
    },
    transformReply: both((r, cost) => c.parseResult(r, cost)),
  },
  release: {
    parseCommand(parser, key, id, opts = {}) {
      parser.push("RL.RELEASE");
      parser.pushKey(key);
      parser.push(id, ...c.atArgs(opts));
    },
    transformReply: both(Number),
  },
  streamCount: {
    parseCommand(parser, key, window, opts = {}) {
      parser.push("RL.STREAMCOUNT");
      parser.pushKey(key);
      parser.push(c.durationArg(window));
      if (opts.add != null && opts.add !== 1) parser.push("ADD", String(opts.add));
      if (opts.limit != null) parser.push("LIMIT", String(opts.limit));
      parser.push(...c.atArgs(opts));
    },
    transformReply: both(c.parseStreamCount),
  },
  throttle: {
    parseCommand(parser, key, maxBurst, countPerPeriod, periodS, quantity = 1) {
      parser.push("CL.THROTTLE");
      parser.pushKey(key);
      parser.push(String(maxBurst), String(countPerPeriod), String(periodS), String(quantity));
    },
    transformReply: both(c.parseThrottle),
  },
  info: {
    IS_READ_ONLY: true,
    parseCommand(parser, key) { parser.push("RL.INFO"); parser.pushKey(key); },
    transformReply: both(c.parseInfo),
  },
};

module.exports = { RateLimitModule };
