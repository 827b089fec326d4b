package valkeytest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestStartAnswersAndFlushes(t *testing.T) {
	s := Start(t)
	c := s.Client(t)
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if s.Source == "env" {
		return // a shared server is never flushed
	}
	s.Flush(t)
	if n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("after FLUSHALL: %d keys, %v", n, err)
	}
	if v := s.Version(t); v == "unknown" {
		t.Fatal("no version reported")
	}
}

func TestStopAndRestart(t *testing.T) {
	s := Start(t)
	if !s.CanRestart() {
		t.Skip("server not started here")
	}
	s.Stop(t)
	if _, err := command(context.Background(), s.Addr, "PING"); err == nil {
		t.Fatal("stopped server still answers")
	}
	s.Restart(t)
	if err := waitPing(context.Background(), s.Addr, time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestPrefixCarriesItsOwnHashTag(t *testing.T) {
	a, b := Prefix(t), Prefix(t)
	if a == b {
		t.Fatal("prefixes repeat")
	}
	open, end := strings.IndexByte(a, '{'), strings.IndexByte(a, '}')
	if open < 0 || end <= open+1 {
		t.Fatalf("prefix %q has no hash tag", a)
	}
}

func TestClusterFromBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start-up skipped in -short mode")
	}
	s := StartCluster(t)
	c := s.Client(t)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "{x}1", "{x}2"} {
		if err := c.Do(ctx, c.B().Set().Key(k).Value("v").Build()).Error(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
}

// TestClusterByHand forms the cluster without the CLI, the fallback when
// no valkey-cli or redis-cli is installed.
func TestClusterByHand(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start-up skipped in -short mode")
	}
	bin := serverBinary()
	if bin == "" {
		unavailable(t, "a server binary")
	}
	var addrs []string
	for range 3 {
		p := startProcess(t, bin, Options{}, []string{"--cluster-enabled", "yes"})
		addrs = append(addrs, p.addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := formByHand(ctx, addrs); err != nil {
		t.Fatal(err)
	}
	if err := waitClusterOK(ctx, addrs, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestEngineIsTheOneAskedFor pins the engine the Valkey tests run on where
// one is asked for: .ci/run sets RELAYD_VALKEY_ENGINE to "valkey 8.0.1",
// the build it puts first on PATH, so a PATH that silently fell back to
// Debian's Redis fails here instead of passing on the wrong server.
func TestEngineIsTheOneAskedFor(t *testing.T) {
	want := os.Getenv("RELAYD_VALKEY_ENGINE")
	if want == "" {
		t.Skip("RELAYD_VALKEY_ENGINE is not set; nothing to pin")
	}
	if got := Start(t).Version(t); got != want {
		t.Fatalf("the tests' server is %q, want %q", got, want)
	}
	if got := Shared(t).Version(t); got != want {
		t.Fatalf("the shared server is %q, want %q", got, want)
	}
}

// TestBinaryStartsTheNamedEngine checks Options.Binary, which the store
// contract uses to run on Redis beside Valkey.
func TestBinaryStartsTheNamedEngine(t *testing.T) {
	s := StartWith(t, Options{Binary: "redis-server"})
	if v := s.Version(t); !strings.HasPrefix(v, "redis ") {
		t.Fatalf("redis-server reported %q", v)
	}
}
