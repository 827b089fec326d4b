package workload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/byollm/relayd/internal/peer"
)

// stats collects request latencies and refusals.
type stats struct {
	mu        sync.Mutex
	latencies map[string][]time.Duration // per endpoint, per call (retries included)
	errors    map[string]int
	statuses  map[int]int // every try's status, 0 for no response
	hosts     map[string]int
	retries   int
	notReady  int
	// serverErrors samples the 5xx answers the balancer saw.
	serverErrors []attempt
	server5xx    int
}

func newStats() *stats {
	return &stats{latencies: map[string][]time.Duration{}, errors: map[string]int{}, statuses: map[int]int{}, hosts: map[string]int{}}
}

func (s *stats) observeAttempt(a attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses[a.status]++
	s.hosts[a.host]++
	if a.status >= 500 {
		s.server5xx++
		if len(s.serverErrors) < 1000 {
			s.serverErrors = append(s.serverErrors, a)
		}
	}
	if a.err != nil {
		s.errors[a.endpoint+" try: "+transportKind(a.err)]++
	}
}

// call records one finished call of an endpoint.
func (s *stats) call(endpoint string, took time.Duration, ci *callInfo, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latencies[endpoint] = append(s.latencies[endpoint], took)
	if ci != nil {
		s.retries += ci.retries
	}
	if err != nil {
		if peer.ErrorCode(err) == "not-ready" {
			s.notReady++
			return
		}
		s.errors[endpoint+": "+errorKind(err)]++
	}
}

// note counts an event that is not a request outcome.
func (s *stats) note(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors[kind]++
}

// errorKind names a call's failure: the relay's status and code, or the
// kind of transport failure.
func errorKind(err error) string {
	if st := peer.ErrorStatus(err); st != 0 {
		return strconv.Itoa(st) + " " + string(peer.ErrorCode(err))
	}
	return transportKind(err)
}

func transportKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "transport"
}

// Latency summarises one endpoint's call times.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50Ms"`
	P90   float64 `json:"p90Ms"`
	P99   float64 `json:"p99Ms"`
	Max   float64 `json:"maxMs"`
}

func summarise(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.5) - 1
		i = min(max(i, 0), len(s)-1)
		return ms(s[i])
	}
	return Latency{Count: len(s), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (l Latency) String() string {
	return fmt.Sprintf("n=%d p50=%.1fms p90=%.1fms p99=%.1fms max=%.1fms", l.Count, l.P50, l.P90, l.P99, l.Max)
}
