// Package ratelimit limits how often one caller may call the relay. Each
// caller (a runner, a site, a client address) has a token bucket: it holds
// at most Burst tokens, gains one every Every, and a request takes one.
// A request that finds no token is refused and told how long to wait; it
// takes nothing, so a caller that keeps knocking does not push its own
// wait further out.
//
// A bucket is kept as one instant: when it will be full again. Tokens in
// hand are then Burst minus the time to that instant over Every, so taking
// a token moves the instant Every later, and an idle bucket needs no
// refill step and nothing stored once the instant has passed. This is the
// token bucket written the way the generic cell rate algorithm writes it.
//
// Memory keeps the buckets in process, for a relay on the memory store.
// The Valkey store's Limiter (store/valkey) keeps them in Valkey beside the
// routing state and decides each request in one Lua script on Valkey's
// clock, so that every replica sharing the server shares each caller's
// bucket. Each store offers the limiter that lives beside it; package
// store/backend opens the two together.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Decision is the answer to one request.
type Decision struct {
	// Allowed is true when the request took a token.
	Allowed bool
	// RetryAfter is how long a refused caller must wait before its next
	// token; zero when allowed.
	RetryAfter time.Duration
}

// Limiter decides whether the caller named by key may make one more
// request. An error means the limiter could not decide; the caller chooses
// what to do then.
type Limiter interface {
	Allow(ctx context.Context, key string) (Decision, error)
}

// Rate is the shape of every bucket of a limiter.
type Rate struct {
	// Every is the time between two tokens; zero disables the limit.
	Every time.Duration
	// Burst is how many tokens a bucket holds when full: how many requests
	// a caller idle for long enough may make at once.
	Burst int
}

// Enabled reports whether the rate limits anything.
func (r Rate) Enabled() bool { return r.Every > 0 }

// Validate checks that an enabled rate can be kept: a token every
// microsecond at most (Valkey's clock resolution) and a burst of one or
// more.
func (r Rate) Validate() error {
	if !r.Enabled() {
		return nil
	}
	if r.Every < time.Microsecond {
		return fmt.Errorf("ratelimit: one token every %v is finer than a microsecond", r.Every)
	}
	if r.Burst < 1 {
		return fmt.Errorf("ratelimit: burst %d must be at least 1", r.Burst)
	}
	return nil
}

// String writes the rate as ParseEvery reads it, with the burst.
func (r Rate) String() string {
	return FormatEvery(r.Every) + " burst " + strconv.Itoa(r.Burst)
}

// slack is how far ahead of now a bucket's full instant may be while a
// token is still in hand: Burst-1 tokens' worth.
func (r Rate) slack() time.Duration { return time.Duration(r.Burst-1) * r.Every }

var units = []struct {
	suffix string
	per    time.Duration
}{{"/s", time.Second}, {"/m", time.Minute}, {"/h", time.Hour}}

// ParseEvery reads a rate such as "50/s", "600/m" or "2/h" (a bare number
// is per second) and returns the time between two tokens. "0" means no
// limit and returns zero.
func ParseEvery(s string) (time.Duration, error) {
	text, per := strings.TrimSpace(s), time.Second
	for _, u := range units {
		if n, ok := strings.CutSuffix(text, u.suffix); ok {
			text, per = n, u.per
			break
		}
	}
	n, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n < 0 {
		return 0, fmt.Errorf("ratelimit: %q is not a rate like 50/s, 600/m or 0", s)
	}
	if n == 0 {
		return 0, nil
	}
	every := time.Duration(math.Round(float64(per) / n))
	if every < time.Microsecond {
		return 0, fmt.Errorf("ratelimit: %q is more than a million a second", s)
	}
	return every, nil
}

// FormatEvery writes a token interval as a rate ParseEvery reads back: a
// whole number per second, minute or hour when there is one, else
// requests per second with a fraction.
func FormatEvery(every time.Duration) string {
	if every <= 0 {
		return "0"
	}
	for _, u := range units {
		if u.per%every == 0 {
			return strconv.FormatInt(int64(u.per/every), 10) + u.suffix
		}
	}
	return strconv.FormatFloat(float64(time.Second)/float64(every), 'g', -1, 64) + "/s"
}

var (
	// ErrEmptyKey refuses a request without a caller to charge.
	ErrEmptyKey = errors.New("ratelimit: empty key")
	// ErrDisabled refuses to build a limiter that limits nothing: a relay
	// without a limit has no limiter at all.
	ErrDisabled = errors.New("ratelimit: the rate is disabled (Every is zero)")
)
