// Package peer holds the Go peers of the relay: a test site and a test
// daemon that talk to a relay over real HTTP the way byollm peers do. They
// sign requests, seal payloads and results into envelopes, and open the
// envelopes sealed to them.
//
// This is the peer side of the protocol, so it holds private keys and sees
// plaintexts. The relay must never import it: the relay is blind by design
// and no type it uses may carry a private key or an opened envelope. The
// package exists for end-to-end tests, the demo command and the benchmark
// tool.
//
// The pieces:
//
//   - Keys: an Ed25519 identity key and an X25519 encryption key, with the
//     public identity and key id derived from them, and LoadDemoKeys for the
//     deploy/demo-keys.json file.
//   - Seal and Open: sealed envelopes byte for byte as crypto.md describes.
//   - Daemon and Site: typed HTTP clients for every endpoint of their plane,
//     which return the decoded success body or an *Error, plus the Site's
//     Await/Send helpers for driving whole jobs.
//   - Daemon2 and Site2: the same for protocol "2", as the published
//     byollm 0.1.1 daemon and @byollm/server 0.1.1 site send it: the
//     fixture and device-code pairings, many pinned sites, stubs keyed by
//     (site, id), and every answer read with protocol/proto2's strict
//     decoders.
//   - Work: the one lifecycle of a held job (fetch, open, run, seal,
//     result, release on failure), shared by both protocols' daemons, that
//     the tests (through RunOnce), the demo and the workload all drive,
//     with Steps to pace and watch it.
//   - Transport.Raw, Daemon.Do and Site.Do: escape hatches for the malformed,
//     unsigned and wrongly signed requests that tests need to send.
package peer
