"use strict";
// Start redis-server with the module (RL_MODULE, RL_SERVER) on a free 127.0.0.1 port.

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function ping(port) {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1");
    sock.once("connect", () => sock.write("PING\r\n"));
    sock.once("data", (d) => { sock.destroy(); resolve(d.toString().startsWith("+PONG")); });
    sock.once("error", () => resolve(false));
  });
}

/** Start a server (with the module unless options.module is false) on options.port or a free
 * port. stop() ends it; the same port can then be used by another startServer. */
async function startServer(moduleArgs = ["at-max-ahead", "-1"], options = {}) {
  const module = process.env.RL_MODULE;
  if (!module || !fs.existsSync(module)) throw new Error(`RL_MODULE must name the module .so (got ${module})`);
  const port = options.port ?? await freePort();
  const load = options.module === false ? [] : ["--loadmodule", path.resolve(module), ...moduleArgs];
  const dir = options.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), "rl-node-"));
  const env = { ...process.env };
  if (process.env.RL_LD_LIBRARY_PATH) env.LD_LIBRARY_PATH = process.env.RL_LD_LIBRARY_PATH;
  const proc = spawn(process.env.RL_SERVER || "redis-server", [
    "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
    "--enable-debug-command", "local", ...load,
  ], { env, stdio: "ignore" });
  const end = Date.now() + 10000;
  while (!(await ping(port))) {
    if (Date.now() > end || proc.exitCode !== null) throw new Error(`redis-server did not start on ${port}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    /** Stop it; keep: true keeps its directory (a SAVE made before is loaded by the next start
     * given that dir). */
    async stop({ keep = false, signal = "SIGTERM" } = {}) {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill(signal);
        await exited;
      }
      if (!keep) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A time (Unix ms) a little ahead of the server's clock, on a whole second. */
const pinnedNow = () => (Math.floor(Date.now() / 1000) + 2) * 1000;

module.exports = { startServer, freePort, pinnedNow };
