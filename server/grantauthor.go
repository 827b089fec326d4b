package server

import (
	"fmt"
	"log/slog"

	"github.com/byollm/relayd/admission"
	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/config"
)

// openExternalAuthor builds the external author of --grant-author-url, or
// nil when none is configured, and says at boot that it runs (G-R50),
// naming its keys by their ids only. The token is read here, into package
// admission, and never logged. A key both local and the author's is
// refused: which of the two would author its devices?
func openExternalAuthor(ga config.GrantAuthor, ring *admission.KeyRing, clk clock.Clock, logger *slog.Logger) (*admission.External, error) {
	if !ga.Enabled() {
		return nil, nil
	}
	for i, k := range ga.Keys {
		if _, local := ring.Lookup(k); local {
			return nil, fmt.Errorf("grant author: --grant-author-key %d is also a --grant-key-file key", i+1)
		}
	}
	var token admission.Token
	if ga.TokenFile != "" {
		t, err := admission.LoadToken(ga.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("grant author: %w", err)
		}
		token = t
	}
	external, err := admission.NewExternal(admission.ExternalOptions{
		URL: ga.URL, Keys: ga.Keys, Timeout: ga.Timeout, Token: token, Now: clk.Now, Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("grant author: %w", err)
	}
	keys := external.AuthorKeys()
	ids := make([]string, 0, len(keys))
	for _, k := range keys {
		ids = append(ids, k.KeyID)
	}
	logger.Info(fmt.Sprintf("grants: external %s, key %s, %d keys", external.Host(), ids[0], len(ids)),
		slog.String("author_host", external.Host()), slog.String("current", ids[0]), slog.Any("key_ids", ids),
		slog.Bool("token", token != ""), slog.Duration("timeout", ga.Timeout), slog.Int("local_keys", ring.Len()))
	return external, nil
}
