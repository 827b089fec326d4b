package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/workload"
)

// target is what a lifecycle run drives: relayd replicas or the reference
// relay. Both are measured by the same counters, so their results sit
// side by side.
type target interface {
	publicURLs() []string
	adminURLs() []string
	// counters reads the relay processes' CPU time and, where the relay
	// reports them, its store operations.
	counters(ctx context.Context) (relayCounters, error)
	// label names what runs when it is not this checkout's relayd.
	label() string
	close()
}

// startTarget starts what l names.
func startTarget(ctx context.Context, l Lifecycle, fx *fleet.Fixture, prefix string) (target, error) {
	if l.Store != StoreReference {
		fl, err := fleet.Start(ctx, replicaOptions(l, fx, prefix))
		if err != nil {
			return nil, fmt.Errorf("start replicas: %w", err)
		}
		return relaydTarget{fl}, nil
	}
	if err := referenceRunnable(l); err != nil {
		return nil, err
	}
	r, err := startReference(ctx, l.Reference, fx.Path)
	if err != nil {
		return nil, err
	}
	return referenceTarget{r}, nil
}

// referenceRunnable refuses the runs the reference target cannot do: the
// published 0.1.1 relay speaks protocol "2" only, is one process, has no
// store to prefill and no profiling endpoint.
func referenceRunnable(l Lifecycle) error {
	switch {
	case l.Protocol != workload.ProtocolV2:
		return fmt.Errorf("reference target: @byollm/relay %s speaks protocol \"2\" only, not %q: pass --protocol 2", ReferenceVersion, l.Protocol)
	case l.Replicas > 1:
		return errors.New("reference target: the reference relay is one process; it has no replicas")
	case l.Prefill > 0:
		return errors.New("reference target: prefill is not supported (the reference's store lives in its process)")
	case l.CPUProfile != "":
		return errors.New("reference target: the reference relay has no CPU profile endpoint")
	}
	return nil
}

type relaydTarget struct{ fl *fleet.Fleet }

func (t relaydTarget) publicURLs() []string { return t.fl.PublicURLs() }
func (t relaydTarget) adminURLs() []string  { return t.fl.AdminURLs() }
func (t relaydTarget) label() string        { return "" }
func (t relaydTarget) close()               { t.fl.Close() }

func (t relaydTarget) counters(ctx context.Context) (relayCounters, error) {
	return scrapeRelays(ctx, t.fl.AdminURLs())
}

type referenceTarget struct{ r *referenceRelay }

func (t referenceTarget) publicURLs() []string { return []string{t.r.url} }
func (t referenceTarget) adminURLs() []string  { return nil }
func (t referenceTarget) label() string        { return t.r.label }
func (t referenceTarget) close()               { _ = t.r.Close() }

// counters is the Node process's CPU; the reference counts no store
// operations.
func (t referenceTarget) counters(context.Context) (relayCounters, error) {
	cpu, err := t.r.cpuSeconds()
	return relayCounters{opsByName: map[string]float64{}, cpuSeconds: cpu}, err
}
