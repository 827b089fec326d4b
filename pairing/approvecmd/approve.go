// Package approvecmd is `relayd approve`, the command an operator runs to
// approve a device-code pairing without a control plane (decision P2-D3): it
// asks a relay's admin listener which device a user code stands for, marks
// that very code approved there (RD-D13: anyone may start a code for a public
// device identity, and only the marked one collects), then writes the
// device into the fixture under an owner with pairing.Approve. Every
// replica reloads the fixture when it changes, so the marked code's next
// poll answers approved. cmd/relayd only calls Run.
package approvecmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/byollm/relayd/pairing"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

// Request is one approval as the operator asked for it.
type Request struct {
	// AdminURL is a relay's admin listener, such as http://127.0.0.1:9090.
	AdminURL string
	// Fixture is the path of the fixture every replica loads.
	Fixture string
	// Owner is who the device will belong to; they need a consent in the
	// fixture.
	Owner string
	// RunnerID names the device to the relay. Empty means: the one the
	// device already has under Owner, else a new one (NewRunnerID).
	RunnerID string
	// UserCode is the code as the daemon's user read it out.
	UserCode string
	// GrantKey is --grant-key: "" enrols a new device with the relay's
	// current grant key, if it has one, and leaves a re-approved device's
	// as it is; "none" or a key (unpadded base64url) is written either way
	// (spec grants.md G-R26).
	GrantKey string
}

// Result is what the command prints, as one JSON line.
type Result struct {
	RunnerID string `json:"runnerId"`
	Owner    string `json:"owner"`
	KeyID    string `json:"keyId"`
	// GrantKey is the key the device's record is enrolled with, omitted
	// when none.
	GrantKey string `json:"grantKey,omitempty"`
}

// Errors the approval refuses with, wrapped with detail.
var (
	ErrUnknownCode = errors.New("no pending pairing has that user code")
	ErrNoConsent   = errors.New("the owner has no consent in the fixture")
	ErrOtherOwner  = errors.New("the device is already approved for another owner")
	ErrRevoked     = errors.New("the device is revoked in the fixture")
)

// Approver approves pairings. Its zero value is not usable; New makes one.
type Approver struct {
	http   *http.Client
	random io.Reader
}

// New returns an approver asking the admin listener through client and
// drawing runner ids from random (crypto/rand.Reader in production).
func New(client *http.Client, random io.Reader) *Approver {
	return &Approver{http: client, random: random}
}

// Approve resolves r.UserCode through the admin listener, then approves
// the device behind it into the fixture. An approval already written
// exactly so writes nothing and succeeds again.
func (a *Approver) Approve(ctx context.Context, r Request) (Result, error) {
	code, err := pairing.ParseUserCode(r.UserCode)
	if err != nil {
		return Result{}, fmt.Errorf("user code %q: %w", r.UserCode, err)
	}
	if r.Owner == "" {
		return Result{}, errors.New("an owner is required (--owner)")
	}
	details, err := a.lookup(ctx, r.AdminURL, code)
	if err != nil {
		return Result{}, err
	}
	keyID, ok := protocol.KeyIDOf(details.Device.Identity)
	if !ok {
		return Result{}, fmt.Errorf("the pending device's identity key does not decode")
	}
	current, err := loadFixture(r.Fixture)
	if err != nil {
		return Result{}, err
	}
	runnerID, err := a.runnerIDFor(current, r, details)
	if err != nil {
		return Result{}, err
	}
	// Mark first: the fixture's record is what makes a poll answer, and by
	// then the code that may collect it must be known.
	if err := a.mark(ctx, r.AdminURL, details); err != nil {
		return Result{}, err
	}
	approval := pairing.Approval{Owner: r.Owner, RunnerID: runnerID, Device: details.Device}
	if approval.GrantKey, approval.ReplaceGrantKey, err = a.grantKeyFor(ctx, r); err != nil {
		return Result{}, err
	}
	if _, err := pairing.Approve(r.Fixture, approval); err != nil {
		return Result{}, explain(err, runnerID)
	}
	res := Result{RunnerID: runnerID, Owner: r.Owner, KeyID: keyID}
	if written, err := loadFixture(r.Fixture); err == nil {
		if d, ok := written.DeviceFor(runnerID); ok {
			res.GrantKey = d.GrantKey.String()
		}
	}
	return res, nil
}

// grantKeyFor is the key to enrol the device with and whether it replaces
// a re-approved record's: --grant-key as given, else the relay's current
// key (GET /grant-keys), for new devices only.
func (a *Approver) grantKeyFor(ctx context.Context, r Request) (projection.GrantKey, bool, error) {
	switch r.GrantKey {
	case "none":
		return projection.GrantKey{}, true, nil
	case "":
	default:
		k, err := projection.ParseGrantKey(r.GrantKey)
		if err != nil {
			return projection.GrantKey{}, false, fmt.Errorf("--grant-key: %w", err)
		}
		return k, true, nil
	}
	var keys struct {
		Current *struct {
			PublicKey string `json:"publicKey"`
		} `json:"current"`
	}
	status, err := a.adminGet(ctx, r.AdminURL, "/grant-keys", &keys)
	if status == http.StatusNotFound {
		return projection.GrantKey{}, false, nil // a relay older than grants has no key
	}
	if err != nil {
		return projection.GrantKey{}, false, fmt.Errorf("ask the relay for its grant key: %w", err)
	}
	if keys.Current == nil {
		return projection.GrantKey{}, false, nil
	}
	k, err := projection.ParseGrantKey(keys.Current.PublicKey)
	if err != nil {
		return projection.GrantKey{}, false, fmt.Errorf("the relay's current grant key: %w", err)
	}
	return k, false, nil
}

// adminGet reads one JSON answer of the admin listener into out, and
// returns its status (0 when none came).
func (a *Approver) adminGet(ctx context.Context, adminURL, path string, out any) (int, error) {
	base, err := url.Parse(strings.TrimRight(adminURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return 0, fmt.Errorf("admin URL %q: want http://HOST:PORT of a relay's admin listener", adminURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.String()+path, nil)
	if err != nil {
		return 0, fmt.Errorf("admin request: %w", err)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("ask the admin listener: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read the admin listener's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("the admin listener answered %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return resp.StatusCode, fmt.Errorf("the admin listener's answer does not decode: %w", err)
	}
	return resp.StatusCode, nil
}

// lookup asks the admin listener for the pending pairing of code.
func (a *Approver) lookup(ctx context.Context, adminURL, code string) (pairing.Details, error) {
	d, err := a.ask(ctx, adminURL, http.MethodGet, code, "", nil)
	if err != nil {
		return pairing.Details{}, err
	}
	if d.UserCode != code || !d.Device.IsConsistent() {
		return pairing.Details{}, fmt.Errorf("the admin listener answered for another code or an inconsistent device")
	}
	return d, nil
}

// mark has the admin listener mark the code approved, for exactly the
// device the lookup showed.
func (a *Approver) mark(ctx context.Context, adminURL string, d pairing.Details) error {
	body, err := json.Marshal(map[string]string{"identity": d.Device.Identity})
	if err != nil {
		return fmt.Errorf("encode the approval: %w", err)
	}
	marked, err := a.ask(ctx, adminURL, http.MethodPost, d.UserCode, "/approval", body)
	if err != nil {
		return fmt.Errorf("mark the code approved: %w", err)
	}
	if marked.UserCode != d.UserCode || marked.Device.Identity != d.Device.Identity {
		return fmt.Errorf("the admin listener marked another code or device")
	}
	return nil
}

// ask sends one request about code to the admin listener and decodes its
// pairing.Details answer.
func (a *Approver) ask(ctx context.Context, adminURL, method, code, suffix string, body []byte) (pairing.Details, error) {
	base, err := url.Parse(strings.TrimRight(adminURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return pairing.Details{}, fmt.Errorf("admin URL %q: want http://HOST:PORT of a relay's admin listener", adminURL)
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base.String()+"/pairings/"+url.PathEscape(code)+suffix, reader)
	if err != nil {
		return pairing.Details{}, fmt.Errorf("admin request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return pairing.Details{}, fmt.Errorf("ask the admin listener: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return pairing.Details{}, fmt.Errorf("read the admin listener's answer: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return pairing.Details{}, fmt.Errorf("%w %s: it is mistyped, expired, already collected, or was started on a relay that shares no store with %s",
			ErrUnknownCode, code, base.Host)
	default:
		return pairing.Details{}, fmt.Errorf("the admin listener answered %d: %s", resp.StatusCode, strings.TrimSpace(string(answer)))
	}
	var d pairing.Details
	if err := json.Unmarshal(answer, &d); err != nil {
		return pairing.Details{}, fmt.Errorf("the admin listener's answer does not decode: %w", err)
	}
	return d, nil
}

func loadFixture(path string) (*projection.Projection, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the fixture: %w", err)
	}
	p, err := projection.FromJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("the fixture %s does not load: %w", path, err)
	}
	return p, nil
}

// runnerIDFor checks the owner may be given a device and picks its runner
// id: the one asked for; else the one the device already has under this
// owner, so approving twice changes nothing; else a new one no other
// device uses.
func (a *Approver) runnerIDFor(p *projection.Projection, r Request, d pairing.Details) (string, error) {
	if len(p.SitesFor(r.Owner)) == 0 {
		return "", fmt.Errorf("%w: %q consents to no site, so the device could serve nothing; add a consent first", ErrNoConsent, r.Owner)
	}
	existing, known := p.DeviceByFingerprint(d.Device.Identity)
	if known && existing.Owner != r.Owner {
		return "", fmt.Errorf("%w: %q (runner %s); edit the fixture to move it", ErrOtherOwner, existing.Owner, existing.RunnerID)
	}
	if known && existing.Revoked {
		// A revocation is a decision about these keys; whoever holds them
		// can start a code, so a code alone must not undo it.
		return "", fmt.Errorf("%w (runner %s); delete its record first to approve it again", ErrRevoked, existing.RunnerID)
	}
	switch {
	case r.RunnerID != "":
		return r.RunnerID, nil
	case known:
		return existing.RunnerID, nil
	}
	for range 8 {
		id, err := NewRunnerID(a.random)
		if err != nil {
			return "", err
		}
		if _, taken := p.DeviceFor(id); !taken {
			return id, nil
		}
	}
	return "", errors.New("no free runner id was drawn; pass --runner-id")
}

// NewRunnerID draws a runner id: "runner_" and 12 lowercase hex digits
// (48 random bits), the shape of the reference's ids.
func NewRunnerID(random io.Reader) (string, error) {
	var b [6]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", fmt.Errorf("draw a runner id: %w", err)
	}
	return "runner_" + hex.EncodeToString(b[:]), nil
}

// explain turns Approve's refusals into what the operator should do.
func explain(err error, runnerID string) error {
	switch {
	case errors.Is(err, pairing.ErrRunnerIDTaken):
		return fmt.Errorf("runner id %q is taken by another device; choose another --runner-id", runnerID)
	case errors.Is(err, pairing.ErrFixtureChanged):
		return errors.New("the fixture changed while it was being edited; run the command again")
	}
	return err
}

// Run is `relayd approve` with args (what follows "approve"): it prints
// the Result as one JSON line on stdout and returns 0, or prints one line
// on stderr and returns 1 (2 for a usage error).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	r, err := parseArgs(args, stderr)
	if errors.Is(err, errHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "relayd approve: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := New(&http.Client{Timeout: 10 * time.Second}, rand.Reader).Approve(ctx, r)
	if err != nil {
		fmt.Fprintf(stderr, "relayd approve: %v\n", err)
		return 1
	}
	line, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintf(stderr, "relayd approve: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", line)
	return 0
}
