// Command opcost measures what each store operation of the per-job mix
// costs one Valkey server: it drives a batch of calls of one operation at
// a time, directly through the store, and prints one JSON line per
// operation with the server's commands per call and, when the server runs
// under callgrind, its instructions per call. See docs/performance.md,
// "Issue 25: where the script cost doubled".
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/byollm/relayd/internal/bench"
)

func main() {
	var (
		addr     = flag.String("valkey-addr", "127.0.0.1:6379", "Valkey host:port")
		calls    = flag.Int("calls", 1000, "calls of each operation")
		round    = flag.Int("round", 100, "calls of each operation per round of the whole mix (a claim must get its payload within 10 s)")
		only     = flag.String("only", "", "comma-separated operations to report (default: all)")
		cgPID    = flag.Int("callgrind-pid", 0, "pid of a valkey-server running under valgrind --tool=callgrind, to zero and dump around each batch")
		cgOut    = flag.String("callgrind-out", "", "that server's --callgrind-out-file (its dumps are this path .1, .2, ...)")
		comment  = flag.String("tag", "", "a label copied into every line (for example the commit measured)")
		scripts  = flag.String("scripts", "", "instead of the operations, measure the definitions (and memo) of each served script in this folder (docs/performance.md)")
		annotate = flag.Bool("annotate", false, "read earlier output lines on stdin and add each one's instructionsPerCallBy from its dumps")
	)
	flag.Parse()
	if *annotate {
		if err := annotateLines(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "opcost: %v\n", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	o := bench.OpCostOptions{Addr: *addr, Calls: *calls, Round: *round}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	if *cgPID != 0 {
		if *cgOut == "" {
			fmt.Fprintln(os.Stderr, "opcost: -callgrind-pid needs -callgrind-out")
			os.Exit(2)
		}
		o.Callgrind = &bench.Callgrind{PID: *cgPID, OutFile: *cgOut}
	}
	if *scripts != "" {
		if err := printScripts(ctx, o, *scripts, *comment); err != nil {
			fmt.Fprintf(os.Stderr, "opcost: %v\n", err)
			os.Exit(1)
		}
		return
	}
	costs, err := bench.MeasureOpCosts(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "opcost: %v\n", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, c := range costs {
		if err := enc.Encode(line{*comment, c}); err != nil {
			fmt.Fprintf(os.Stderr, "opcost: %v\n", err)
			os.Exit(1)
		}
	}
}

// line is one operation's output line.
type line struct {
	Tag string `json:"tag,omitempty"`
	bench.OpCost
}

// annotateLines re-reads output lines and adds the split of each one's
// instructions from its callgrind dumps, so a run's dumps can be read
// again without measuring again.
func annotateLines(in io.Reader, out io.Writer) error {
	dec, enc := json.NewDecoder(in), json.NewEncoder(out)
	for {
		var l line
		if err := dec.Decode(&l); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading a line: %w", err)
		}
		if err := bench.AddParts(&l.OpCost); err != nil {
			return err
		}
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
}

// printScripts measures the served scripts in dir and prints a line each.
func printScripts(ctx context.Context, o bench.OpCostOptions, dir, tag string) error {
	costs, err := bench.MeasureScriptHeaders(ctx, o.Addr, dir, o.Calls, o.Callgrind)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for _, c := range costs {
		if err := enc.Encode(struct {
			Tag string `json:"tag,omitempty"`
			bench.ScriptCost
		}{tag, c}); err != nil {
			return err
		}
	}
	return nil
}
