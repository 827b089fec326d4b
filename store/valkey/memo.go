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
var memoAnswers = map[memoKind]int{runnerMemo: 16, siteMemo: 512, deviceMemo: 2}

// memoBytes bounds the answers one memo keeps (the newest is always kept),
// so that a runner's large claims cost a bounded memo.
const memoBytes = 64 << 10

// memoHeader binds what answer_once reads in the script of a write
// remembered in memos of kind: the request id, first in ARGV, and the
// memo's bounds.
func memoHeader(kind memoKind) string {
	return "local REQ_ID = ARGV[1]\n" +
		"local MEMO_ANSWERS = " + strconv.Itoa(memoAnswers[kind]) + "\n" +
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
	return s.prefix + memoKeyPrefix + string(op) + ":" + string(operations[op].memo) + ":" + caller
}

// newRequestID returns 96 random bits, base64url: unique among the few
// answers one memo holds, and short, since each memo keeps it per answer.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
