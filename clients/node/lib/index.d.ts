// Type declarations of redis-ratelimit-client (plain CommonJS JavaScript with an ES-module entry).
// They import nothing from the optional peers (redis, express-rate-limit, ioredis, express): the
// shapes used here are declared structurally, so they compile without those packages installed.

/** The part of node-redis' CommandParser that the module's commands use. */
export interface CommandParser {
  push(...args: Array<string | Buffer>): unknown;
  pushKey(key: string | Buffer): unknown;
  pushKeys(keys: string | Buffer | Array<string | Buffer>): unknown;
  preserve: unknown;
}

/** What express-rate-limit's Store methods return. */
export interface ClientRateLimitInfo {
  totalHits: number;
  resetTime: Date | undefined;
}

/** A duration: milliseconds as a number, or a string with a unit ("1500ms", "30s", "1m", "24h", "1d"). */
export type Duration = number | string;
/** A time for AT: Unix milliseconds (fractions down to µs) or a Date. */
export type Time = number | Date;
export type Key = string | Buffer;

/** One limiter of a detailed reply (DETAIL): its name (NAME, else its key), the units asked of
 * it (cost), its own limiter reply, the time over which limit applies (windowMs; 0 for a
 * concurrency limiter) and the policy it came from, if any. */
export interface LimiterDetail {
  readonly name: string;
  readonly key: string;
  readonly cost: number;
  readonly granted: number;
  readonly limit: number;
  readonly remaining: number;
  readonly retryAfterMs: number;
  readonly resetAfterMs: number;
  readonly windowMs: number;
  readonly policy: string | null;
}

export type Reason = "granted" | "limit" | "blocked" | "never" | "shadow";

/** The limiter reply of every RL.* limiter command, from RESP2 and RESP3 alike. */
export declare class Result {
  constructor(granted: number, limit: number, remaining: number, retryAfterMs: number, resetAfterMs: number,
    cost?: number | null, detail?: { deniedBy: string | null; reason: string | null; limiters: LimiterDetail[] } | null);
  /** The whole request was granted. */
  readonly allowed: boolean;
  readonly granted: number;
  readonly limit: number;
  readonly remaining: number;
  /** -1 when the request can never be granted (its cost is above the limit). */
  readonly retryAfterMs: number;
  readonly resetAfterMs: number;
  /** retryAfterMs is -1: waiting will not help; send no Retry-After. */
  readonly never: boolean;
  /** Detailed replies only (detail: true): the name of the limiter that denied the call. */
  readonly deniedBy: string | null;
  /** Detailed replies only: "granted", "limit", "blocked", "never" or "shadow"; null otherwise. */
  readonly reason: Reason | null;
  /** Detailed replies only: one entry per limiter, in key order; empty otherwise. */
  readonly limiters: readonly LimiterDetail[];
  /** Seconds until the same request would pass; null when never. */
  readonly retryAfter: number | null;
  readonly resetAfter: number;
  /** Retry-After in whole seconds rounded up, at least 1; null when allowed or never. */
  readonly retryAfterHeader: number | null;
}

export interface ThrottleResult {
  readonly limited: boolean;
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly retryAfterS: number;
  readonly resetAfterS: number;
}

export interface StreamCount {
  readonly allowed: boolean;
  /** The window's total after the call; null when denied. */
  readonly total: number | null;
}

export interface Info {
  /** "gcra", "fixed", ..., "none" for a key holding only a block. */
  readonly algorithm: string;
  readonly fields: Readonly<Record<string, number | string>>;
}

/** A limiter specification, as RL.ALL and RL.CHECK write it. */
export interface Limiter {
  readonly command: string;
  readonly word: string;
  /** The limit (q of RateLimit-Policy). */
  readonly quota: number;
  /** The time over which quota applies (w); 0 for a concurrency limiter. */
  readonly windowMs: number;
  readonly params: readonly string[];
  /** CHARGE n in RL.ALL / RL.CHECK / RL.CHECKALL: units asked of this limiter instead of the cost. */
  readonly charge: number | null;
  /** NAME name: its name in a detailed reply (the key by default). */
  readonly name: string | null;
}

/** Per-limiter options of RL.ALL, RL.CHECK and RL.CHECKALL. */
export interface SpecOptions {
  /** Units asked of this limiter instead of the call's cost (CHARGE n, n >= 0). */
  charge?: number;
  /** Its name in a detailed reply (NAME; 1-64 of letters, digits, _ - . :). */
  name?: string;
}

/** A calendar window of RL.FIXED, in the time zone tz. */
export type Calendar = "day" | "week" | "month" | "quarter" | "year";

export interface FixedOptions {
  offset?: Duration;
  /** A calendar window's time zone: an IANA name ("Europe/Paris") or an offset ("+05:30"); UTC by default. */
  tz?: string;
  /** A calendar window's start: "mon".."sun" for a week, the day of the month, "04-15" for a year or quarter. */
  anchor?: string | number;
}

export declare function gcra(burst: number, rate: number, period: Duration, options?: SpecOptions): Limiter;
export declare function tokenBucket(capacity: number, refill: number, period: Duration, options?: SpecOptions): Limiter;
export declare function leakyBucket(capacity: number, rate: number, period: Duration, options?: SpecOptions): Limiter;
export declare function fixed(limit: number, window: Duration | Calendar, options?: FixedOptions & SpecOptions): Limiter;
export declare function sliding(limit: number, window: Duration, options?: { precision?: Duration } & SpecOptions): Limiter;
export declare function slidingCounter(limit: number, window: Duration, options?: SpecOptions): Limiter;
export declare function concurrency(limit: number, lease: Duration, options?: SpecOptions): Limiter;
export declare function durationMs(d: Duration): number;

export interface LimiterOptions {
  cost?: number;
  peek?: boolean;
  /** SHADOW: evaluated and charged as an enforced call (one enforcement would deny charges
   * nothing) but never denied; under detail, reason "shadow" and deniedBy the would-be denier. */
  shadow?: boolean;
  bestEffort?: boolean;
  dedup?: string | Buffer;
  /** HOLD ttl (needs dedup): the units granted are a reservation under the dedup id, settled
   * with settle() within ttl or given back when it ends. */
  hold?: Duration;
  block?: Duration;
  at?: Time;
  /** A detailed reply: deniedBy, reason and one entry per limiter (DETAIL). */
  detail?: boolean;
}

/** DELAY d: a request allowed within d is granted now; retryAfterMs is the wait before acting
 * (RL.GCRA, RL.TOKENBUCKET, RL.LEAKYBUCKET and RL.ALL). */
export interface DelayOptions {
  delay?: Duration;
}

/** RL.ALL / RL.CHECKALL under a named policy: pass the keys (one per limiter of the policy, in
 * order) in place of the limiters. */
export interface PolicyOption {
  policy?: string;
}

/** A named policy as RL.POLICY GET replies it. */
export interface PolicyDefinition {
  readonly name: string;
  /** The arguments of the RL.POLICY SET that made it, after the name, as given. */
  readonly args: readonly string[];
  /** SHADOW: no call under it is denied. */
  readonly shadow: boolean;
  /** DESC text. */
  readonly desc: string | null;
}

export interface PolicySetOptions {
  /** SHADOW: every call under the policy behaves as with the shadow option. */
  shadow?: boolean;
  desc?: string;
}

export interface CheckOptions { cost?: number; bestEffort?: boolean; shadow?: boolean; at?: Time; detail?: boolean }
export interface CheckAllOptions { cost?: number; shadow?: boolean; at?: Time; detail?: boolean }
export interface AcquireOptions {
  cost?: number;
  peek?: boolean;
  /** SHADOW: a lease that does not fit is let through, recorded nowhere. */
  shadow?: boolean;
  block?: Duration;
  at?: Time;
  detail?: boolean;
  /** WAIT: block until the lease fits (first come, first served), up to this long. */
  wait?: Duration;
}

export type Limiters = Record<string, Limiter> | ReadonlyArray<readonly [Key, Limiter]>;

export interface Lease {
  readonly id: string;
  readonly result: Result;
  renew(): Promise<Result>;
}

export declare class RateLimitExceeded extends Error {
  constructor(result: Result);
  readonly result: Result;
}

/** Anything with ioredis' call() or node-redis' sendCommand(). */
export type Client = { call(...args: any[]): Promise<unknown> } | { sendCommand(args: any[], ...rest: any[]): Promise<unknown> };

export interface RateLimiterOptions {
  /** How long a call waits for a connection that is not ready (connecting, reconnecting) before it
   * fails with NotConnectedError (default 500 ms). A command is never left in the client's offline
   * queue: it is sent on a ready connection or not at all. */
  timeoutMs?: number;
  /** "auto" (default): the module when COMMAND INFO finds it on the server, else the script
   * backend (lua/ratelimit.lua: RL.GCRA, RL.TOKENBUCKET, RL.FIXED epoch windows,
   * RL.SLIDINGCOUNTER, RL.ALL, RL.CHECK, RL.CHECKALL with cost, peek, bestEffort, detail),
   * decided once per RateLimiter and logged; "module" or "lua" force one. Under the script,
   * anything else rejects with a ModuleRequiredError naming the module. */
  backend?: Backend;
  /** Where the backend choice is logged (info, else warn): console by default. */
  logger?: { info?(message: string): void; warn(message: string): void };
}

export type Backend = "auto" | "module" | "lua";

/** The script backend cannot do this: it needs the redis-ratelimit module. */
export declare class ModuleRequiredError extends Error {}
/** The text of the script backend (lua/ratelimit.lua). */
export declare const SCRIPT: string;

export declare class ModuleNotLoadedError extends Error {}
export declare class NotConnectedError extends Error {}
export declare class LimiterTimeoutError extends Error {}

export declare class RateLimiter {
  constructor(client: Client, options?: RateLimiterOptions);
  readonly client: Client;
  readonly timeoutMs: number;
  /** A view of this limiter whose commands are not sent after deadline (Unix ms). */
  until(deadline: number): RateLimiter;
  /** Resolves when the server has the module (COMMAND INFO rl.gcra); else rejects with a
   * ModuleNotLoadedError that says how to load it. */
  checkModule(): Promise<true>;
  /** The backend that runs this limiter's commands (under "auto", asked of the server once). */
  backend(): Promise<"module" | "lua">;
  /** The key a limiter command writes: key, or the script backend's own key:lua. */
  storageKey(key: Key): Promise<Key>;
  /** Send any command (readiness and deadline as for the module's commands). */
  send(args: ReadonlyArray<string | Buffer>): Promise<unknown>;
  apply(key: Key, spec: Limiter, options?: LimiterOptions & DelayOptions): Promise<Result>;
  gcra(key: Key, burst: number, rate: number, period: Duration, options?: LimiterOptions & DelayOptions): Promise<Result>;
  tokenBucket(key: Key, capacity: number, refill: number, period: Duration, options?: LimiterOptions & DelayOptions): Promise<Result>;
  leakyBucket(key: Key, capacity: number, rate: number, period: Duration, options?: LimiterOptions & DelayOptions): Promise<Result>;
  fixed(key: Key, limit: number, window: Duration | Calendar, options?: LimiterOptions & FixedOptions): Promise<Result>;
  sliding(key: Key, limit: number, window: Duration, options?: LimiterOptions & { precision?: Duration }): Promise<Result>;
  slidingCounter(key: Key, limit: number, window: Duration, options?: LimiterOptions): Promise<Result>;
  all(limiters: Limiters, options?: LimiterOptions & DelayOptions): Promise<Result>;
  /** RL.ALL numkeys key [key ...] POLICY name: one key per limiter of the policy, in order. */
  all(keys: readonly Key[], options: LimiterOptions & DelayOptions & { policy: string }): Promise<Result>;
  check(key: Key, spec: Limiter, options?: CheckOptions): Promise<Result>;
  /** RL.CHECKALL: would all() grant this request? Read-only, runs on replicas. */
  checkAll(limiters: Limiters, options?: CheckAllOptions): Promise<Result>;
  checkAll(keys: readonly Key[], options: CheckAllOptions & { policy: string }): Promise<Result>;
  /** RL.LIMIT key policy: the named one-limiter policy on key, with its limiter's options and reply. */
  limit(key: Key, policy: string, options?: LimiterOptions & DelayOptions): Promise<Result>;
  /** RL.POLICY SET: define or replace a policy (name: 1-64 of a-z, 0-9, _); resolves to its version. */
  policySet(name: string, limiters: Limiter | readonly Limiter[], options?: PolicySetOptions): Promise<number>;
  /** RL.POLICY GET: null for an unknown name. */
  policyGet(name: string): Promise<PolicyDefinition | null>;
  /** RL.POLICY DEL: true if the policy existed; later calls under it fail naming it. */
  policyDel(name: string): Promise<boolean>;
  /** RL.POLICY LIST: every policy's name and version. */
  policyList(): Promise<Record<string, number>>;
  /** RL.POLICY DUMP: every policy as one binary payload. */
  policyDump(): Promise<Buffer>;
  /** RL.POLICY RESTORE: replace every policy with the payload's, or (merge) add or replace only those. */
  policyRestore(payload: Buffer, options?: { merge?: boolean }): Promise<void>;
  refund(key: Key, units: number, options?: { dedup?: string | Buffer; at?: Time }): Promise<Result | null>;
  /** RL.SETTLE: settle the reservation id (hold + dedup) with the units really used, one per
   * key: below the held units the difference comes back, above them the extra is charged (debt).
   * One Result per key (null for a missing key); granted is what the id is charged there. */
  settle(keys: readonly Key[], id: string | Buffer, units: readonly number[], options?: { at?: Time }): Promise<(Result | null)[]>;
  /** Returns the block's remaining ms. */
  block(key: Key, duration: Duration, options?: { at?: Time }): Promise<number>;
  unblock(key: Key): Promise<boolean>;
  acquire(key: Key, limit: number, lease: Duration, id: string | Buffer, options?: AcquireOptions): Promise<Result>;
  release(key: Key, id: string | Buffer, options?: { at?: Time }): Promise<number>;
  withLease<T>(key: Key, limit: number, lease: Duration, fn: (lease: Lease) => Promise<T> | T,
    options?: { id?: string; cost?: number }): Promise<T>;
  streamCount(key: Key, window: Duration, options?: { add?: number; limit?: number; at?: Time }): Promise<StreamCount>;
  throttle(key: Key, maxBurst: number, countPerPeriod: number, periodS: number, quantity?: number,
    options?: { at?: Time }): Promise<ThrottleResult>;
  info(key: Key): Promise<Info | null>;
}

export declare function parseResult(reply: unknown, cost?: number | null): Result;
export declare function parseInfo(reply: unknown): Info | null;

/** A limit: a limiter spec or a limit string ("5/minute": GCRA, bursts of 5, 5 per minute). */
export type Limit = Limiter | string;
export type HeaderStyle = "draft-11" | "draft-7" | "legacy" | "none";

/** "N/second|minute|hour|day" (also N/s, N/m, N/h, N/d, "N per minute") as gcra(N, N, "1<unit>"). */
export declare function parseLimit(text: string): Limiter;

export interface HeaderOptions {
  /** "draft-11" (default), "draft-7", "legacy" or "none". */
  style?: HeaderStyle;
  /** For t: a read-only check (check / checkAll with detail, at the call's time) of
   * remaining + 1 units of each limit, as moreQuotaCharges(result) gives them; without it t is
   * left out unless the limit is full. */
  next?: Result | null;
  /** The client key: adds the draft's pk parameter (a hash of it). */
  partitionKey?: string | null;
  /** Unix ms of the call (legacy's X-RateLimit-Reset). */
  now?: number;
}

/** The header fields of a result (draft-11 by default) and, when denied and not never, Retry-After. */
export declare function rateLimitHeaders(result: Result, limits: Limiter | Record<string, Limiter>, options?: HeaderOptions): Record<string, string>;
/** The units of the check that gives t: remaining + 1 of each limit (one per limiter of a
 * detailed result); null when every limit is full. */
export declare function moreQuotaCharges(result: Result): number[] | null;
/** The draft's pk of a client key: `:` base64 of the first 12 bytes of its SHA-256 `:`. */
export declare function partitionKey(client: string): string;

/** The parts of an HTTP request the address helpers read (Express' and node:http's requests). */
export interface RequestLike {
  ip?: string;
  socket?: { remoteAddress?: string };
  headers?: Record<string, string | string[] | undefined>;
}
export interface AddressOptions {
  /** Proxies in front of the app that append to X-Forwarded-For (default 0: the header is never read). */
  trustProxy?: number;
  /** IPv6 addresses are keyed by this subnet (default 56; 128 for the whole address). */
  ipv6Subnet?: number;
}
/** An address as a client key: IPv4 as is, IPv6 as its /56 ("2001:db8:1234:5600::/56"). */
export declare function ipKey(address: string | undefined, options?: AddressOptions): string;
/** The client's address as a key (see AddressOptions). */
export declare function clientAddress(req: RequestLike, options?: AddressOptions): string;
/** A key function for rateLimit({ key }). */
export declare function byAddress(options?: AddressOptions): (req: RequestLike) => string;

export interface Reserve<Req = any, Res = any> {
  /** How long the reservation is held before it comes back by itself (HOLD). */
  hold: Duration;
  /** The units really used, once the response is finished: one number for every limit, or per
   * limit name (a limit not named keeps what was held). */
  usage: (req: Req, res: Res) => number | Record<string, number> | Promise<number | Record<string, number>>;
}

export interface Logger {
  warn(message: string): void;
  error(message: string): void;
}

export interface RateLimitMiddlewareOptions<Req = any, Res = any> {
  /** The limiter (or give `client`). */
  limiter?: RateLimiter;
  /** An ioredis or node-redis client, when no limiter is given. */
  client?: Client;
  /** The backend of the limiter made from `client` (RateLimiterOptions.backend; default "auto").
   * Under "lua", reserve, block, shadow, at and calendar limits are refused here. */
  backend?: Backend;
  /** One limit (named "default"), a limit string ("5/minute"), or names to limits (RL.ALL). */
  limits: Limit | Record<string, Limit>;
  /** What makes this integration's keys distinct: keys are {prefix}{name}:{client} (one limit) or
   * {prefix}{name}:{{client}}:{limit} (several). Default: derived from the limits' parameters.
   * Two integrations on one key space are refused unless both give the same name. */
  name?: string;
  /** Key prefix (default "rl:"). */
  prefix?: string;
  /** The client key (default: the peer's address, IPv6 by /56; see byAddress for proxies). */
  key?: (req: Req) => string | Promise<string>;
  /** The cost of a request for every limit (default 1). */
  cost?: (req: Req) => number | Promise<number>;
  /** The cost per named limit (e.g. requests and tokens per minute on one route). */
  costs?: Record<string, (req: Req) => number | Promise<number>>;
  /** When Redis cannot answer within timeoutMs: "closed" (default, errorStatus) or "open". */
  fail?: "closed" | "open";
  /** Called with every limiter failure (outage, timeout, module not loaded). */
  onError?: (err: unknown, req: Req) => void;
  /** Where the line is logged when the limiter starts failing (default console). */
  logger?: Logger;
  /** Bound on one limiter call, in ms (default 500). */
  timeoutMs?: number;
  /** Header style (default "draft-11"). */
  headers?: HeaderStyle;
  /** Add the draft's pk (a hash of the client key) to the draft-11 fields. */
  partitionKey?: boolean;
  /** Requests for which this returns true are not limited (and not charged). */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /** Client keys never limited. */
  allowlist?: Iterable<string>;
  /** A retryable denial's status (429). */
  status?: number;
  /** A request that can never pass (its cost is above a limit): 413. */
  neverStatus?: number;
  /** The limiter is down and fail is "closed": 503. */
  errorStatus?: number;
  /** Answer a denied request yourself (the headers are already set). */
  onDenied?: (req: Req, res: Res, result: Result) => void | Promise<void>;
  /** Block the client's denying key(s) for this long when denied (BLOCK). */
  block?: Duration;
  /** Hold before the handler, settle after it with the real usage (HOLD + RL.SETTLE). */
  reserve?: Reserve<Req, Res>;
  /** SHADOW: charged as enforced, never denied (to roll a limit out). */
  shadow?: boolean;
  /** The time of each call (Unix ms, sent as AT): for tests and replays. */
  at?: (req: Req) => number;
}

/** Express middleware; sets req.rateLimit to the Result. */
export declare function rateLimit<Req = any, Res = any>(options: RateLimitMiddlewareOptions<Req, Res>):
  (req: Req, res: Res, next: (err?: unknown) => void) => Promise<void>;

export interface RateLimitStoreOptions {
  client: Client;
  limiter?: RateLimiter;
  /** The backend of the limiter made from `client` (RateLimiterOptions.backend; default "auto"). */
  backend?: Backend;
  /** "fixed" (default: windows aligned to the clock) or "gcra". */
  algorithm?: "fixed" | "gcra";
  /** Key prefix (default "rl:erl:"); keys are {prefix}{name}:{key}. */
  prefix?: string;
  /** Default: derived from algorithm, windowMs (and limit for gcra); two Stores on one key space
   * are refused unless both give the same name. */
  name?: string;
  limit?: number;
  windowMs?: number;
  /** Bound on one call, in ms (default 500); the command is never sent after it. */
  timeoutMs?: number;
}

/** An express-rate-limit Store backed by RL.FIXED or RL.GCRA. */
export declare class RateLimitStore {
  constructor(options: RateLimitStoreOptions);
  localKeys: boolean;
  prefix: string;
  init(options: { windowMs: number; limit?: unknown }): void;
  increment(key: string): Promise<ClientRateLimitInfo>;
  get(key: string): Promise<ClientRateLimitInfo | undefined>;
  decrement(key: string): Promise<void>;
  resetKey(key: string): Promise<void>;
}

export type WindowUnit = "milliseconds" | "millisecond" | "ms" | "seconds" | "second" | "s" | "minutes" | "minute" | "m"
  | "hours" | "hour" | "h" | "days" | "day" | "d";

/** counter-sliding-window's in-memory counter. */
export declare class SlidingWindowCounterLocal {
  constructor(windowSize: number, unit?: WindowUnit, options?: { now?: () => number });
  add(n?: number): number;
  get(): number;
}

/** counter-sliding-window's distributed counter, on RL.STREAMCOUNT (the same stream layout). */
export declare class SlidingWindowCounterDistributed {
  constructor(client: Client | RateLimiter, key: string, windowSize: number, unit?: WindowUnit,
    options?: RateLimiterOptions & { now?: () => number });
  /** Count n (default 1) now; the window's total after. */
  add(n?: number): Promise<number>;
  /** The window's total. */
  get(): Promise<number>;
  /** Count n only if the total stays within limit; false (nothing counted) otherwise. */
  tryAdd(n: number, limit: number): Promise<boolean>;
}
export { SlidingWindowCounterDistributed as SlidingWindowCounterRedis };

interface ModuleCommand<A extends unknown[], R> {
  IS_READ_ONLY?: boolean;
  parseCommand(this: void, parser: CommandParser, ...args: A): void;
  transformReply: { 2: (reply: any, preserve?: any) => R; 3: (reply: any, preserve?: any) => R };
}

/** A node-redis v5 module: createClient({ modules: { rl: RateLimitModule } }), then client.rl.gcra(...). */
export declare const RateLimitModule: {
  gcra: ModuleCommand<[key: Key, burst: number, rate: number, period: Duration, options?: LimiterOptions & DelayOptions], Result>;
  tokenBucket: ModuleCommand<[key: Key, capacity: number, refill: number, period: Duration, options?: LimiterOptions & DelayOptions], Result>;
  leakyBucket: ModuleCommand<[key: Key, capacity: number, rate: number, period: Duration, options?: LimiterOptions & DelayOptions], Result>;
  fixed: ModuleCommand<[key: Key, limit: number, window: Duration | Calendar, options?: LimiterOptions & FixedOptions], Result>;
  sliding: ModuleCommand<[key: Key, limit: number, window: Duration, options?: LimiterOptions & { precision?: Duration }], Result>;
  slidingCounter: ModuleCommand<[key: Key, limit: number, window: Duration, options?: LimiterOptions], Result>;
  all: ModuleCommand<[limiters: Limiters | readonly Key[], options?: LimiterOptions & DelayOptions & PolicyOption], Result>;
  check: ModuleCommand<[key: Key, spec: Limiter, options?: CheckOptions], Result>;
  checkAll: ModuleCommand<[limiters: Limiters | readonly Key[], options?: CheckAllOptions & PolicyOption], Result>;
  limit: ModuleCommand<[key: Key, policy: string, options?: LimiterOptions & DelayOptions], Result>;
  policySet: ModuleCommand<[name: string, limiters: Limiter | readonly Limiter[], options?: PolicySetOptions], number>;
  policyGet: ModuleCommand<[name: string], PolicyDefinition | null>;
  policyDel: ModuleCommand<[name: string], boolean>;
  policyList: ModuleCommand<[], Record<string, number>>;
  refund: ModuleCommand<[key: Key, units: number, options?: { dedup?: string | Buffer; at?: Time }], Result | null>;
  settle: ModuleCommand<[keys: readonly Key[], id: string | Buffer, units: readonly number[], options?: { at?: Time }], (Result | null)[]>;
  block: ModuleCommand<[key: Key, duration: Duration, options?: { at?: Time }], number>;
  unblock: ModuleCommand<[key: Key], boolean>;
  acquire: ModuleCommand<[key: Key, limit: number, lease: Duration, id: string | Buffer, options?: AcquireOptions], Result>;
  release: ModuleCommand<[key: Key, id: string | Buffer, options?: { at?: Time }], number>;
  streamCount: ModuleCommand<[key: Key, window: Duration, options?: { add?: number; limit?: number; at?: Time }], StreamCount>;
  throttle: ModuleCommand<[key: Key, maxBurst: number, countPerPeriod: number, periodS: number, quantity?: number], ThrottleResult>;
  info: ModuleCommand<[key: Key], Info | null>;
};

/** Add the commands to an ioredis client as built-ins ("rl.gcra", ...) with reply transformers;
 * `Command` is ioredis' export of that name. */
export declare function installIoredis<T>(redis: T, Command: { setReplyTransformer(name: string, fn: (reply: any) => any): void }): T;
