// Package demo routes one sealed job through a running relay, acting as the
// example site and one of its approved devices from deploy/demo-keys.json,
// and narrates each step. It shows what the relay carries and what it never
// sees.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

// Options say which relay to use and who to be.
type Options struct {
	// RelayURL is the relay's public origin, e.g. http://127.0.0.1:8080.
	RelayURL string
	// KeysPath is the demo key file.
	KeysPath string
	// RunnerID picks the device to act as; empty picks the first.
	RunnerID string
	// Prompt is the job's plaintext prompt.
	Prompt string
}

// Run routes one job and writes the story to out.
func Run(ctx context.Context, opts Options, out io.Writer) error {
	st, err := newStory(opts, out)
	if err != nil {
		return err
	}
	for _, step := range []func(context.Context) error{st.pair, st.publish, st.claim, st.seal, st.work, st.collect} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// story is one demo run: who acts and what has happened so far.
type story struct {
	opts   Options
	out    io.Writer
	keys   peer.DemoKeys
	dev    peer.DemoDevice
	site   *peer.Site
	daemon *peer.Daemon

	jobID    string
	deadline int64
	grant    protocol.ClaimedStub
}

func newStory(opts Options, out io.Writer) (*story, error) {
	keys, err := peer.LoadDemoKeys(opts.KeysPath)
	if err != nil {
		return nil, err
	}
	if len(keys.Devices) == 0 {
		return nil, errors.New("demo: the key file has no devices")
	}
	dev := keys.Devices[0]
	if opts.RunnerID != "" {
		var ok bool
		if dev, ok = keys.Device(opts.RunnerID); !ok {
			return nil, fmt.Errorf("demo: no device %q in %s", opts.RunnerID, opts.KeysPath)
		}
	}
	cfg := peer.Config{BaseURLs: []string{opts.RelayURL}}
	site, err := peer.NewSite(cfg, keys.Site.Keys, keys.Site.SiteID)
	if err != nil {
		return nil, err
	}
	daemon, err := peer.NewDaemon(cfg, dev.Keys, dev.RunnerID)
	if err != nil {
		return nil, err
	}
	return &story{opts: opts, out: out, keys: keys, dev: dev, site: site, daemon: daemon}, nil
}

func (st *story) say(format string, args ...any) { fmt.Fprintf(st.out, format+"\n", args...) }

func (st *story) pair(ctx context.Context) error {
	paired, err := st.daemon.Pair(ctx, st.dev.Owner)
	if err != nil {
		return fmt.Errorf("pair: %w", err)
	}
	st.say("1. daemon %s (owner %s, key %s) paired; the relay names the site key %s", paired.RunnerID, st.dev.Owner, st.dev.Keys.KeyID(), mustKeyID(paired.Site.Identity))
	return nil
}

func (st *story) publish(ctx context.Context) error {
	st.jobID = "demo-" + uuid.NewString()
	st.deadline = time.Now().Add(5 * time.Minute).UnixMilli()
	stub := st.site.Stub(st.jobID, protocol.KindGenerate, st.dev.Owner, st.deadline)
	stub.Audience = protocol.AudienceSelf
	enq, err := st.site.Enqueue(ctx, stub)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	st.say("2. site %s published stub %s for %s: %s (the relay holds metadata only)", st.keys.Site.SiteID, st.jobID, st.dev.Owner, enq.State)
	return nil
}

func (st *story) claim(ctx context.Context) error {
	claimed, err := st.daemon.Claim(ctx, []string{protocol.KindGenerate}, 1)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if len(claimed.Jobs) != 1 || claimed.Jobs[0].ID != st.jobID {
		return fmt.Errorf("claim: expected job %s, got %d jobs (is another daemon or job in the way?)", st.jobID, len(claimed.Jobs))
	}
	st.grant = claimed.Jobs[0]
	st.say("3. daemon claimed it under lease %s, valid for %d ms", st.grant.Lease.ID, claimed.LeaseMs)
	return nil
}

func (st *story) seal(ctx context.Context) error {
	pending, err := st.site.AwaitPending(ctx, st.jobID)
	if err != nil {
		return fmt.Errorf("pending: %w", err)
	}
	payload, err := json.Marshal(map[string]string{"prompt": st.opts.Prompt})
	if err != nil {
		return err
	}
	if _, err := st.site.SendPayload(ctx, pending, st.deadline, payload); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	st.say("4. site sealed the prompt to device key %s; the relay stores only ciphertext", mustKeyID(pending.Device.Identity))
	return nil
}

// work runs the job the way every Go daemon here does (peer.Daemon.Work),
// with an echo for a model.
func (st *story) work(ctx context.Context) error {
	var prompt string
	ran, err := st.daemon.Work(ctx, st.grant, func(payload json.RawMessage) (json.RawMessage, error) {
		var job struct{ Prompt string }
		if err := json.Unmarshal(payload, &job); err != nil {
			return nil, fmt.Errorf("read payload: %w", err)
		}
		prompt = job.Prompt
		return json.Marshal(map[string]any{
			"outcome": map[string]string{"outcome": "ok", "text": "echo: " + job.Prompt},
			"ran":     map[string]any{"model": "demo-echo", "backendClass": "process", "durationMs": 0},
		})
	}, peer.Steps{})
	if err != nil {
		return err
	}
	st.say("5. daemon fetched %d bytes of ciphertext and opened it: %q", len(ran.Sealed.Ciphertext), prompt)
	st.say("6. daemon sealed the answer to the site and posted it: accepted=%v state=%s", ran.Response.Accepted, ran.Response.State)
	return nil
}

func (st *story) collect(ctx context.Context) error {
	fin, err := st.site.AwaitResult(ctx, st.jobID)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	text, err := st.site.OpenResult(fin)
	if err != nil {
		return fmt.Errorf("open result: %w", err)
	}
	st.say("7. site collected the result from runner %s (owner %s) and opened it: %s", fin.RunnerID, fin.RunnerOwner, text)
	return nil
}

func mustKeyID(identity string) string {
	id, ok := protocol.KeyIDOf(identity)
	if !ok {
		return "(undecodable key)"
	}
	return id
}
