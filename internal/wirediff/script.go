package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/byollm/relayd/internal/peer"
)

// script is one run of the scripted sequence against one relay. Every
// client it makes sends through rec, so the run's exchanges are the
// socket's, in order.
type script struct {
	rec    *recorder
	public string
	admin  string
	keys   peer.DemoKeys
	client *http.Client
	// failed lists the steps whose client call failed, by name and HTTP
	// status (0 when no answer came): two runs must fail the same steps.
	failed []string
	// deadline is every job's deadlineAt: five minutes from the run's
	// start, so each run's is different and masked.
	deadline int64
	// verbose, when set, receives each failed step's error.
	verbose io.Writer
}

func newScript(public, admin string, keys peer.DemoKeys) *script {
	rec := &recorder{}
	return &script{
		rec: rec, public: public, admin: admin, keys: keys,
		client:   &http.Client{Transport: rec, Timeout: 30 * time.Second},
		deadline: time.Now().Add(5 * time.Minute).UnixMilli(),
	}
}

// cfg is the peer configuration of every client of the run.
func (s *script) cfg() peer.Config {
	return peer.Config{BaseURLs: []string{s.public}, HTTPClient: s.client, PollInterval: 20 * time.Millisecond}
}

// stepTimeout bounds one step, so a poll that never ends (an Await of a
// job the relay lost) fails the step instead of hanging the run.
const stepTimeout = 15 * time.Second

// step labels the exchanges f makes and notes a failure of f. f gets a
// context that ends after stepTimeout.
func (s *script) step(ctx context.Context, name string, f func(context.Context) error) {
	s.rec.setStep(name)
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := f(ctx); err != nil {
		if s.verbose != nil {
			fmt.Fprintf(s.verbose, "step %s: %v\n", name, err)
		}
		s.failed = append(s.failed, fmt.Sprintf("%s: failed (status %d)", name, peer.ErrorStatus(err)))
	}
}

// raw sends one request as given and keeps only the failure to get an
// answer: the answer itself is what the recorder keeps.
func raw(ctx context.Context, t *peer.Transport, req peer.RawRequest) error {
	_, err := t.Raw(ctx, req)
	return err
}

// run plays the whole sequence: protocol "0", protocol "2", the refusals
// and the admin listener, in that order.
func (s *script) run(ctx context.Context) error {
	for _, part := range []func(context.Context) error{s.proto0, s.proto2, s.refusals, s.refusals2, s.adminPages} {
		if err := part(ctx); err != nil {
			return err
		}
	}
	return nil
}

// adminPages reads the admin listener's pages, and asks it a path it
// does not serve.
func (s *script) adminPages(ctx context.Context) error {
	t, err := peer.NewTransport(peer.Config{BaseURLs: []string{s.admin}, HTTPClient: s.client})
	if err != nil {
		return fmt.Errorf("admin transport: %w", err)
	}
	for _, path := range []string{"/healthz", "/readyz", "/debug", "/no-such-page"} {
		s.step(ctx, "admin "+path, func(ctx context.Context) error { return raw(ctx, t, peer.RawRequest{Path: path}) })
	}
	return nil
}

// echo is the work every scripted job does: it answers the prompt back.
func echo(payload json.RawMessage) (json.RawMessage, error) {
	return json.Marshal(map[string]any{
		"outcome": map[string]string{"outcome": "ok", "text": "echo: " + string(payload)},
		"ran":     map[string]any{"model": "wirediff-echo", "backendClass": "process", "durationMs": 0},
	})
}

// drop keeps only the error of a client call whose answer the recorder
// already holds.
func drop[T any](_ T, err error) error { return err }

// keep returns a function that stores a client call's answer in into and
// passes its error on.
func keep[T any](into *T) func(T, error) error {
	return func(v T, err error) error {
		*into = v
		return err
	}
}
