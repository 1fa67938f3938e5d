// The package in ES-module mode, as an application imports it: named exports at run time (not
// only in the types), the same objects as require() gives, and a middleware that works.
import test from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { rateLimit, gcra, RateLimiter, RateLimitStore, SlidingWindowCounterDistributed, parseLimit } from "redis-ratelimit-client";
import pkg from "redis-ratelimit-client";

const require = createRequire(import.meta.url);

test("import { rateLimit, gcra } works at run time, and every CommonJS export is a named export", async () => {
  const cjs = require("redis-ratelimit-client");
  assert.equal(typeof rateLimit, "function");
  assert.deepEqual(gcra(5, 5, "1m"), parseLimit("5/minute"));
  assert.equal(pkg, cjs);
  const esm = await import("redis-ratelimit-client");
  for (const name of Object.keys(cjs)) assert.equal(esm[name], cjs[name], `named export ${name}`);
  assert.equal(RateLimiter, cjs.RateLimiter);
  assert.equal(RateLimitStore, cjs.RateLimitStore);
  assert.equal(SlidingWindowCounterDistributed, cjs.SlidingWindowCounterDistributed);
});
