// ES-module entry: every export of the CommonJS package by name (import { rateLimit, gcra }), as
// Node reads them from index.js's one object literal, and the whole object as the default export.
export * from "./index.js";
export { default } from "./index.js";
