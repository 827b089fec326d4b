// versioncheck: the differential oracle of versions_test.go. It reads a
// JSON list of [a, b] pairs on stdin and writes a JSON list, one entry a
// pair, of [compareVersions(a, b) or null, checkDaemonFloor's floor or
// null, updateOfferFor({offer: b, daemonVersion: a}).updateTo or null],
// from the published @byollm/protocol 0.1.1.
//
// Usage: node versioncheck.mjs <interop dir holding node_modules>
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const dir = join(process.argv[2], "node_modules", "@byollm/protocol/dist/index.js");
const p = await import(pathToFileURL(dir).href);
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const pairs = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const out = pairs.map(([a, b]) => [
  p.compareVersions(a, b) ?? null,
  p.checkDaemonFloor({ daemonVersion: a, floor: b, upgradeCommand: "x" })?.floor ?? null,
  p.updateOfferFor({ offer: b, daemonVersion: a }).updateTo ?? null,
]);
process.stdout.write(JSON.stringify(out));
