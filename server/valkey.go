package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/valkey"
)

// openValkey connects to Valkey and loads the scripts. A Valkey that does
// not answer at start fails the start with a clear error, which a process
// supervisor retries; an outage after start is answered with 503s and the
// relay recovers by itself when the server returns.
func openValkey(ctx context.Context, c config.Valkey, logger *slog.Logger) (store.RoutingStore, error) {
	opts := valkey.Options{
		Addrs: c.Addrs, Username: c.Username, Password: c.Password,
		SentinelMasterSet: c.SentinelMaster, Cluster: c.Cluster, KeyPrefix: c.Prefix,
	}
	if c.TLS {
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	st, err := valkey.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("open valkey store: %w", err)
	}
	logger.Info("valkey store", slog.Any("addrs", c.Addrs), slog.Bool("cluster", c.Cluster),
		slog.String("sentinel_master", c.SentinelMaster), slog.String("prefix", c.Prefix))
	return st, nil
}
