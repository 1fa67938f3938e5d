// Types of redis-ratelimit-client/metrics (lib/metrics.js).
import { EventEmitter } from "node:events";

export interface RequestEvent {
  /** The command sent, lower case: "rl.gcra", "rl.limit", "cl.throttle", ... */
  command: string;
  /** The named policy ("" without one). */
  policy: string;
  result: "acquired" | "limited";
  /** Granted with remaining below nearLimitPercent of the limit. */
  near: boolean;
}

export interface QueuedEvent {
  delta: 1 | -1;
  waiting: number;
}

export interface TimeInQueueEvent {
  seconds: number;
  result: "acquired" | "limited";
}

export interface RateLimitMetricsOptions {
  /** 0 to 100, default 20 (the server's ratelimit.near-limit-percent default). */
  nearLimitPercent?: number;
  /** Where an error thrown by a listener goes (default: process.emitWarning). */
  onError?: (err: unknown) => void;
}

export declare class RateLimitMetrics extends EventEmitter {
  constructor(opts?: RateLimitMetricsOptions);
  readonly nearLimitPercent: number;
  /** acquire(..., { wait }) calls waiting now. */
  readonly waiting: number;
  on(event: "request", listener: (e: RequestEvent) => void): this;
  on(event: "queued", listener: (e: QueuedEvent) => void): this;
  on(event: "timeInQueue", listener: (e: TimeInQueueEvent) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  /** Count one limiter reply of `command` under `policy`. */
  record(command: string, policy: string | null | undefined, result: { allowed: boolean; remaining: number; limit: number }): void;
  /** The limiter with every limiter call counted: same methods, replies and errors. */
  instrument<T extends object>(limiter: T): T;
}

export interface PromClientLike {
  register: unknown;
  Counter: new (config: any) => any;
  Gauge: new (config: any) => any;
  Histogram: new (config: any) => any;
}

/** Register prom-client metrics fed by `metrics`: ratelimit_requests_total{command,policy,result},
 * ratelimit_near_limit_requests_total{command,policy}, ratelimit_queued_requests,
 * ratelimit_request_time_in_queue_seconds{result}. */
export declare function promClientMetrics(
  metrics: RateLimitMetrics,
  promClient: PromClientLike,
  opts?: { registers?: unknown[]; buckets?: number[] },
): { requests: any; near: any; queued: any; waited: any };

/** A grant leaving `remaining` below `percent`% of `limit` (the module's rule). */
export declare function nearLimit(remaining: number, limit: number, percent: number): boolean;

export declare const COMMANDS: Readonly<Record<string, string | null>>;
