"use strict";
// The declarations compile in a project that has none of the optional peers (redis,
// express-rate-limit, ioredis, express) installed, with skipLibCheck off, from CommonJS and from
// ES-module TypeScript alike: a scratch project outside this package's node_modules.

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { execFileSync } = require("node:child_process");

const here = path.resolve(__dirname, "..");

test("index.d.ts compiles without redis, express-rate-limit, ioredis or express (skipLibCheck off)", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rl-types-"));
  try {
    const pkgDir = path.join(dir, "node_modules", "redis-ratelimit-client");
    fs.mkdirSync(path.join(pkgDir, "lib"), { recursive: true });
    // What npm would install: the package's files, no dependencies.
    for (const f of ["package.json", "lib/index.d.ts", "lib/index.js", "lib/index.mjs"]) fs.copyFileSync(path.join(here, f), path.join(pkgDir, f));
    fs.mkdirSync(path.join(dir, "node_modules", "@types"), { recursive: true });
    fs.symlinkSync(path.join(here, "node_modules", "@types", "node"), path.join(dir, "node_modules", "@types", "node"));
    for (const peer of ["redis", "express-rate-limit", "ioredis", "express", "@redis/client"]) {
      assert.throws(() => require.resolve(peer, { paths: [dir] }), `${peer} must not be resolvable from the scratch project`);
    }
    const use = `
      const limiter = new RateLimiter({ call: async (...a: unknown[]) => a });
      const mw = rateLimit({ limiter, limits: { rpm: "60/minute", tpm: gcra(9000, 1500, "1s") }, name: "x", costs: { tpm: () => 3 } });
      const store = new RateLimitStore({ client: { call: async () => 1 }, name: "s" });
      const counter = new SlidingWindowCounterDistributed(limiter, "k", 5, "seconds");
      void [mw, store, counter];
    `;
    fs.writeFileSync(path.join(dir, "cjs.ts"), `import { RateLimiter, rateLimit, gcra, RateLimitStore, SlidingWindowCounterDistributed } from "redis-ratelimit-client";\n${use}`);
    fs.writeFileSync(path.join(dir, "esm.mts"), `import { RateLimiter, rateLimit, gcra, RateLimitStore, SlidingWindowCounterDistributed } from "redis-ratelimit-client";\n${use}`);
    fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, module: "node16", moduleResolution: "node16", target: "es2022", types: ["node"], skipLibCheck: false },
      files: ["cjs.ts", "esm.mts"],
    }));
    const tsc = path.join(here, "node_modules", "typescript", "bin", "tsc");
    try {
      execFileSync(process.execPath, [tsc, "-p", dir], { cwd: dir, encoding: "utf8" });
    } catch (err) {
      assert.fail(`tsc failed:\n${err.stdout}${err.stderr}`);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
