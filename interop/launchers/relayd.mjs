// The `relayd` launchers: TODO, for the engineers teaching relayd protocol
// "2" (issue 11). Each must return the same shape as control.mjs:
//   { name, daemonUrl, siteUrl, auditUrls, logs,
//     approve({userCode, owner, runnerId}) -> {device}, stop() }
// `approve` returns the public identity it approved ({identity, encryption,
// encryptionSig}, as the admin listener showed it); the suite checks that its
// key id is the fingerprint `byollm connect` printed.
//
// TODO(relayd-memory): build ./cmd/relayd once (`go build -o <workDir>/relayd
//   ./cmd/relayd` from the repo root), write `fixture` to <workDir>, start it
//   with the memory store, `--protocols 0,2` (or the chosen flag),
//   `--verification-url <any http URL>` (without it `pair start` is 501 and
//   `byollm connect` fails), `--listen 127.0.0.1:<free>` and
//   `--admin-listen 127.0.0.1:<free>`, then wait for /readyz.
//   daemonUrl = siteUrl = the public listener; auditUrls = [it].
//
// TODO(relayd-valkey-3): start one redis-server/valkey-server on a free
//   loopback port (as `make bench` does), then three relayd replicas on it,
//   all reading the same fixture file. daemonUrl = replica 1, siteUrl =
//   replica 2, auditUrls = all three. This is the test that pending pairing
//   codes and jobs really live in the store: the daemon's `start` and `poll`
//   and its claims hit replica 1 while the site enqueues, seals and reads
//   results on replica 2; the approve hook resolves the user code through
//   replica 3's admin listener, so a code minted on replica 1 must be found
//   in the store.
//
// TODO(approve hook) — the one relayd-specific step. The reference relay has
//   no approval route (spec §5.6, decision D3); relayd ships an operator
//   command. Replace the body of `approve` with that command, e.g.
//     relayd pairing approve --admin http://127.0.0.1:<admin> \
//       --fixture <workDir>/fixture.json --user-code <code> \
//       --owner <owner> --runner-id <runnerId>
//   It must resolve the user code on the admin listener, write the device
//   into the fixture with an atomic rename, and every replica's next poll
//   must answer `approved`. relayd already watches its fixture (and re-reads
//   it every --fixture-poll, 5 s by default); the suite gives the daemon 25 s
//   after the approve hook returns to print "paired as".

export async function launch() {
  throw new Error(
    "relayd launcher not implemented yet: relayd does not speak protocol \"2\". " +
      "See interop/launchers/relayd.mjs for what it must do.",
  );
}

export const launchValkey3 = launch;
