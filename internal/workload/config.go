package workload

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

// Config describes one workload run.
type Config struct {
	// BaseURLs are the replicas' public origins. Every peer spreads its
	// requests over them round-robin and retries on the next one.
	BaseURLs []string
	// Keys are the site's and the devices' keys (a generated fixture's, or
	// deploy/demo-keys.json).
	Keys peer.DemoKeys
	// Protocol is the wire protocol the peers speak: ProtocolV0 ("" means
	// it), ProtocolV2, or ProtocolMixed, where "0" and "2" sites and
	// daemons share the relay at once: every owner's devices alternate
	// between the two, and the jobs are split between them.
	Protocol string
	// ExtraSites are more sites, registered in the relay's fixture with
	// the same consents, that publish "2" jobs beside Keys.Site. Their
	// jobs reuse the main site's job ids, as "2" keys jobs by (site, id).
	ExtraSites []peer.DemoSite
	// Daemons is how many of Keys.Devices run; 0 means all of them.
	Daemons int
	// Jobs is how many jobs the site publishes; at least 1.
	Jobs int
	// JobIDPrefix starts every job id; "" means a random one, so runs on a
	// shared store never collide.
	JobIDPrefix string
	// Kind is the job kind; "" means llm.generate.
	Kind string
	// JobTTL is each stub's deadline after its enqueue; 0 means 5 minutes.
	// Results stay listed until the deadline, so a long run wants a short
	// TTL to keep the results listing small.
	JobTTL time.Duration

	// EnqueueConcurrency is how many enqueues run at once; 0 means 8.
	EnqueueConcurrency int
	// MaxInFlight caps jobs published but not yet collected by the site;
	// 0 means 1000 and a negative value means no cap.
	MaxInFlight int
	// SlotsPerDaemon is how many jobs one daemon works on at once; 0 means 4.
	SlotsPerDaemon int
	// SealWorkers is how many payloads the site seals at once; 0 means 8.
	SealWorkers int

	// ReplayFraction of accepted results are posted a second time under the
	// same lease; the relay must answer duplicate:true.
	ReplayFraction float64
	// AbandonFraction of grants are dropped by their daemon without a
	// release or further heartbeats, half right after the claim and half
	// after the fetch, as a crashing daemon would: their leases must lapse
	// and the jobs go to someone else.
	AbandonFraction float64

	// UnsealedFraction of "2" jobs have their first grant left unsealed
	// by the site, so that its sealing window lapses: the relay must then
	// offer the job again only to that grant's runner (the sticky
	// re-offer, protocol-2 §4.5), and Check holds it to that. Each such
	// job waits out one 10 s window and holds one of its (site, owner)'s
	// two unsealed slots meanwhile, so keep it small.
	UnsealedFraction float64

	// PendingInterval is the site's pending poll; 0 means 10 ms.
	PendingInterval time.Duration
	// FetchInterval is a daemon's fetch poll while a payload is not sealed;
	// 0 means 10 ms.
	FetchInterval time.Duration
	// ClaimBackoff caps an idle daemon's pause between empty claims; 0
	// means 100 ms.
	ClaimBackoff time.Duration
	// ResultsInterval is the site's results poll at an empty listing; it
	// grows with the listing's size. 0 means 100 ms.
	ResultsInterval time.Duration
	// HeartbeatInterval is each daemon's heartbeat; 0 means a third of the
	// lease the relay grants.
	HeartbeatInterval time.Duration

	// Attempts bounds the tries of one request across replicas; 0 means
	// one more than the number of replicas, at least 3.
	Attempts int
	// AttemptTimeout bounds one try; 0 means 15 s.
	AttemptTimeout time.Duration
	// StallTimeout ends the run when the site has collected no result for
	// this long; 0 means 90 s.
	StallTimeout time.Duration
	// ClockTolerance is how far a lease's grant time (derived from its
	// expiresAt) may sit outside the claim's round trip on this machine's
	// clock; 0 means 1 s. Leases come from the store's clock, so relay
	// replicas with skewed clocks must not move them.
	ClockTolerance time.Duration

	// Allow503 marks 503 server-error answers as expected (a store outage
	// is part of the test). They are still counted, and must still carry
	// the server-error code and Retry-After.
	Allow503 bool

	// Logf, when set, receives a progress line now and then.
	Logf func(format string, args ...any)
}

// The protocols a workload can speak.
const (
	ProtocolV0    = "0"
	ProtocolV2    = "2"
	ProtocolMixed = "mixed"
)

// speaks reports whether the run has peers of protocol p ("0" or "2").
func (c Config) speaks(p string) bool { return c.Protocol == p || c.Protocol == ProtocolMixed }

// withDefaults returns c with zero fields filled in, or an error when c
// cannot run.
func (c Config) withDefaults() (Config, error) {
	if len(c.BaseURLs) == 0 {
		return c, errors.New("workload: no base URL")
	}
	if c.Jobs < 1 {
		return c, errors.New("workload: at least one job is needed")
	}
	if c.Keys.Site.SiteID == "" {
		return c, errors.New("workload: no site keys")
	}
	if c.Daemons <= 0 || c.Daemons > len(c.Keys.Devices) {
		c.Daemons = len(c.Keys.Devices)
	}
	if c.Daemons == 0 {
		return c, errors.New("workload: no devices to run daemons on")
	}
	if c.ReplayFraction < 0 || c.ReplayFraction > 1 || c.AbandonFraction < 0 || c.AbandonFraction >= 1 ||
		c.UnsealedFraction < 0 || c.UnsealedFraction >= 1 {
		return c, fmt.Errorf("workload: fractions out of range (replay %v, abandon %v, unsealed %v)", c.ReplayFraction, c.AbandonFraction, c.UnsealedFraction)
	}
	switch c.Protocol {
	case "":
		c.Protocol = ProtocolV0
	case ProtocolV0, ProtocolV2, ProtocolMixed:
	default:
		return c, fmt.Errorf("workload: unknown protocol %q (want 0, 2 or mixed)", c.Protocol)
	}
	if len(c.ExtraSites) > 0 && !c.speaks(ProtocolV2) {
		return c, errors.New(`workload: extra sites publish "2" jobs, but the run speaks only "0"`)
	}
	if c.JobIDPrefix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.JobIDPrefix = "wl-" + hex.EncodeToString(b[:]) + "-"
	}
	if c.Kind == "" {
		c.Kind = protocol.KindGenerate
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	def(&c.JobTTL, 5*time.Minute)
	defInt(&c.EnqueueConcurrency, 8)
	switch {
	case c.MaxInFlight == 0:
		c.MaxInFlight = 1000
	case c.MaxInFlight < 0:
		c.MaxInFlight = c.Jobs
	}
	defInt(&c.SlotsPerDaemon, 4)
	defInt(&c.SealWorkers, 8)
	def(&c.PendingInterval, 10*time.Millisecond)
	def(&c.FetchInterval, 10*time.Millisecond)
	def(&c.ClaimBackoff, 100*time.Millisecond)
	def(&c.ResultsInterval, 100*time.Millisecond)
	defInt(&c.Attempts, max(3, len(c.BaseURLs)+1))
	def(&c.AttemptTimeout, 15*time.Second)
	def(&c.StallTimeout, 90*time.Second)
	def(&c.ClockTolerance, time.Second)
	return c, nil
}
