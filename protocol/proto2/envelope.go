package proto2

import (
	"math"
	"net/http"
	"strconv"

	"github.com/byollm/relayd/protocol"
)

// EnvelopeBytes is the size the reference measures an envelope by: the
// length of JSON.stringify(envelope) in UTF-16 code units (§3.12.1). For
// the strict five-key envelope that is 83 for the braces, commas, keys and
// quotes, plus each string's escaped length, plus deadlineAt's digits.
func EnvelopeBytes(e SealedEnvelope) int64 {
	return 83 + escapedLen(e.Ciphertext) + escapedLen(e.RecipientKeyID) + escapedLen(e.SenderKeyID) +
		escapedLen(e.Direction) + int64(len(strconv.FormatInt(e.DeadlineAt, 10)))
}

// escapedLen is the length of s inside JSON.stringify's quotes, in UTF-16
// code units. s is valid UTF-8 (strictjson refuses lone surrogates), so
// every rune above U+FFFF is a surrogate pair: two units, sent raw.
func escapedLen(s string) int64 {
	var n int64
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			n += 2
		case r == '\b' || r == '\t' || r == '\n' || r == '\f' || r == '\r':
			n += 2
		case r < 0x20:
			n += 6
		case r > 0xFFFF:
			n += 2
		default:
			n++
		}
	}
	return n
}

// EnvelopeTooLarge is the reference's envelope cap on payload and result
// (§3.8, §3.12; decision P2-D2): nil when EnvelopeBytes(e) is at most
// MaxEnvelopeBytes (exactly the limit is accepted), otherwise the 400 with
// the reference's message. Both routes check it after the schema and
// before the store, so an oversized result is refused even for an unknown
// job.
func EnvelopeTooLarge(e SealedEnvelope) *Refusal {
	n := EnvelopeBytes(e)
	if n <= MaxEnvelopeBytes {
		return nil
	}
	return refusal(http.StatusBadRequest, protocol.CodeBadRequest, TooLargeMessage(n, MaxEnvelopeBytes))
}

// TooLargeMessage is the refusal text for a message of n bytes over limit.
func TooLargeMessage(n, limit int64) string {
	return "this message is " + describeBytes(n) + " and the limit is " + describeBytes(limit) +
		" — it is a limit on one message rather than on how many you send." +
		" Split the work into smaller jobs and send them separately. " + MsgEnvelopeCeiling
}

// describeBytes prints n as megabytes rounded up to one decimal, as the
// reference's describeBytes does: ceil(n / 2^20 × 10) / 10, then one
// decimal and " MB".
func describeBytes(n int64) string {
	tenths := math.Ceil(float64(n) / (1 << 20) * 10)
	return strconv.FormatFloat(tenths/10, 'f', 1, 64) + " MB"
}
