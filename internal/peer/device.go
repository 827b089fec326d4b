package peer

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/byollm/relayd/protocol"
)

// device is the plumbing both test daemons share, whichever protocol they
// speak: the transport, the device keys, where the endpoints are, the fetch
// pacing, the kinds served and the runner id requests are signed as. Daemon
// and Daemon2 embed it and add what their protocol pins about sites.
type device struct {
	*Transport
	sealer       Sealer
	keys         Keys
	basePath     string
	pollInterval time.Duration
	fetchWait    time.Duration
	kinds        []string

	// mu guards runnerID here and the embedding daemon's pinned sites.
	mu       sync.Mutex
	runnerID string
}

// init sets the device up from cfg, with defaults where cfg leaves a value
// unset. It is a method, not a constructor, so the mutex is never copied.
func (d *device) init(cfg Config, keys Keys, runnerID string) error {
	t, err := NewTransport(cfg)
	if err != nil {
		return err
	}
	d.Transport = t
	d.keys = keys
	d.basePath = DefaultBasePath
	if cfg.BasePath != "" {
		d.basePath = strings.TrimRight(cfg.BasePath, "/")
	}
	d.pollInterval = cfg.PollInterval
	if d.pollInterval <= 0 {
		d.pollInterval = DefaultPollInterval
	}
	d.fetchWait = cfg.FetchWait
	if d.fetchWait <= 0 {
		d.fetchWait = DefaultFetchWait
	}
	d.kinds = append([]string(nil), cfg.Kinds...)
	if len(d.kinds) == 0 {
		d.kinds = []string{protocol.KindGenerate, protocol.KindChat}
	}
	d.runnerID = runnerID
	return nil
}

// Keys returns the daemon's keys.
func (d *device) Keys() Keys { return d.keys }

// RunnerID returns the runner id the daemon signs as: "" before pairing,
// unless one was given to the constructor.
func (d *device) RunnerID() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runnerID
}

// Path returns the URL path of a daemon endpoint under the base path.
func (d *device) Path(endpoint string) string { return d.basePath + "/" + endpoint }

// sign adds to h the x-byollm-runner signature of body sent to endpoint
// (the name as signed, e.g. "claim") at issuedAt, and returns h.
func (d *device) sign(h http.Header, endpoint string, body []byte, issuedAt int64) http.Header {
	protocol.SignRequest(h, protocol.HeaderRunner, d.keys.identity, endpoint, d.RunnerID(), issuedAt, body)
	return h
}

// request is the POST of body to endpoint with header.
func (d *device) request(endpoint string, header http.Header, body []byte) RawRequest {
	return RawRequest{Method: http.MethodPost, Path: d.Path(endpoint), Header: header, Body: body}
}

// paired returns the runner id, or an error before there is one.
func (d *device) paired(endpoint string) (string, error) {
	id := d.RunnerID()
	if id == "" {
		return "", fmt.Errorf("%s: no runner id: pair first", endpoint)
	}
	return id, nil
}

// newWork hands a held job to the lifecycle with this device's keys, sealer
// and fetch pacing; h makes the holder's calls in the daemon's protocol.
func (d *device) newWork(h leaseHolder, steps Steps, lease protocol.LeaseRef, deadlineAt int64) *work {
	return &work{
		h: h, keys: d.keys, sealer: &d.sealer, every: d.pollInterval, limit: d.fetchWait, steps: steps,
		lease: lease, deadlineAt: deadlineAt,
	}
}
