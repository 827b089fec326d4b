package workload

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Report summarises a run: what happened, how fast, and what went wrong.
type Report struct {
	// Protocol is the run's: "0", "2" or "mixed".
	Protocol string `json:"protocol"`
	Replicas int    `json:"replicas"`
	Daemons  int    `json:"daemons"`
	Jobs     int    `json:"jobs"`
	Enqueued int    `json:"enqueued"`
	// Collected is how many results the site collected (once each).
	Collected int `json:"collected"`
	// CollectedByProtocol and GrantsByProtocol split Collected and the
	// grants claims answered by the protocol of the job.
	CollectedByProtocol map[string]int `json:"collectedByProtocol"`
	GrantsByProtocol    map[string]int `json:"grantsByProtocol"`
	// Grants counts distinct leases seen; Regranted the jobs granted more
	// than once; Abandoned the grants dropped on purpose; LostLeases those
	// a heartbeat reported lost; Released those given back.
	Grants    int `json:"grants"`
	Regranted int `json:"regranted"`
	Abandoned int `json:"abandoned"`
	// Returned counts leases a claim handed back to their holder (RD-D14).
	Returned int `json:"returned"`
	// Unsealed counts grants the site left unsealed on purpose.
	Unsealed   int `json:"unsealed"`
	LostLeases int `json:"lostLeases"`
	Released   int `json:"released"`
	// Accepted counts results the relay accepted; RetriedDuplicates the
	// first submissions answered duplicate because a retry had already
	// delivered them; Replays the deliberate second submissions.
	Accepted          int `json:"accepted"`
	RetriedDuplicates int `json:"retriedDuplicates"`
	Replays           int `json:"replays"`
	// NotReadyPolls counts fetches answered not-ready; Retries the tries
	// the balancer repeated on another replica.
	NotReadyPolls int `json:"notReadyPolls"`
	Retries       int `json:"retries"`
	// LeaseOffsetMs is, per replica that granted leases, the largest
	// distance between a lease's grant time (its expiresAt minus the
	// lease) and the middle of its claim's round trip on this machine's
	// clock: small everywhere when leases come from the store's clock,
	// whatever each replica's own clock says.
	LeaseOffsetMs map[string]int64 `json:"leaseOffsetMs"`
	// Statuses counts every try's HTTP status (0: no answer); Tries
	// counts tries per replica (host:port).
	Statuses map[int]int    `json:"statuses"`
	Tries    map[string]int `json:"tries"`
	// Errors counts failed calls and notable events by kind.
	Errors map[string]int `json:"errors"`
	// Unreadable counts, per endpoint, 2xx answers the peers could not
	// read (each endpoint's first is a violation).
	Unreadable map[string]int `json:"unreadable,omitempty"`
	// Latency is per endpoint, per call (a retried call counts once, with
	// all its tries).
	Latency map[string]Latency `json:"latency"`
	// Elapsed runs from the first enqueue to the end; JobsPerSecond is
	// Collected over Elapsed.
	Elapsed       time.Duration `json:"-"`
	ElapsedMs     int64         `json:"elapsedMs"`
	JobsPerSecond float64       `json:"jobsPerSecond"`
	StopReason    string        `json:"stopReason"`
}

// Report summarises the run so far.
func (r *Run) Report() Report {
	rep := Report{
		Protocol: r.cfg.Protocol, CollectedByProtocol: map[string]int{}, GrantsByProtocol: map[string]int{},
		Replicas: len(r.cfg.BaseURLs), Daemons: r.cfg.Daemons, Jobs: r.cfg.Jobs,
		Enqueued: int(r.enqueued.Load()), Collected: int(r.collected.Load()),
		StopReason: r.StopReason(),
	}
	r.rec.mu.Lock()
	rep.countJobs(r.rec)
	rep.countLeases(r.rec)
	r.rec.mu.Unlock()
	r.st.mu.Lock()
	rep.copyCallStats(r.st)
	r.st.mu.Unlock()
	r.mu.Lock()
	end := r.ended
	if end.IsZero() {
		end = time.Now()
	}
	rep.Elapsed = end.Sub(r.started)
	r.mu.Unlock()
	rep.ElapsedMs = rep.Elapsed.Milliseconds()
	if s := rep.Elapsed.Seconds(); s > 0 {
		rep.JobsPerSecond = float64(rep.Collected) / s
	}
	return rep
}

// countJobs adds what the records say of each job: regrants, per-protocol
// collections and grants, acceptances and replays. rec.mu is held.
func (rep *Report) countJobs(rec *records) {
	rep.Unreadable = make(map[string]int, len(rec.unreadable))
	for k, v := range rec.unreadable {
		rep.Unreadable[k] = v
	}
	for _, j := range rec.jobs {
		if len(j.grants) > 1 {
			rep.Regranted++
		}
		if j.lane != nil {
			if j.site != nil {
				rep.CollectedByProtocol[j.lane.proto]++
			}
			rep.GrantsByProtocol[j.lane.proto] += len(j.grants)
		}
		for _, a := range j.accepted {
			rep.Accepted++
			if a.duplicate {
				rep.RetriedDuplicates++
			}
		}
		rep.Replays += len(j.replays)
	}
}

// countLeases adds what the records say of each lease: how it ended, and
// each replica's largest lease offset. rec.mu is held.
func (rep *Report) countLeases(rec *records) {
	rep.Grants = len(rec.leases)
	rep.LeaseOffsetMs = map[string]int64{}
	for _, g := range rec.leases {
		if g.source == "claim" && g.replica != "" {
			off := g.grantedAt - (g.claimSent+g.claimRecv)/2
			rep.LeaseOffsetMs[g.replica] = max(rep.LeaseOffsetMs[g.replica], off, -off)
		}
		if g.abandoned {
			rep.Abandoned++
		}
		if g.returned {
			rep.Returned++
		}
		if g.unsealed {
			rep.Unsealed++
		}
		if g.lost {
			rep.LostLeases++
		}
		if g.releasedAt > 0 {
			rep.Released++
		}
	}
}

// copyCallStats copies the balancer's counts of calls and tries, and
// summarises each endpoint's latencies. st.mu is held.
func (rep *Report) copyCallStats(st *stats) {
	rep.NotReadyPolls, rep.Retries = st.notReady, st.retries
	rep.Statuses = make(map[int]int, len(st.statuses))
	for k, v := range st.statuses {
		rep.Statuses[k] = v
	}
	rep.Tries = make(map[string]int, len(st.hosts))
	for k, v := range st.hosts {
		rep.Tries[k] = v
	}
	rep.Errors = make(map[string]int, len(st.errors))
	for k, v := range st.errors {
		rep.Errors[k] = v
	}
	rep.Latency = make(map[string]Latency, len(st.latencies))
	for k, v := range st.latencies {
		rep.Latency[k] = summarise(v)
	}
}

// JSON is the report as one line of JSON, for summaries tools collect.
func (rep Report) JSON() string {
	b, err := json.Marshal(rep)
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	return string(b)
}

// String is the report for people: counts, throughput, latencies, errors.
func (rep Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "protocol %s, %d replicas, %d daemons: %d/%d jobs collected %v in %s (%.0f jobs/s), %s\n",
		rep.Protocol, rep.Replicas, rep.Daemons, rep.Collected, rep.Jobs, rep.CollectedByProtocol, rep.Elapsed.Round(time.Millisecond), rep.JobsPerSecond, rep.StopReason)
	fmt.Fprintf(&b, "grants %d (jobs regranted %d, returned to their holder %d, left unsealed %d, abandoned %d, lost %d, released %d); accepted %d (retried duplicates %d); replays %d; not-ready polls %d; retries %d\n",
		rep.Grants, rep.Regranted, rep.Returned, rep.Unsealed, rep.Abandoned, rep.LostLeases, rep.Released, rep.Accepted, rep.RetriedDuplicates, rep.Replays, rep.NotReadyPolls, rep.Retries)
	for _, k := range sortedKeys(rep.Latency) {
		fmt.Fprintf(&b, "  %-13s %s\n", k, rep.Latency[k])
	}
	var statuses []string
	codes := make([]int, 0, len(rep.Statuses))
	for k := range rep.Statuses {
		codes = append(codes, k)
	}
	sort.Ints(codes)
	for _, k := range codes {
		statuses = append(statuses, fmt.Sprintf("%d×%d", k, rep.Statuses[k]))
	}
	fmt.Fprintf(&b, "  statuses: %s\n", strings.Join(statuses, " "))
	var tries []string
	for _, k := range sortedKeys(rep.Tries) {
		tries = append(tries, fmt.Sprintf("%s×%d", k, rep.Tries[k]))
	}
	fmt.Fprintf(&b, "  tries per replica: %s\n", strings.Join(tries, " "))
	var offsets []string
	for _, k := range sortedKeys(rep.LeaseOffsetMs) {
		offsets = append(offsets, fmt.Sprintf("%s≤%dms", k, rep.LeaseOffsetMs[k]))
	}
	fmt.Fprintf(&b, "  lease time vs claim round trip, per replica: %s\n", strings.Join(offsets, " "))
	if len(rep.Errors) > 0 {
		b.WriteString("  errors:\n")
		for _, k := range sortedKeys(rep.Errors) {
			fmt.Fprintf(&b, "    %-50s %d\n", k, rep.Errors[k])
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
