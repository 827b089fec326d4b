// Command relayd-demo routes one sealed job through a running relay as the
// example site and device, printing each step. Start the relay with
// `make run` first.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/byollm/relayd/internal/demo"
)

func main() {
	var opts demo.Options
	flag.StringVar(&opts.RelayURL, "relay", "http://127.0.0.1:8080", "the relay's public URL")
	flag.StringVar(&opts.KeysPath, "keys", "deploy/demo-keys.json", "demo key file")
	flag.StringVar(&opts.RunnerID, "runner", "", "device to act as (default: the first in the key file)")
	flag.StringVar(&opts.Prompt, "prompt", "summarise this", "the prompt to route")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := demo.Run(ctx, opts, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "relayd-demo: %v\n", err)
		os.Exit(1)
	}
}
