// Command wirediff is a wire differential of two relayd builds: it builds
// the relay of an old commit and of the current tree, runs each on the
// example fixture with default flags, drives both with the same scripted
// requests of protocols "0" and "2" (and the admin pages), and compares
// every answer's status, Content-Type, Retry-After and body bytes after
// masking only what is random or time-dependent by nature.
//
//	go run ./internal/wirediff --old-commit 1979e75 [--stores memory,valkey]
//
// It prints each difference and exits 1 if there is any.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

func main() {
	var o options
	flag.StringVar(&o.oldCommit, "old-commit", "1979e75", "the commit whose relayd is the old side")
	flag.StringVar(&o.stores, "stores", "memory,valkey", "stores to run each side on, comma-separated (valkey needs valkey-server or redis-server on PATH)")
	flag.StringVar(&o.fixture, "fixture", "deploy/fixture.example.json", "projection fixture, relative to the module root")
	flag.StringVar(&o.keys, "keys", "deploy/demo-keys.json", "demo keys the fixture approves, relative to the module root")
	flag.BoolVar(&o.list, "list", false, "also print every exchange of the old side, masked")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	diffs, err := run(ctx, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wirediff:", err)
		os.Exit(2)
	}
	if diffs > 0 {
		os.Exit(1)
	}
}

type options struct {
	oldCommit, stores, fixture, keys string
	list                             bool
}

// run builds both sides, runs the script on each store and reports.
func run(ctx context.Context, o options, out io.Writer) (int, error) {
	bins, err := buildBoth(ctx, o.oldCommit)
	if err != nil {
		return 0, err
	}
	defer bins.cleanup()
	total := 0
	for _, store := range strings.Split(o.stores, ",") {
		oldRun, err := runSide(ctx, bins.root, bins.old, store, o)
		if err != nil {
			return 0, fmt.Errorf("old relay on %s: %w", store, err)
		}
		newRun, err := runSide(ctx, bins.root, bins.new, store, o)
		if err != nil {
			return 0, fmt.Errorf("new relay on %s: %w", store, err)
		}
		total += report(out, store, o.oldCommit, oldRun, newRun, o.list)
	}
	return total, nil
}
