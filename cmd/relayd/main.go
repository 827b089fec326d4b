// Command relayd is the byollm blind relay: it routes sealed jobs between
// sites and people's own machines, and can read none of them. See README.md.
// `relayd approve` approves a pending device-code pairing (pairing/approvecmd);
// `relayd grant-key generate` writes a fresh grant signing key (grantkey.go).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/pairing/approvecmd"
	"github.com/byollm/relayd/server"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "approve" {
		os.Exit(approvecmd.Run(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "grant-key" {
		os.Exit(runGrantKey(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && isHelp(os.Args[1]) {
		config.Usage(os.Stdout)
		fmt.Fprintln(os.Stdout, "\nrelayd approve --help describes the command that approves a pending pairing;")
		fmt.Fprintln(os.Stdout, "relayd grant-key --help the one that writes a grant signing key.")
		return
	}
	cfg, err := config.Load(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "relayd: %v\n\n", err)
		config.Usage(os.Stderr)
		os.Exit(2)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: logLevel(cfg.LogLevel)}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			default:
			}
		}
	}()

	if err := server.Run(ctx, cfg, logger, server.Hooks{Reload: reload}); err != nil {
		logger.Error("relayd failed", slog.String("error", err.Error()))
		os.Exit(1)
	}
}

func logLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}
