// What the grants suites share: a fresh grant key and the team's facts.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { generateKeyPairSync } from "node:crypto";

/**
 * A fresh grant key in dir: the PEM PKCS#8 file relayd reads (grant.pem),
 * and the raw public key (unpadded base64url) a daemon pins.
 */
export async function grantKey(dir) {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const path = join(dir, "grant.pem");
  await writeFile(path, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o400 });
  return { path, public: publicKey.export({ format: "jwk" }).x };
}

/**
 * The team's fixture: one site, bob's roster listing alice, and alice's
 * default generate work mapped to bob's `echo`, bob's to his own.
 */
export function teamFixture(siteId, siteIdentity) {
  return {
    sites: [{ siteId, site: siteIdentity }],
    consents: [
      { owner: "alice", siteId, mappings: [{ purpose: "default", kind: "llm.generate", service: "echo", serviceOwner: "bob" }] },
      { owner: "bob", siteId, mappings: [{ purpose: "default", kind: "llm.generate", service: "echo" }] },
    ],
    rosters: [{ id: "team_bob", owner: "bob", members: ["alice"] }],
    devices: [],
  };
}
