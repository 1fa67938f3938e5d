"use strict";
// Every ```js snippet of README.md, run against a real server with the module (REDIS_URL). A
// snippet that continues an earlier one finds `limiter` (a RateLimiter on that server) and the
// package's exports in scope; an ES-module snippet (import ...) runs as a .mjs file of the package.
// Clients and servers the snippets open are closed after each.

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { createRequire } = require("node:module");
const rl = require("..");
const { startServer } = require("./server");

const readme = fs.readFileSync(path.join(__dirname, "..", "README.md"), "utf8");
const snippets = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;

let server;
test.before(async () => {
  server = await startServer();
  process.env.REDIS_URL = server.url;
});
test.after(async () => { await server.stop(); });

// require() for the snippets: the real packages, with what they open recorded to be closed.
function tracking(opened) {
  const real = createRequire(__filename);
  const Redis = real("ioredis");
  class TrackedRedis extends Redis {
    constructor(...args) {
      super(...args);
      opened.push(() => this.disconnect());
    }
  }
  const redis = real("redis");
  const express = real("express");
  const trackedExpress = Object.assign((...args) => {
    const app = express(...args);
    const listen = app.listen.bind(app);
    app.listen = (...a) => {
      const s = listen(...a);
      opened.push(() => s.close());
      return s;
    };
    return app;
  }, express);
  return (name) => {
    if (name === "ioredis") return TrackedRedis;
    if (name === "redis") {
      return { ...redis, createClient: (...a) => { const c = redis.createClient(...a); opened.push(() => c.isOpen && c.destroy()); return c; } };
    }
    if (name === "express") return trackedExpress;
    return real(name);
  };
}

test("README.md has the snippets this test runs", () => {
  assert.ok(snippets.length >= 9, `${snippets.length} snippets`);
});

snippets.forEach((code, i) => {
  const title = code.split("\n").find((l) => l.trim() && !l.startsWith("//")) || "";
  test(`README snippet ${i + 1}: ${title.slice(0, 70)}`, async () => {
    const opened = [];
    try {
      if (/^import /m.test(code)) {
        const file = path.join(__dirname, `.readme-${process.pid}-${i}.mjs`);
        fs.writeFileSync(file, code);
        try {
          await import(file);
        } finally {
          fs.rmSync(file, { force: true });
        }
        return;
      }
      const req = tracking(opened);
      const Redis = req("ioredis");
      const limiter = new rl.RateLimiter(new Redis(process.env.REDIS_URL));
      const names = Object.keys(rl).filter((n) => /^[A-Za-z_$][\w$]*$/.test(n));
      const run = new AsyncFunction("require", "limiter", "tokens", ...names, `{\n${code}\n}`);
      await run(req, limiter, 3000, ...names.map((n) => rl[n]));
    } finally {
      for (const close of opened) await close();
    }
  });
});
