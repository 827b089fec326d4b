package server

import (
	"context"
	"errors"
	"log/slog"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/store"
)

func openValkey(_ context.Context, _ config.Valkey, _ *slog.Logger) (store.RoutingStore, error) {
	return nil, errors.New("the valkey store is not built into this relayd yet")
}
