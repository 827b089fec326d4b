package valkey

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/store"
)

// # Riding out a short outage
//
// A Valkey restart, a failover or an AOF reload makes the server refuse
// connections, or answer LOADING, MASTERDOWN or READONLY, for a second or
// two. A client that got a 503 for that may drop its work (the published
// daemon does: it retries a fetch only on 409 and gives up a failed
// result), so every script call is retried here, in exec, while its
// context lasts: the request's store deadline (--store-timeout). Past
// it the caller gets the error, and the plane its retryable 503.
//
// Which errors: those of a server that is away or not ready, never a
// slow one (a timeout is the deadline's to judge) nor a refusal.
//
//   - Errors that prove the call never ran, retried for every call: no
//     connection could be made (refused, unreachable), or the server
//     answered LOADING, MASTERDOWN, READONLY (a write reached a replica:
//     a script fails at its first write, and a replica holds no write of
//     its own), CLUSTERDOWN or TRYAGAIN.
//   - A connection that dropped with the call in flight (EOF, reset,
//     broken pipe): the call may have run. Every write that keeps a memo
//     answers a re-run with its first answer (memo.go), the writes
//     whose entry in operations says alike answer alike, and reads change nothing, so each is
//     sent again. A charged fetch keeps no memo of its charge: it is sent
//     again without it, so it spends at most the one request, and none
//     when the first never ran. This matters most just after a restart:
//     a pooled connection that sat idle through it learns of it only from
//     the EOF its next call meets, though that call never reached the
//     server. A limiter's charge is not sent again (a second could spend
//     twice): the plane admits a request whose limiter cannot answer. A
//     listing (an entry's listing: its reply may be large, and a server that ran
//     it spent the time) is sent again once, not more: the stale pooled
//     connection of a restart meets every kind of call, and a site's
//     pending or results poll answered 503 for it is the 5xx a short
//     outage must not give (issue 23, seen in interop/test/faults).
//
// valkey-go re-sends a retryable command itself first (Options.MaxRetries,
// about 120 ms in all), which covers a dropped connection to a live server;
// this loop covers the rest of the outage, and the calls valkey-go never
// re-sends. A missing function needs nothing here: the call loads its
// library and is sent again (fcall in functions.go). BUSY (a script running past
// busy-reply-threshold, 5 s by default) is not retried: it lasts longer
// than any store deadline.
//
// Backoff: polls, from retryFirst doubling to retryMax, each wait halved
// and jittered so the replicas' calls do not return in step; a server
// back from an outage is thus found within about retryMax. A call
// without a deadline stops after outageWait of waiting.
const (
	retryFirst = 5 * time.Millisecond
	retryMax   = 100 * time.Millisecond
	// outageWait bounds the waits of a call whose context has no
	// deadline: the default store timeout.
	outageWait = 2 * time.Second
)

// Causes of a retry, as the retry metric labels them.
const (
	causeConnect     = "connect"     // no connection could be made
	causeDropped     = "dropped"     // the connection dropped with the call in flight
	causeLoading     = "loading"     // the server is loading its data set
	causeMasterDown  = "masterdown"  // a replica without its primary
	causeReadOnly    = "readonly"    // a write reached a replica
	causeClusterDown = "clusterdown" // the cluster is failing over
	causeTryAgain    = "tryagain"    // a slot is moving
)

// RetryCauses lists every cause a retry is reported under.
func RetryCauses() []string {
	return []string{causeConnect, causeDropped, causeLoading, causeMasterDown, causeReadOnly, causeClusterDown, causeTryAgain, causeUnreplicated}
}

// outageOf says whether err is a server away or not ready: the cause,
// and whether the call may have run all the same.
func outageOf(err error) (cause string, mayHaveRun, ok bool) {
	var unreplicated *unreplicatedError
	if errors.As(err, &unreplicated) {
		return causeUnreplicated, true, true
	}
	var verr *valkey.ValkeyError
	if errors.As(err, &verr) {
		prefix, _, _ := strings.Cut(verr.Error(), " ")
		switch prefix {
		case "LOADING":
			return causeLoading, false, true
		case "MASTERDOWN":
			return causeMasterDown, false, true
		case "READONLY":
			return causeReadOnly, false, true
		case "CLUSTERDOWN":
			return causeClusterDown, false, true
		case "TRYAGAIN":
			return causeTryAgain, false, true
		}
		return "", false, false
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return "", false, false
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return causeConnect, false, true
	}
	for _, dropped := range []error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED, net.ErrClosed} {
		if errors.Is(err, dropped) {
			return causeDropped, true, true
		}
	}
	return "", false, false
}

// resent is the call to send again after the connection dropped with c
// in flight (see above), and false when c is not to be sent again; drops
// counts the earlier drops this call met.
func (s *Store) resent(c call, drops int) (call, bool) {
	switch {
	case operations[c.op].neverResent:
		return c, false
	case operations[c.op].listing:
		return c, drops == 0
	case c.charged && s.scripts[c.op].once != nil:
		return uncharged(c), true
	}
	return c, true
}

// retryWait is the wait before retry n (from 1): doubling from retryFirst
// to retryMax, the upper half jittered.
func retryWait(n int) time.Duration {
	d := retryMax
	if n < 8 {
		d = min(retryFirst<<(n-1), retryMax)
	}
	return d/2 + rand.N(d/2+1)
}

// execRetrying runs c, retrying it through an outage (see above) while
// ctx lasts, or for outageWait of waiting when ctx has no deadline.
func (s *Store) execRetrying(ctx context.Context, c call) (valkey.ValkeyMessage, error) {
	_, bounded := ctx.Deadline()
	var waited time.Duration
	drops := 0
	for n := 1; ; n++ {
		msg, err := s.run(ctx, c)
		if err == nil {
			return msg, nil
		}
		cause, mayHaveRun, outage := outageOf(err)
		if !outage || ctx.Err() != nil {
			return msg, err
		}
		if mayHaveRun {
			var again bool
			if c, again = s.resent(c, drops); !again {
				return msg, err
			}
			drops++
		}
		wait := retryWait(n)
		if !bounded && waited+wait > outageWait {
			return msg, err
		}
		if clock.Sleep(ctx, wait) != nil {
			return msg, fmt.Errorf("%w (retried %d times, until the call's context ended)", err, n-1)
		}
		waited += wait
		if s.onRetry != nil {
			s.onRetry(c.op, cause)
		}
	}
}

// RetryObserver is told of every retry of a store call through an
// outage, with the call's operation and the retry's cause (one of
// RetryCauses).
type RetryObserver func(op store.Op, cause string)
