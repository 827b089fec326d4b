package valkey

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"

	"github.com/byollm/relayd/store"
)

// A write a client may retry after a lost reply answers that retry with
// its first answer, kept in a memo per caller and operation (answer_once
// in store/lua/common/60_calls.lua): one small hash per runner, site or pairing device and
// each operation it called in the last rememberFor, holding its newest
// answers. The memo thus costs O(active callers), whatever the call rate.
// It is a key of its own, not a field of a per-caller hash, so that each
// one expires on its own and a caller's busy operation never keeps its
// idle ones alive.

// memoCaller names, for each remembering write, whose memo keeps its
// answers: the runner for daemon-plane writes, the site for site-plane
// writes, the device identity for a pairing start. Reads are not
// remembered, nor are the writes in answersAlike.
var memoCaller = map[store.Op]string{
	store.OpClaim: "r", store.OpRenew: "r", store.OpPair: "r", store.OpTouch: "r",
	store.OpResult: "r", store.OpRelease: "r", store.OpCancelRequests: "r", store.OpHeartbeat: "r",
	store.OpPayload: "s", store.OpEnqueue: "s", store.OpCancel: "s",
	store.OpStartPairing: "p",
}

// memoAnswers is how many answers of one operation a caller's memo keeps,
// by kind of caller: as many calls of that operation as one caller may
// make while one of them is retried, for a retry of call A after the
// caller's calls B, C... ran must still find A. valkey-go re-sends after
// a reconnect, within its retry delays (about 150 ms in all), while the
// caller's other calls go on. A runner calls little at once (its claim
// loop, its heartbeat, a result per job it runs); a site serves many
// users at once, a few thousand writes a second at most from one relay
// fleet; a pairing device starts one code at a time. The depth costs
// memory only: a call reads its own answer, not the memo.
var memoAnswers = map[string]int{"r": 16, "s": 512, "p": 2}

// memoBytes bounds the answers one memo keeps (the newest is always kept),
// so that a runner's large claims cost a bounded memo.
const memoBytes = 64 << 10

// answersAlike are the writes that keep no memo: a re-run of fetch, of
// dropPairing or of approvePairing answers as the first run did from the
// state it left, and
// the lookups of pending codes change nothing but judge expiry. A sweep
// has no caller to keep a memo for, and its answer only feeds logs and
// metrics: a retried sweep answers what is due by then. Storing a claim's
// route list again stores the same set. A re-run settle finds its granted
// jobs unheld and answers them again, and its released ones no longer
// held by the runner under those leases, so it acts on nothing
// (settleGrants.lua); a memo would cost it half its time.
var answersAlike = []store.Op{store.OpFetch, store.OpDropPairing, store.OpApprovePairing, store.OpSweep,
	store.OpPairingByDeviceCode, store.OpPairingByUserCode, opRoutes, store.OpSettleGrants}

// neverResent are the writes valkey-go never re-sends after a lost reply
// (their scripts are not retryable): a limiter's charge, whose caller is
// refused once rather than charged twice.
var neverResent = []store.Op{opBucket}

// memoHeader binds what answer_once reads in op's script.
func memoHeader(op store.Op) string {
	return "local REQ_ID = table.remove(ARGV, 1)\n" +
		"local MEMO_ANSWERS = " + strconv.Itoa(memoAnswers[memoCaller[op]]) + "\n" +
		"local MEMO_BYTES = " + strconv.Itoa(memoBytes) + "\n"
}

// memoKeyPrefix starts every memo's key under the store's prefix. The
// memos were strings under "memo:" before they were hashes; a new name
// keeps a relay of either kind from meeting the other's during a rolling
// upgrade (a retry is re-sent by the relay that made the call).
const memoKeyPrefix = "answers:"

// memoKey is the key of a caller's memo of op. The caller's kind keeps a
// runner and a site of one name apart.
func (s *Store) memoKey(op store.Op, caller string) string {
	return s.prefix + memoKeyPrefix + string(op) + ":" + memoCaller[op] + ":" + caller
}

// newWrite builds a call of a remembering write by caller: the fixed keys
// and the caller's memo, then a fresh request id before args. A client's
// retry re-sends the same call, so the id names the call, not the attempt.
func (s *Store) newWrite(op store.Op, caller string, args ...string) call {
	keys := append(append(make([]string, 0, len(s.keys)+1), s.keys...), s.memoKey(op, caller))
	return call{op: op, keys: keys, args: append([]string{newRequestID()}, args...)}
}

// newRequestID returns 96 random bits, base64url: unique among the few
// answers one memo holds, and short, since each memo keeps it per answer.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
