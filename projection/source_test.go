package projection

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/leaktest"
)

// Generous bounds for conditions that depend on the file system notifying
// us or on a poll tick; the conditions themselves usually hold within
// milliseconds.
const (
	waitFor = 10 * time.Second
	tick    = 2 * time.Millisecond
)

// doc is a valid fixture in which owner consents to s1.
func doc(owner string) []byte {
	return fmt.Appendf(nil, `{"consents": [{"owner": %q, "siteId": "s1"}]}`+"\n", owner)
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// logBuffer collects log output from concurrent goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// mode is how a test source notices changes: by notifications alone or by
// polling alone, so that each path is shown to work by itself.
type mode struct {
	name    string
	noWatch bool
}

var modes = []mode{{"watch", false}, {"poll", true}}

func openSource(t *testing.T, path string, m mode) (*Source, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	opts := Options{
		Path:     path,
		Logger:   slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Debounce: 5 * time.Millisecond,
	}
	if m.noWatch {
		opts.PollInterval = 10 * time.Millisecond
	} else {
		opts.PollInterval = -1
	}
	s, err := Open(t.Context(), opts)
	require.NoError(t, err)
	s.noWatch = m.noWatch
	return s, logs
}

// runSource starts s.Run and returns once its first check has happened, so
// the watch is in place before the test changes anything. The source stops
// when the test ends.
func runSource(t *testing.T, s *Source) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	before := s.Status().Checks
	go func() { done <- s.Run(ctx) }()
	require.Eventually(t, func() bool { return s.Status().Checks > before }, waitFor, tick)
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(waitFor):
			t.Error("Run did not return after its context ended")
		}
	})
}

// waitForHash waits until the projection in force was loaded from want.
func waitForHash(t *testing.T, s *Source, want []byte) {
	t.Helper()
	h := sha(want)
	require.Eventually(t, func() bool {
		return s.Status().Hash == h && s.Current().Hash() == h
	}, waitFor, tick, "projection never became %s", h)
}

// writer replaces the fixture's content in one of the ways operators and
// orchestrators do.
type writer interface {
	path() string
	write(t *testing.T, data []byte)
}

// rewriteFile truncates and rewrites the file in place.
type rewriteFile struct{ p string }

func (w rewriteFile) path() string { return w.p }
func (w rewriteFile) write(t *testing.T, data []byte) {
	require.NoError(t, os.WriteFile(w.p, data, 0o644))
}

// renameOver writes a temporary file beside the fixture and renames it over
// the fixture, replacing the inode.
type renameOver struct{ p string }

func (w renameOver) path() string { return w.p }
func (w renameOver) write(t *testing.T, data []byte) {
	tmp, err := os.CreateTemp(filepath.Dir(w.p), ".fixture-*.tmp")
	require.NoError(t, err)
	_, err = tmp.Write(data)
	require.NoError(t, err)
	require.NoError(t, tmp.Close())
	require.NoError(t, os.Rename(tmp.Name(), w.p))
}

// configMap lays files out as the kubelet does for a mounted ConfigMap:
// dir/fixture.json -> ..data/fixture.json, ..data -> a timestamped
// directory, swapped by renaming a new symlink over ..data and deleting the
// old directory. The fixture's own symlink never changes.
type configMap struct {
	dir string
	gen int
}

func newConfigMap(t *testing.T, dir string, data []byte) *configMap {
	c := &configMap{dir: dir}
	c.write(t, data)
	require.NoError(t, os.Symlink(filepath.Join("..data", "fixture.json"), c.path()))
	return c
}

func (c *configMap) path() string { return filepath.Join(c.dir, "fixture.json") }

func (c *configMap) write(t *testing.T, data []byte) {
	c.gen++
	ts := fmt.Sprintf("..2026_01_02_03_04_05.%09d", c.gen)
	require.NoError(t, os.Mkdir(filepath.Join(c.dir, ts), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, ts, "fixture.json"), data, 0o644))
	old, _ := os.Readlink(filepath.Join(c.dir, "..data"))
	tmp := filepath.Join(c.dir, "..data_tmp")
	require.NoError(t, os.Symlink(ts, tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(c.dir, "..data")))
	if old != "" {
		require.NoError(t, os.RemoveAll(filepath.Join(c.dir, old)))
	}
}

// writers makes one writer of each kind, holding data, in a fresh directory.
func writers(t *testing.T, data []byte) map[string]func() writer {
	return map[string]func() writer{
		"rewrite": func() writer {
			w := rewriteFile{filepath.Join(t.TempDir(), "fixture.json")}
			w.write(t, data)
			return w
		},
		"rename-over": func() writer {
			w := renameOver{filepath.Join(t.TempDir(), "fixture.json")}
			w.write(t, data)
			return w
		},
		"configmap-symlink-swap": func() writer {
			return newConfigMap(t, t.TempDir(), data)
		},
	}
}

func TestSourceReloadsChangedContent(t *testing.T) {
	a, b, c := doc("alice"), doc("bob"), doc("carol")
	for _, m := range modes {
		for name, mk := range writers(t, a) {
			t.Run(m.name+"/"+name, func(t *testing.T) {
				leaktest.Check(t) // Run's watcher or poll ticker ends with it
				w := mk()
				s, logs := openSource(t, w.path(), m)
				require.Equal(t, sha(a), s.Current().Hash())
				require.True(t, s.Current().MayRouteFor("alice", "s1"))

				// Readers never block and never see a nil projection while
				// reloads happen.
				stop := make(chan struct{})
				var readers sync.WaitGroup
				readers.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
							p := s.Current()
							_ = p.MayRouteFor("bob", "s1")
							_ = s.Status()
						}
					}
				})
				defer func() { close(stop); readers.Wait() }()

				runSource(t, s)

				w.write(t, b)
				waitForHash(t, s, b)
				require.True(t, s.Current().MayRouteFor("bob", "s1"))
				require.False(t, s.Current().MayRouteFor("alice", "s1"))
				require.Equal(t, uint64(1), s.Status().Reloads)

				w.write(t, c)
				waitForHash(t, s, c)
				require.True(t, s.Current().MayRouteFor("carol", "s1"))
				require.Equal(t, uint64(2), s.Status().Reloads)
				require.NoError(t, s.Status().LastError)

				require.Contains(t, logs.String(), `"msg":"fixture loaded"`)
				require.Contains(t, logs.String(), sha(c))
			})
		}
	}
}

func TestSourceRefusesBadFixture(t *testing.T) {
	a, c := doc("alice"), doc("carol")
	bad := []byte(`{"consents": [{"owner": "mallory", "siteId": "s1", "paused": null}]}`)
	for _, m := range modes {
		for name, mk := range writers(t, a) {
			t.Run(m.name+"/"+name, func(t *testing.T) {
				w := mk()
				s, logs := openSource(t, w.path(), m)
				runSource(t, s)

				// A plain rewrite can be caught half-written (for example
				// empty), which is refused too and counted separately; only
				// atomic replacement guarantees a single failure.
				atomicWrites := name != "rewrite"

				w.write(t, bad)
				require.Eventually(t, func() bool {
					err := s.Status().LastError
					return err != nil && strings.Contains(err.Error(), "paused: null is not allowed")
				}, waitFor, tick)
				st := s.Status()
				failures := st.Failures
				require.GreaterOrEqual(t, failures, uint64(1))
				if atomicWrites {
					require.Equal(t, uint64(1), failures)
				}
				require.False(t, st.LastFailureAt.IsZero())
				require.Equal(t, sha(a), st.Hash, "the previous projection stays in force")
				require.Equal(t, sha(a), s.Current().Hash())
				require.True(t, s.Current().MayRouteFor("alice", "s1"))
				require.False(t, s.Current().MayRouteFor("mallory", "s1"))
				require.Zero(t, st.Reloads)
				require.Contains(t, logs.String(), `"msg":"fixture refused; keeping the previous projection"`)
				require.Contains(t, logs.String(), `"level":"ERROR"`)

				// Finding the same bad content again is not another
				// failure. Something else changing in the directory makes
				// the watcher look again; the poller looks anyway. Two more
				// checks starting means at least one more has finished.
				before := s.Status().Checks
				require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(w.path()), "unrelated"), []byte("x"), 0o644))
				require.Eventually(t, func() bool {
					if s.Status().Checks >= before+2 {
						return true
					}
					// Keep the watcher busy until then.
					_ = os.WriteFile(filepath.Join(filepath.Dir(w.path()), "unrelated"), []byte("y"), 0o644)
					return false
				}, waitFor, 20*time.Millisecond)
				require.Equal(t, failures, s.Status().Failures)
				require.Error(t, s.Status().LastError)

				// A good file recovers.
				w.write(t, c)
				waitForHash(t, s, c)
				st = s.Status()
				require.NoError(t, st.LastError)
				if atomicWrites {
					require.Equal(t, failures, st.Failures)
				}
				require.Equal(t, uint64(1), st.Reloads)
				require.False(t, st.LastFailureAt.IsZero(), "the last failure is remembered")
			})
		}
	}
}

func TestSourceReloadOnDemand(t *testing.T) {
	a, b := doc("alice"), doc("bob")
	w := renameOver{filepath.Join(t.TempDir(), "fixture.json")}
	w.write(t, a)
	s, logs := openSource(t, w.path(), mode{name: "none"})
	require.Equal(t, sha(a), s.Current().Hash())

	// Nothing runs, so nothing changes until asked.
	w.write(t, b)
	require.Equal(t, sha(a), s.Current().Hash())
	require.NoError(t, s.Reload(t.Context()))
	require.Equal(t, sha(b), s.Current().Hash())
	require.Equal(t, uint64(1), s.Status().Reloads)
	require.Contains(t, logs.String(), `"trigger":"manual"`)

	// Same content: no new projection.
	before := s.Current()
	require.NoError(t, s.Reload(t.Context()))
	require.Same(t, before, s.Current())
	require.Equal(t, uint64(1), s.Status().Reloads)

	// Bad content is refused every time it is asked for explicitly.
	w.write(t, []byte(`{"sites": []}`))
	err := s.Reload(t.Context())
	require.ErrorContains(t, err, "consents: required")
	require.ErrorContains(t, err, w.path())
	require.Same(t, before, s.Current())
	require.ErrorContains(t, s.Reload(t.Context()), "consents: required")
	require.Equal(t, uint64(2), s.Status().Failures)

	// So is a missing file.
	require.NoError(t, os.Remove(w.path()))
	err = s.Reload(t.Context())
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, uint64(3), s.Status().Failures)
	require.Same(t, before, s.Current())

	// And a good file recovers.
	w.write(t, a)
	require.NoError(t, s.Reload(t.Context()))
	require.Equal(t, sha(a), s.Current().Hash())
	require.NoError(t, s.Status().LastError)
	require.Equal(t, uint64(2), s.Status().Reloads)
}

func TestSourceReloadHonoursContext(t *testing.T) {
	w := renameOver{filepath.Join(t.TempDir(), "fixture.json")}
	w.write(t, doc("alice"))
	s, _ := openSource(t, w.path(), mode{name: "none"})

	s.sem <- struct{}{} // a reload in progress
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, s.Reload(ctx), context.Canceled)
	<-s.sem
	require.NoError(t, s.Reload(t.Context()))
}

func TestSourceHashTracksFileBytes(t *testing.T) {
	a := doc("alice")
	// Same meaning, different bytes: a different hash, so replicas whose
	// files differ at all can be told apart.
	a2 := append(bytes.Clone(a), ' ')
	w := renameOver{filepath.Join(t.TempDir(), "fixture.json")}
	w.write(t, a)
	s, logs := openSource(t, w.path(), modes[0])
	require.Equal(t, sha(a), s.Current().Hash())
	require.Equal(t, sha(a), s.Status().Hash)
	require.Contains(t, logs.String(), sha(a))
	runSource(t, s)

	w.write(t, a2)
	waitForHash(t, s, a2)
	require.NotEqual(t, sha(a), sha(a2))
	require.Equal(t, s.Current().Hash(), s.Status().Hash)
}

func TestSourceReplace(t *testing.T) {
	a := doc("alice")
	w := renameOver{filepath.Join(t.TempDir(), "fixture.json")}
	w.write(t, a)
	s, _ := openSource(t, w.path(), modes[1])
	runSource(t, s)

	other, err := New(&Fixture{Consents: []ConsentRecord{{Owner: "zoe", SiteID: "s1"}}})
	require.NoError(t, err)
	s.Replace(other)
	require.Same(t, other, s.Current())
	require.Equal(t, other.Hash(), s.Status().Hash)

	// Polling an unchanged file does not undo the replacement.
	before := s.Status().Checks
	require.Eventually(t, func() bool { return s.Status().Checks >= before+2 }, waitFor, tick)
	require.Same(t, other, s.Current())

	// An explicit reload puts the file back.
	require.NoError(t, s.Reload(t.Context()))
	require.Equal(t, sha(a), s.Current().Hash())

	require.Panics(t, func() { s.Replace(nil) })
}

func TestOpenRefusesToStart(t *testing.T) {
	dir := t.TempDir()

	_, err := Open(t.Context(), Options{})
	require.Error(t, err)

	missing := filepath.Join(dir, "missing.json")
	_, err = Open(t.Context(), Options{Path: missing})
	require.ErrorIs(t, err, os.ErrNotExist)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"consents": [], "extra": true}`), 0o644))
	s, err := Open(t.Context(), Options{Path: bad})
	require.Nil(t, s)
	require.ErrorContains(t, err, `unknown key "extra"`)
	require.ErrorContains(t, err, bad)
}

func TestOpenDefaults(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fixture.json")
	require.NoError(t, os.WriteFile(p, doc("alice"), 0o644))
	s, err := Open(t.Context(), Options{Path: p})
	require.NoError(t, err)
	require.Equal(t, DefaultPollInterval, s.poll)
	require.Equal(t, DefaultDebounce, s.debounce)
	require.NotNil(t, s.log)

	st := s.Status()
	require.Equal(t, p, st.Path)
	require.Equal(t, sha(doc("alice")), st.Hash)
	require.False(t, st.LoadedAt.IsZero())
	require.Zero(t, st.Reloads, "the initial load is not a reload")
	require.Zero(t, st.Failures)
	require.Equal(t, uint64(1), st.Checks)
}

func TestSourceRunTwice(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fixture.json")
	require.NoError(t, os.WriteFile(p, doc("alice"), 0o644))
	s, _ := openSource(t, p, modes[0])
	runSource(t, s)
	require.ErrorContains(t, s.Run(t.Context()), "already running")
}

func TestStaticSource(t *testing.T) {
	f := &Fixture{Consents: []ConsentRecord{{Owner: "alice", SiteID: "s1"}}}
	s, err := Static(f)
	require.NoError(t, err)
	want, err := New(f)
	require.NoError(t, err)
	require.Equal(t, want.Hash(), s.Current().Hash())
	require.True(t, s.Current().MayRouteFor("alice", "s1"))
	require.Equal(t, want.Hash(), s.Status().Hash)
	require.Empty(t, s.Status().Path)

	require.NoError(t, s.Reload(t.Context()), "nothing to reload")
	require.Equal(t, want.Hash(), s.Current().Hash())

	other, err := New(Empty())
	require.NoError(t, err)
	s.Replace(other)
	require.Same(t, other, s.Current())
	require.False(t, s.Current().MayRouteFor("alice", "s1"))

	// Run only waits.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("Run did not return")
	}

	_, err = Static(&Fixture{Consents: []ConsentRecord{{Owner: ""}}})
	require.Error(t, err)
}

func TestSourceWatchIgnoresUnrelatedFiles(t *testing.T) {
	a := doc("alice")
	w := renameOver{filepath.Join(t.TempDir(), "fixture.json")}
	w.write(t, a)
	s, _ := openSource(t, w.path(), modes[0])
	runSource(t, s)
	first := s.Current()

	// Other files in the directory make the watcher look, but unchanged
	// content installs nothing.
	before := s.Status().Checks
	require.Eventually(t, func() bool {
		_ = os.WriteFile(filepath.Join(filepath.Dir(w.path()), "other"), []byte(time.Now().String()), 0o644)
		return s.Status().Checks >= before+2
	}, waitFor, 20*time.Millisecond)
	require.Same(t, first, s.Current())
	require.Zero(t, s.Status().Reloads)
	require.Zero(t, s.Status().Failures)
	require.NoError(t, s.Status().LastError)
}
