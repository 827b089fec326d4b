// The control's grant author (spec grants.md G-R58): the published
// @byollm/control-plane 0.1.1 engine over its own MemoryPolicyStore, fed the
// same facts the suite writes into relayd's fixture. relayd keeps policy in
// its fixture (consents[].mappings, devices[].grantKey, G-R24); the reference
// relay's fixture refuses both fields (G-R25), so they are stripped from what
// the relay projects and translated into store calls here.
import { createPrivateKey, createPublicKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { ControlPlane, MemoryPolicyStore, keypairSigner } from "@byollm/control-plane";

/**
 * The signer for the PEM PKCS#8 Ed25519 file relayd reads, as the
 * protocol's StoredKeys halves: base64 PKCS#8 DER private
 * (protocol/keys.ts importPrivate), base64url raw public.
 */
export function signerFromPem(path) {
  const key = createPrivateKey(readFileSync(path));
  return keypairSigner({
    identityPrivate: key.export({ type: "pkcs8", format: "der" }).toString("base64"),
    identityPublic: createPublicKey(key).export({ format: "jwk" }).x,
  });
}

/** relayd's fixture without its relayd-only fields, for the reference relay. */
export function referenceFixture(fixture) {
  return {
    ...fixture,
    consents: (fixture.consents ?? []).map(({ mappings: _m, ...consent }) => consent),
    devices: (fixture.devices ?? []).map(({ grantKey: _k, ...device }) => device),
  };
}

/**
 * A MemoryPolicyStore holding the fixture's policy: each consent with its
 * mappings (`serviceOwner` absent is the reference's `owner: null`), a pause
 * as a pause, a revocation as a withdrawal, and every roster member as a
 * member of the roster owner's team.
 */
export function policyStoreFrom(fixture) {
  const store = new MemoryPolicyStore();
  for (const consent of fixture.consents ?? []) {
    const mappings = (consent.mappings ?? []).map((m) => ({
      purpose: m.purpose,
      kind: m.kind,
      service: m.service,
      owner: m.serviceOwner ?? null,
    }));
    store.consent({ siteId: consent.siteId, user: consent.owner, mappings });
    if (consent.paused) store.pause({ siteId: consent.siteId, user: consent.owner });
  }
  for (const revoked of fixture.revoked ?? []) store.revoke({ siteId: revoked.siteId, user: revoked.owner });
  for (const roster of fixture.rosters ?? []) {
    for (const member of roster.members) store.addMember({ owner: roster.owner, user: member });
  }
  return store;
}

/**
 * The engine the relay's authorGrant calls, rebuilt over a fresh store
 * whenever the policy changes, with one signer throughout. Every decision is
 * logged (never the grant's signature) for the suite to read, as relayd's
 * metrics are read.
 */
export class GrantAuthor {
  #signer;
  #engine;
  decisions = [];

  constructor(signer, fixture) {
    this.#signer = signer;
    this.setPolicy(fixture);
  }

  get publicKey() {
    return this.#signer.publicKey;
  }

  setPolicy(fixture) {
    this.#engine = new ControlPlane({ store: policyStoreFrom(fixture), signer: this.#signer });
  }

  /** The relay's GrantAuthor seam (relay/index.ts): the engine ignores runnerId. */
  async author(input) {
    const outcome = await this.#engine.authorGrant(input);
    this.decisions.push({
      at: Date.now(),
      runnerId: input.runnerId,
      owner: input.owner,
      user: input.job.owner,
      jobId: input.job.id,
      granted: outcome.granted !== undefined,
      ...(outcome.declined ? { reason: outcome.declined.reason, permanent: outcome.declined.permanent } : {}),
    });
    return outcome;
  }
}
