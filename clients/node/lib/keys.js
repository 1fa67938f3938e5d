"use strict";
// Client keys from a request: the peer's address (or, behind proxies the app trusts, the address
// the nearest trusted proxy saw), IPv6 addresses reduced to their /56 subnet by default (one
// subscriber usually holds a whole /56 or /48, so keying single IPv6 addresses lets one client
// rotate through 2^72 keys), as express-rate-limit 8 does.

const net = require("node:net");

function ipv6Groups(address) {
  let a = address;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (v4) {
    const o = v4[1].split(".").map(Number);
    a = `${a.slice(0, -v4[1].length)}${((o[0] << 8) | o[1]).toString(16)}:${((o[2] << 8) | o[3]).toString(16)}`;
  }
  const [head, tail] = a.includes("::") ? a.split("::") : [a, null];
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = tail == null ? h : [...h, ...Array(8 - h.length - t.length).fill("0"), ...t];
  return groups.map((g) => parseInt(g, 16));
}

function formatIpv6(groups) {
  // Compress the longest run of two or more zero groups (RFC 5952).
  let best = [-1, 0];
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best[1] && j - i > 1) best = [i, j - i];
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best[0] < 0) return hex.join(":");
  return `${hex.slice(0, best[0]).join(":")}::${hex.slice(best[0] + best[1]).join(":")}`;
}

/** An address as a client key: IPv4 as is (also when written IPv4-mapped, ::ffff:1.2.3.4), IPv6
 * as its subnet of `ipv6Subnet` bits (default 56; 128 keeps the whole address), e.g.
 * "2001:db8:1234:5600::/56". */
function ipKey(address, options = {}) {
  const bits = options.ipv6Subnet ?? 56;
  if (!Number.isInteger(bits) || bits < 1 || bits > 128) throw new RangeError("ipv6Subnet is 1-128 bits");
  let a = String(address ?? "").trim().replace(/%.*$/, "");
  if (a.startsWith("[") && a.endsWith("]")) a = a.slice(1, -1);
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(a);
  if (mapped) return mapped[1];
  if (net.isIPv4(a)) return a;
  if (!net.isIPv6(a)) return a || "unknown";
  const groups = ipv6Groups(a);
  if (bits === 128) return formatIpv6(groups);
  const masked = groups.map((g, i) => {
    const keep = Math.max(0, Math.min(16, bits - 16 * i));
    return keep === 0 ? 0 : g & (0xffff << (16 - keep)) & 0xffff;
  });
  return `${formatIpv6(masked)}/${bits}`;
}

/** The client's address as a key. Without trustProxy: Express' req.ip (which follows the app's
 * own "trust proxy" setting, off by default) or the socket's peer address; X-Forwarded-For is
 * never read. trustProxy: n (the number of proxies in front of the app that append to
 * X-Forwarded-For): the address n hops from the peer, i.e. the one the outermost trusted proxy
 * saw. ipv6Subnet: see ipKey. */
function clientAddress(req, options = {}) {
  const hops = options.trustProxy ?? 0;
  if (!Number.isInteger(hops) || hops < 0) throw new RangeError("trustProxy is the number of trusted proxy hops (an integer >= 0)");
  const peer = req.socket && req.socket.remoteAddress;
  let address;
  if (hops === 0) {
    address = req.ip ?? peer;
  } else {
    const header = req.headers && req.headers["x-forwarded-for"];
    const chain = (Array.isArray(header) ? header.join(",") : header || "").split(",").map((s) => s.trim()).filter(Boolean);
    const all = [...chain, peer];
    address = all[Math.max(0, all.length - 1 - hops)];
  }
  return ipKey(address, options);
}

/** A key function for rateLimit({ key }): clientAddress with these options. */
const byAddress = (options = {}) => (req) => clientAddress(req, options);

module.exports = { ipKey, clientAddress, byAddress };
