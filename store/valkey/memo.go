package valkey

import (
	"strconv"

	"github.com/byollm/relayd/store"
)

// A write a client may retry after a lost reply answers that retry with
// its first answer, kept in a memo per caller and operation (answer_once
// in common.lua): one small string per runner, site or pairing device and
// each operation it called in the last rememberFor, holding the newest few
// answers. The memo thus costs O(active callers), whatever the call rate.
// It is a string, not a field of a per-caller hash, so that each one
// expires on its own and a caller's busy operation never keeps its idle
// ones alive.

// memoCaller names, for each remembering write, whose memo keeps its
// answers: the runner for daemon-plane writes, the site for site-plane
// writes, the device identity for a pairing start. Writes whose re-run
// answers alike from the state the first run left (fetch, dropPairing,
// sweep) and reads are not remembered.
var memoCaller = map[store.Op]string{
	store.OpClaim: "r", store.OpRenew: "r", store.OpPair: "r", store.OpTouch: "r",
	store.OpResult: "r", store.OpRelease: "r", store.OpCancelRequests: "r",
	store.OpPayload: "s", store.OpEnqueue: "s", store.OpCancel: "s",
	store.OpStartPairing: "p",
}

const (
	// memoAnswers is how many answers of one operation a caller's memo
	// keeps: as many calls of that operation as one caller may have in
	// flight while one of them is retried.
	memoAnswers = 32
	// memoBytes bounds those answers' size (the newest is always kept), so
	// that a runner's large claims cost a bounded memo.
	memoBytes = 64 << 10
)

// memoHeader binds what answer_once reads in a remembering script.
func memoHeader() string {
	return "local REQ_ID = table.remove(ARGV, 1)\n" +
		"local MEMO_ANSWERS = " + strconv.Itoa(memoAnswers) + "\n" +
		"local MEMO_BYTES = " + strconv.Itoa(memoBytes) + "\n"
}

// memoKey is the key of a caller's memo of op. The caller's kind keeps a
// runner and a site of one name apart.
func (s *Store) memoKey(op store.Op, caller string) string {
	return s.prefix + "memo:" + string(op) + ":" + memoCaller[op] + ":" + caller
}

// newWrite builds a call of a remembering write by caller: the fixed keys
// and the caller's memo, then a fresh request id before args. A client's
// retry re-sends the same call, so the id names the call, not the attempt.
func (s *Store) newWrite(op store.Op, caller string, args ...string) call {
	keys := append(append(make([]string, 0, len(s.keys)+1), s.keys...), s.memoKey(op, caller))
	return call{op: op, keys: keys, args: append([]string{newUUID()}, args...)}
}
