package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// exchange is one request as the client sent it and the answer as it came
// back, reduced to what the differential compares.
type exchange struct {
	// Step names the scripted step that sent the request.
	Step   string
	Method string
	Path   string
	Status int
	// ContentType and RetryAfter are the answer's headers that matter to
	// a client; the others (Date, Content-Length) follow from these or
	// from the clock.
	ContentType string
	RetryAfter  string
	Body        []byte
}

// recorder is the http.RoundTripper of every client in one run: it keeps
// each exchange, in order, labelled with the step being run.
type recorder struct {
	mu   sync.Mutex
	step string
	seen []exchange
}

func (rec *recorder) setStep(name string) {
	rec.mu.Lock()
	rec.step = name
	rec.mu.Unlock()
}

func (rec *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("round trip %s %s: %w", req.Method, req.URL.Path, err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read answer to %s %s: %w", req.Method, req.URL.Path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// A step that polls (the site's Await helpers) asks the same thing
	// until the answer changes, as often as the machine's speed allows:
	// only its last answer is kept, so both runs line up.
	if n := len(rec.seen); n > 0 && rec.seen[n-1].Step == rec.step && rec.seen[n-1].Method == req.Method && rec.seen[n-1].Path == req.URL.RequestURI() {
		rec.seen = rec.seen[:n-1]
	}
	rec.seen = append(rec.seen, exchange{
		Step:        rec.step,
		Method:      req.Method,
		Path:        req.URL.RequestURI(),
		Status:      resp.StatusCode,
		ContentType: resp.Header.Get("Content-Type"),
		RetryAfter:  resp.Header.Get("Retry-After"),
		Body:        body,
	})
	return resp, nil
}

func (rec *recorder) exchanges() []exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]exchange(nil), rec.seen...)
}
