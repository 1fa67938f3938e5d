// Compile-time checks of the declarations (tsc --noEmit): how applications use the package.
import Redis from "ioredis";
import { createClient } from "redis";
import express from "express";
import { rateLimit as expressRateLimit } from "express-rate-limit";
import {
  RateLimiter, RateLimitModule, RateLimitStore, Result, gcra, fixed, rateLimit, rateLimitHeaders,
  installIoredis, RateLimitExceeded, tokenBucket, LimiterDetail, Reason, PolicyDefinition,
  byAddress, ipKey, parseLimit, SlidingWindowCounterDistributed, SlidingWindowCounterLocal,
} from "redis-ratelimit-client";

async function usage(): Promise<void> {
  const io = new Redis();
  const limiter = new RateLimiter(io);
  const r: Result = await limiter.gcra("user:42", 10, 5, "1s", { cost: 2 });
  const wait: number | null = r.retryAfter;
  const header: number | null = r.retryAfterHeader;
  const never: boolean = r.never;
  void [wait, header, never];
  const all = await limiter.all({ "{u}:s": gcra(10, 10, "1s"), "{u}:d": fixed(1000, "1d") });
  const headers: Record<string, string> = rateLimitHeaders(all, { burst: gcra(10, 10, "1s") });
  void headers;
  const held: string = await limiter.withLease("jobs", 5, "30s", async (lease) => {
    await lease.renew();
    return lease.id;
  });
  void held;
  try { await limiter.withLease("jobs", 5, "30s", () => 1); } catch (e) {
    if (e instanceof RateLimitExceeded) void e.result.retryAfterMs;
  }
  installIoredis(io, Redis.Command);

  const specs = { "{t}:rpm": gcra(60, 60, "1m", { name: "rpm" }), "{t}:tpm": tokenBucket(9000, 1500, "1s", { name: "tpm", charge: 3000 }) };
  const detailed = await limiter.all(specs, { detail: true, delay: "1s" });
  const entries: readonly LimiterDetail[] = detailed.limiters;
  const reason: Reason | null = detailed.reason;
  const deniedBy: string | null = detailed.deniedBy;
  const checked: Result = await limiter.checkAll(specs, { cost: 2, detail: true });
  const month: Result = await limiter.fixed("m", 10000, "month", { tz: "Europe/Paris", anchor: 15, detail: true });
  const waited: Result = await limiter.acquire("jobs", 5, "30s", "id", { wait: "2s", detail: true });
  const quota = fixed(10, "year", { anchor: "04-15", name: "yearly", charge: 2 });
  void [entries, reason, deniedBy, checked, month, waited, quota.name, quota.charge];

  const reserved: Result = await limiter.all(specs, { dedup: "req-1", hold: "30s", detail: true });
  const settled: (Result | null)[] = await limiter.settle(["{t}:rpm", "{t}:tpm"], "req-1", [1, 2400], { at: Date.now() });
  const bucket: Result = await limiter.tokenBucket("t", 100, 100, "1h", { cost: 40, dedup: "r", hold: 5000 });
  void [reserved, settled, bucket];

  const shadowed: Result = await limiter.gcra("k", 10, 5, "1s", { shadow: true, detail: true });
  const wouldDeny: boolean = shadowed.reason === "shadow";
  const shadowAll: Result = await limiter.all(specs, { shadow: true, delay: "1s" });
  const shadowCheck: Result = await limiter.check("k", gcra(10, 5, "1s"), { shadow: true });
  const shadowCheckAll: Result = await limiter.checkAll(specs, { shadow: true });
  const shadowLease: Result = await limiter.acquire("jobs", 5, "30s", "id", { shadow: true });
  void [wouldDeny, shadowAll, shadowCheck, shadowCheckAll, shadowLease];

  const version: number = await limiter.policySet("pro", [gcra(100, 50, "1s"), fixed(10000, "day", { name: "daily" })], { shadow: true, desc: "paid" });
  const def: PolicyDefinition | null = await limiter.policyGet("pro");
  const versions: Record<string, number> = await limiter.policyList();
  const removed: boolean = await limiter.policyDel("pro");
  const payload: Buffer = await limiter.policyDump();
  await limiter.policyRestore(payload, { merge: true });
  const limited: Result = await limiter.limit("user:42", "free", { cost: 2, detail: true });
  const underPolicy: Result = await limiter.all(["{u}:rps", "{u}:day"], { policy: "pro", detail: true });
  const checkedPolicy: Result = await limiter.checkAll(["{u}:rps", "{u}:day"], { policy: "pro" });
  void [version, def?.shadow, versions, removed, limited, underPolicy, checkedPolicy];

  const nr = createClient({ modules: { rl: RateLimitModule } });
  const res: Result = await nr.rl.gcra("k", 10, 5, "1s", { at: Date.now() });
  const refund: Result | null = await nr.rl.refund("k", 1);
  const nrCheck: Result = await nr.rl.checkAll(specs, { detail: true });
  const nrSettle: (Result | null)[] = await nr.rl.settle(["{t}:tpm"], "req-1", [2400]);
  const nrShadow: Result = await nr.rl.checkAll(specs, { shadow: true });
  const nrLimit: Result = await nr.rl.limit("k", "free", { at: Date.now() });
  const nrPolicy: Result = await nr.rl.all(["{u}:rps", "{u}:day"], { policy: "pro" });
  const nrVersions: Record<string, number> = await nr.rl.policyList();
  void [nrCheck, nrSettle, nrShadow, nrLimit, nrPolicy, nrVersions];
  const plain = new RateLimiter(createClient());
  void [res, refund, plain];

  const app = express();
  app.use(rateLimit({ limiter, limits: gcra(5, 5, "10s"), name: "api", key: (req: express.Request) => req.ip ?? "", fail: "open", timeoutMs: 200,
    onError: (err, req) => void [err, req.path], logger: console, headers: "draft-7", partitionKey: true }));
  app.use(rateLimit({ client: io, limits: { rpm: "60/minute", tpm: tokenBucket(90000, 1500, "1s") }, name: "llm",
    costs: { tpm: (req: express.Request) => Number(req.get("X-Tokens")) }, block: "10m", skip: (req) => req.path === "/health",
    allowlist: ["10.0.0.1"], status: 429, neverStatus: 413, errorStatus: 503, key: byAddress({ trustProxy: 1, ipv6Subnet: 64 }),
    onDenied: (req, res: express.Response, result) => { res.json({ wait: result.retryAfter }); },
    reserve: { hold: "30s", usage: (req, res: express.Response) => ({ tpm: Number(res.get("X-Used-Tokens")) }) },
    at: () => Date.now() }));
  const fields: Record<string, string> = rateLimitHeaders(all, gcra(5, 5, "10s"), { style: "legacy", next: null, partitionKey: "k" });
  const subnet: string = ipKey("2001:db8::1");
  const counter = new SlidingWindowCounterDistributed(io, "calls", 5, "seconds");
  const total: number = await counter.add(2) + await counter.get();
  const local: number = new SlidingWindowCounterLocal(5, "seconds").add(1);
  const ok: boolean = await counter.tryAdd(1, 10);
  void [fields, subnet, total, local, ok, parseLimit("5/minute").quota];
  app.use(expressRateLimit({ windowMs: 60_000, limit: 100, store: new RateLimitStore({ client: io }) }));
}
void usage;
