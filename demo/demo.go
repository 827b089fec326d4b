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
	keys, err := peer.LoadDemoKeys(opts.KeysPath)
	if err != nil {
		return err
	}
	if len(keys.Devices) == 0 {
		return errors.New("demo: the key file has no devices")
	}
	dev := keys.Devices[0]
	if opts.RunnerID != "" {
		var ok bool
		if dev, ok = keys.Device(opts.RunnerID); !ok {
			return fmt.Errorf("demo: no device %q in %s", opts.RunnerID, opts.KeysPath)
		}
	}
	cfg := peer.Config{BaseURLs: []string{opts.RelayURL}}
	site, err := peer.NewSite(cfg, keys.Site.Keys, keys.Site.SiteID)
	if err != nil {
		return err
	}
	daemon, err := peer.NewDaemon(cfg, dev.Keys, dev.RunnerID)
	if err != nil {
		return err
	}
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	paired, err := daemon.Pair(ctx, dev.Owner)
	if err != nil {
		return fmt.Errorf("pair: %w", err)
	}
	say("1. daemon %s (owner %s, key %s) paired; the relay names the site key %s", paired.RunnerID, dev.Owner, dev.Keys.KeyID(), mustKeyID(paired.Site.Identity))

	jobID := "demo-" + uuid.NewString()
	deadline := time.Now().Add(5 * time.Minute).UnixMilli()
	stub := site.Stub(jobID, protocol.KindGenerate, dev.Owner, deadline)
	stub.Audience = protocol.AudienceSelf
	enq, err := site.Enqueue(ctx, stub)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	say("2. site %s published stub %s for %s: %s (the relay holds metadata only)", keys.Site.SiteID, jobID, dev.Owner, enq.State)

	claimed, err := daemon.Claim(ctx, []string{protocol.KindGenerate}, 1)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if len(claimed.Jobs) != 1 || claimed.Jobs[0].ID != jobID {
		return fmt.Errorf("claim: expected job %s, got %d jobs (is another daemon or job in the way?)", jobID, len(claimed.Jobs))
	}
	grant := claimed.Jobs[0]
	say("3. daemon claimed it under lease %s, valid for %d ms", grant.Lease.ID, claimed.LeaseMs)

	pending, err := site.AwaitPending(ctx, jobID)
	if err != nil {
		return fmt.Errorf("pending: %w", err)
	}
	payload, err := json.Marshal(map[string]string{"prompt": opts.Prompt})
	if err != nil {
		return err
	}
	if _, err := site.SendPayload(ctx, pending, deadline, payload); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	say("4. site sealed the prompt to device key %s; the relay stores only ciphertext", mustKeyID(pending.Device.Identity))

	fetched, err := daemon.Fetch(ctx, jobID, grant.Lease.ID)
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	opened, err := peer.Open(dev.Keys, fetched.Envelope, peer.Expectation{JobID: jobID, Direction: protocol.DirectionPayload, SenderIdentity: keys.Site.Keys.Public().Identity})
	if err != nil {
		return fmt.Errorf("open payload: %w", err)
	}
	var job struct{ Prompt string }
	if err := json.Unmarshal(opened, &job); err != nil {
		return fmt.Errorf("read payload: %w", err)
	}
	say("5. daemon fetched %d bytes of ciphertext and opened it: %q", len(fetched.Envelope.Ciphertext), job.Prompt)

	answer, err := json.Marshal(map[string]any{
		"outcome": map[string]string{"outcome": "ok", "text": "echo: " + job.Prompt},
		"ran":     map[string]any{"model": "demo-echo", "backendClass": "process", "durationMs": 0},
	})
	if err != nil {
		return err
	}
	sealed, err := peer.Seal(dev.Keys, keys.Site.Keys.Public(), jobID, protocol.DirectionResult, deadline, answer)
	if err != nil {
		return fmt.Errorf("seal result: %w", err)
	}
	res, err := daemon.Result(ctx, jobID, grant.Lease.ID, sealed, protocol.DispositionOK)
	if err != nil {
		return fmt.Errorf("result: %w", err)
	}
	say("6. daemon sealed the answer to the site and posted it: accepted=%v state=%s", res.Accepted, res.State)

	fin, err := site.AwaitResult(ctx, jobID)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	text, err := site.OpenResult(fin)
	if err != nil {
		return fmt.Errorf("open result: %w", err)
	}
	say("7. site collected the result from runner %s (owner %s) and opened it: %s", fin.RunnerID, fin.RunnerOwner, text)
	return nil
}

func mustKeyID(identity string) string {
	id, ok := protocol.KeyIDOf(identity)
	if !ok {
		return "(undecodable key)"
	}
	return id
}
