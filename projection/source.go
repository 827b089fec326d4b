package projection

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Defaults for Options.
const (
	DefaultPollInterval = 5 * time.Second
	DefaultDebounce     = 100 * time.Millisecond
)

// Options configure a file-backed Source.
type Options struct {
	// Path is the fixture file. It may be a symlink, as in a Kubernetes
	// ConfigMap mount; it is read through the link every time.
	Path string
	// Logger receives load and refusal logs. Nil discards them.
	Logger *slog.Logger
	// PollInterval is how often the file's content is hashed as a fallback
	// to change notifications. Zero means DefaultPollInterval; a negative
	// value turns polling off.
	PollInterval time.Duration
	// Debounce is how long Run waits after the first change notification
	// before reading the file, so a burst of notifications (a rename, a
	// symlink swap) costs one read. Zero or negative means DefaultDebounce.
	Debounce time.Duration
}

// Status describes a Source's loading history, for health checks, the
// debug page and metrics.
type Status struct {
	// Path is the fixture file, empty for a static source.
	Path string
	// Hash is the hash of the projection in force (Projection.Hash).
	Hash string
	// LoadedAt is when the projection in force was installed.
	LoadedAt time.Time
	// Reloads counts reloads that installed new content, not counting the
	// initial load.
	Reloads uint64
	// Failures counts refused reloads: unreadable or invalid content. The
	// same refused content found again by the watcher or the poller is not
	// counted twice; an explicit Reload always counts.
	Failures uint64
	// Checks counts reads of the file, whatever asked for them.
	Checks uint64
	// LastCheckAt is when the file was last read.
	LastCheckAt time.Time
	// LastError is why the content now on disk was refused, or nil when
	// the most recent read found content that is in force.
	LastError error
	// LastFailureAt is when a reload was last refused, zero if never.
	LastFailureAt time.Time
}

// trigger says what started a reload, for logs and for deduplication.
type trigger string

const (
	triggerInitial trigger = "initial"
	triggerStart   trigger = "start"
	triggerWatch   trigger = "watch"
	triggerPoll    trigger = "poll"
	triggerManual  trigger = "manual"
)

// automatic reports whether nobody asked for this reload explicitly.
func (t trigger) automatic() bool { return t == triggerStart || t == triggerWatch || t == triggerPoll }

// Source holds the current projection of a fixture file and replaces it
// when the file's content changes. Readers call Current, which never
// blocks; Run watches the file; Reload re-reads it on demand.
//
// A file that cannot be read or parsed never replaces a good projection: it
// is logged, counted and refused, and the previous projection stays in
// force.
type Source struct {
	path     string
	log      *slog.Logger
	poll     time.Duration
	debounce time.Duration

	cur     atomic.Pointer[Projection]
	running atomic.Bool
	noWatch bool // tests only: exercise polling alone
	// sem serialises reloads; a channel rather than a mutex so a waiting
	// Reload can give up when its context ends.
	sem chan struct{}

	// Guarded by sem: what the last read found, so that automatic checks
	// act only on new content.
	fileHash string // content last installed from the file
	refused  string // content (or read error) last refused

	mu     sync.Mutex // guards status
	status Status
}

// Open loads the fixture at opts.Path and returns a Source serving it. An
// unreadable or invalid file is an error: a relay must not start without a
// projection. Open does not watch the file; call Run for that.
func Open(ctx context.Context, opts Options) (*Source, error) {
	if opts.Path == "" {
		return nil, errors.New("projection: no fixture path given")
	}
	s := &Source{
		path:     opts.Path,
		log:      opts.Logger,
		poll:     opts.PollInterval,
		debounce: opts.Debounce,
		sem:      make(chan struct{}, 1),
		status:   Status{Path: opts.Path},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.poll == 0 {
		s.poll = DefaultPollInterval
	}
	if s.debounce <= 0 {
		s.debounce = DefaultDebounce
	}
	if err := s.reload(ctx, triggerInitial); err != nil {
		return nil, err
	}
	return s, nil
}

// Static returns a Source that serves the projection of f and has no file
// behind it: Reload does nothing and Run only waits. It is meant for tests
// and for embedding the relay without a control plane.
func Static(f *Fixture) (*Source, error) {
	p, err := New(f)
	if err != nil {
		return nil, err
	}
	s := &Source{
		log: slog.New(slog.DiscardHandler),
		sem: make(chan struct{}, 1),
	}
	s.Replace(p)
	return s, nil
}

// Current returns the projection in force. It never blocks and never
// returns nil for a Source made by Open or Static.
func (s *Source) Current() *Projection { return s.cur.Load() }

// Replace puts p in force at once, bypassing the file. It is meant for
// tests. For a file-backed source, the next change of the file's content,
// or the next Reload, puts the file's projection back.
func (s *Source) Replace(p *Projection) {
	if p == nil {
		panic("projection: Replace with a nil projection")
	}
	// Wait out a reload in progress so the status and the projection in
	// force cannot disagree.
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	s.cur.Store(p)
	s.mu.Lock()
	s.status.Hash = p.Hash()
	s.status.LoadedAt = time.Now()
	s.mu.Unlock()
}

// Status returns a snapshot of the source's loading history.
func (s *Source) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Reload reads the fixture file now and puts its projection in force if
// its content differs from the projection in force. It returns the reason a
// bad file was refused (after logging it); the previous projection stays.
// cmd/relayd calls it on SIGHUP. On a static source it does nothing.
func (s *Source) Reload(ctx context.Context) error {
	if s.path == "" {
		return nil
	}
	return s.reload(ctx, triggerManual)
}

// Run watches the fixture until ctx is done, reloading when the file's
// content changes. It watches the file's directory rather than the file,
// so that a file renamed over the old one, or a Kubernetes ConfigMap's
// "..data" symlink swap, is seen; and it hashes the file every
// PollInterval in case notifications are missed or unavailable (for
// example when the path is a symlink into another directory). Run returns
// nil once ctx is done, or an error at once if the source is already
// running.
func (s *Source) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("projection: source is already running")
	}
	defer s.running.Store(false)
	if s.path == "" {
		<-ctx.Done()
		return nil
	}

	var (
		events    <-chan fsnotify.Event
		watchErrs <-chan error
	)
	if !s.noWatch {
		var stop func()
		events, watchErrs, stop = s.watch()
		defer stop()
	}

	var tick <-chan time.Time
	if s.poll > 0 {
		t := time.NewTicker(s.poll)
		defer t.Stop()
		tick = t.C
	}
	if events == nil && tick == nil {
		s.log.Warn("fixture is neither watched nor polled; it reloads only on demand", "path", s.path)
	}

	// The file may have changed between Open and the watch starting.
	_ = s.reload(ctx, triggerStart)

	debounce := time.NewTimer(s.debounce)
	debounce.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			debounce.Stop()
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				s.log.Warn("fixture watch ended; relying on polling", "path", s.path)
				continue
			}
			s.log.Debug("fixture directory changed", "path", s.path, "event", ev.String())
			// Coalesce a burst into one read, but do not push the read
			// back while events keep coming: a busy directory must not
			// starve reloads.
			if !pending {
				pending = true
				debounce.Reset(s.debounce)
			}
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
				continue
			}
			s.log.Warn("fixture watch error", "path", s.path, "err", err)
		case <-debounce.C:
			pending = false
			_ = s.reload(ctx, triggerWatch)
		case <-tick:
			_ = s.reload(ctx, triggerPoll)
		}
	}
}

// watch starts watching the fixture's directory. When that is impossible
// it logs why and returns nil channels, leaving polling to do the work.
func (s *Source) watch() (<-chan fsnotify.Event, <-chan error, func()) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		s.log.Warn("cannot watch the fixture; relying on polling", "path", s.path, "err", err)
		return nil, nil, func() {}
	}
	dir := filepath.Dir(s.path)
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		s.log.Warn("cannot watch the fixture directory; relying on polling", "path", s.path, "dir", dir, "err", err)
		return nil, nil, func() {}
	}
	return w.Events, w.Errors, func() { _ = w.Close() }
}

// reload is the one path by which file content becomes the projection in
// force, whatever asked for it.
func (s *Source) reload(ctx context.Context, trig trigger) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("projection: reload %s: %w", s.path, ctx.Err())
	}
	defer func() { <-s.sem }()

	now := time.Now()
	s.mu.Lock()
	s.status.Checks++
	s.status.LastCheckAt = now
	s.mu.Unlock()

	data, err := os.ReadFile(s.path)
	if err != nil {
		return s.refuse(trig, now, "read: "+err.Error(), "", fmt.Errorf("projection: read fixture: %w", err))
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])

	// Automatic checks compare with the last content taken from the file;
	// an explicit reload compares with what is in force, so it also undoes
	// a Replace.
	unchanged := hash == s.fileHash
	if trig == triggerManual {
		cur := s.cur.Load()
		unchanged = cur != nil && hash == cur.Hash()
	}
	if unchanged {
		s.refused = ""
		s.mu.Lock()
		s.status.LastError = nil
		s.mu.Unlock()
		return nil
	}

	p, err := FromJSON(data)
	if err != nil {
		return s.refuse(trig, now, "content: "+hash, hash, fmt.Errorf("projection: load %s: %w", s.path, err))
	}

	s.cur.Store(p)
	s.fileHash = hash
	s.refused = ""
	// Log before publishing the status, so whoever sees the new hash in
	// Status can also find it in the log.
	f := p.f
	s.log.Info("fixture loaded",
		"path", s.path, "hash", hash, "trigger", string(trig),
		"sites", len(f.Sites), "consents", len(f.Consents), "devices", len(f.Devices),
		"rosters", len(f.Rosters), "revoked", len(f.Revoked))
	for _, w := range p.Warnings() {
		s.log.Warn("fixture warning", "path", s.path, "hash", hash, "warning", w)
	}
	s.mu.Lock()
	s.status.Hash = hash
	s.status.LoadedAt = now
	s.status.LastError = nil
	if trig != triggerInitial {
		s.status.Reloads++
	}
	s.mu.Unlock()
	return nil
}

// refuse records and logs a reload that could not be put in force. key
// identifies what was refused, so the watcher and the poller do not log and
// count the same bad file again every few seconds.
func (s *Source) refuse(trig trigger, now time.Time, key, hash string, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if trig.automatic() && key == s.refused && s.status.LastError != nil {
		return s.status.LastError
	}
	s.refused = key
	s.status.LastError = err
	if trig == triggerInitial {
		return err
	}
	s.status.Failures++
	s.status.LastFailureAt = now
	s.log.Error("fixture refused; keeping the previous projection",
		"path", s.path, "trigger", string(trig), "hash", hash,
		"current", s.status.Hash, "err", err)
	return err
}
