package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/byollm/relayd/protocol"
)

// RawJSON is an answer already rendered: the writer sends these bytes as
// they are, with the JSON content type.
type RawJSON []byte

// ResultsAnswers keeps each site's last rendered results answer, so that
// a poll whose listing did not change sends the same bytes again, and one
// whose listing changed renders only the jobs that did. A site's results
// listing holds every finished job until its deadline, so its answer may
// be large (143 MB for 100,000 results of 1 KB) and nearly the same from
// poll to poll. Answers larger than limit, and those of sites beyond the
// last few polled, are not kept.
type ResultsAnswers struct {
	mu    sync.Mutex
	limit int
	sites map[string]*renderedAnswer
	order []string // sites, least recently rendered first
	// encoded counts the jobs rendered afresh, for tests.
	encoded int
}

// answerSites is how many sites' answers are kept: a relay routes for
// one site on protocol "0", and a few on protocol "2".
const answerSites = 4

// renderedAnswer is one site's answer: body, and each job's JSON within it.
type renderedAnswer struct {
	jobs  []protocol.FinishedJob
	parts [][]byte // subslices of body, one a job
	body  []byte
}

// NewResultsAnswers keeps answers of at most limit bytes; 0 keeps none.
func NewResultsAnswers(limit int64) *ResultsAnswers {
	return &ResultsAnswers{limit: int(min(limit, int64(^uint(0)>>1))), sites: map[string]*renderedAnswer{}}
}

const (
	answerHead = `{"jobs":[`
	answerTail = `]}`
)

// Render returns the results answer of jobs for site, byte for byte what
// encoding protocol.ResultsResponse{Jobs: jobs} gives: the site's last
// answer itself when jobs are the same, and otherwise the last answer's
// bytes of every job unchanged with the others encoded afresh.
func (a *ResultsAnswers) Render(site string, jobs []protocol.FinishedJob) (RawJSON, error) {
	a.mu.Lock()
	prev := a.sites[site]
	a.mu.Unlock()
	if prev != nil && slicesEqual(prev.jobs, jobs) {
		return prev.body, nil
	}
	next, fresh, err := render(prev, jobs)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.encoded += fresh
	a.keep(site, next)
	return next.body, nil
}

// Encoded reports how many jobs were encoded afresh so far.
func (a *ResultsAnswers) Encoded() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.encoded
}

func (a *ResultsAnswers) keep(site string, r *renderedAnswer) {
	delete(a.sites, site)
	for i, s := range a.order {
		if s == site {
			a.order = append(a.order[:i], a.order[i+1:]...)
			break
		}
	}
	if len(r.body) > a.limit {
		return
	}
	a.sites[site] = r
	a.order = append(a.order, site)
	for len(a.order) > answerSites {
		delete(a.sites, a.order[0])
		a.order = a.order[1:]
	}
}

func slicesEqual(a, b []protocol.FinishedJob) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// render builds the answer of jobs, taking each job's bytes from prev
// where prev holds that job unchanged; fresh counts the jobs encoded.
func render(prev *renderedAnswer, jobs []protocol.FinishedJob) (_ *renderedAnswer, fresh int, _ error) {
	old := map[string]int{}
	if prev != nil {
		for i, j := range prev.jobs {
			old[j.JobID] = i
		}
	}
	parts := make([][]byte, len(jobs))
	size := len(answerHead) + len(answerTail) + len(jobs)
	for i, j := range jobs {
		if k, ok := old[j.JobID]; ok && prev.jobs[k] == j {
			parts[i] = prev.parts[k]
		} else {
			b, err := encodeJob(j)
			if err != nil {
				return nil, 0, err
			}
			parts[i] = b
			fresh++
		}
		size += len(parts[i])
	}
	body := make([]byte, 0, size)
	body = append(body, answerHead...)
	for i, p := range parts {
		if i > 0 {
			body = append(body, ',')
		}
		start := len(body)
		body = append(body, p...)
		parts[i] = body[start:len(body):len(body)]
	}
	body = append(body, answerTail...)
	return &renderedAnswer{jobs: jobs, parts: parts, body: body}, fresh, nil
}

// encodeJob encodes one job as the writer encodes answers: no HTML
// escaping, no newline.
func encodeJob(j protocol.FinishedJob) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(j); err != nil {
		return nil, fmt.Errorf("results answer: encoding job %q: %w", j.JobID, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
