// Package admission is relayd as its own grant author on protocol "2"
// (docs/grants.md, spec grants.md): the law that decides whether a claimed
// job may be admitted onto a device (Law.Decide), the exact bytes of a
// signed grant (Statement), and the one place relayd's grant signing key
// lives (Signer, KeyRing, LoadKeyRing).
//
// The key never leaves this package: a KeyRing hands out Signers, whose
// only operations are "give me your public key" and "sign these bytes".
// Every type here that holds a private key redacts itself when printed or
// logged.
//
// The word is "signed grant": relayd already calls a lease a grant
// (protocol.LeaseRef, relayd_claims_granted_total).
package admission
