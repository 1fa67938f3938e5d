"use strict";

const core = require("./core");
const { RateLimiter, RateLimitExceeded } = require("./client");
const { rateLimitHeaders, moreQuotaCharges, partitionKey } = require("./headers");
const { rateLimit } = require("./express");
const { RateLimitStore } = require("./store");
const { RateLimitModule } = require("./node-redis");
const { installIoredis } = require("./ioredis");
const { parseLimit } = require("./limits");
const { ipKey, clientAddress, byAddress } = require("./keys");
const { ModuleNotLoadedError, NotConnectedError, LimiterTimeoutError } = require("./errors");
const { ModuleRequiredError, SCRIPT } = require("./backend");
const { SlidingWindowCounterLocal, SlidingWindowCounterDistributed, SlidingWindowCounterRedis } = require("./counter");
const { gcra, tokenBucket, leakyBucket, fixed, sliding, slidingCounter, concurrency } = core.limiters;
const { Result, parseResult, parseInfo, durationMs } = core;

// One object literal of names (no spreads, no computed keys): Node reads these names from the
// source to give ES-module importers their named exports (lib/index.mjs: export *).

module.exports = {
  RateLimiter,
  RateLimitExceeded,
  ModuleNotLoadedError,
  ModuleRequiredError,
  SCRIPT,
  NotConnectedError,
  LimiterTimeoutError,
  Result,
  parseResult,
  parseInfo,
  durationMs,
  gcra,
  tokenBucket,
  leakyBucket,
  fixed,
  sliding,
  slidingCounter,
  concurrency,
  parseLimit,
  rateLimitHeaders,
  moreQuotaCharges,
  partitionKey,
  rateLimit,
  RateLimitStore,
  RateLimitModule,
  installIoredis,
  ipKey,
  clientAddress,
  byAddress,
  SlidingWindowCounterLocal,
  SlidingWindowCounterDistributed,
  SlidingWindowCounterRedis,
};
