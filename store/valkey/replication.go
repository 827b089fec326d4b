package valkey

import (
	"context"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/store"
)

// # Writes a failover cannot lose
//
// Valkey replicates asynchronously: a primary acknowledges a write before
// any replica has it, and a replica promoted after the primary died serves
// a state without the writes still in flight. For relayd those are
// acknowledged claims (a job then granted again to another device while
// the first runs it), enqueues and results (docs/replicas.md, "Failover",
// measured). With Options.WaitReplicas set, every write function is followed
// on the same connection by WAIT: the call answers only once that many
// replicas confirmed it, and a write they did not confirm within
// WaitTimeout is reported as an outage the caller may retry. A retry runs
// the script again, which answers with its first answer (memo.go) and
// waits again. An operation whose entry in operations says why it is
// unwaited (the limiter's bucket) is not waited for.
//
// WAIT does not make a write durable on disk, and a replica that confirmed
// can still lose the election to one that did not if there are several;
// with one replica per primary, the one that confirmed is the one
// promoted.

// causeUnreplicated labels a retry of a write its replicas did not confirm.
const causeUnreplicated = "unreplicated"

// unreplicatedError is a write that ran on the primary but was confirmed
// by fewer replicas than asked within the wait.
type unreplicatedError struct {
	op          store.Op
	acked, want int64
}

func (e *unreplicatedError) Error() string {
	return fmt.Sprintf("valkey store: %s: written, but confirmed by %d of %d replicas in time", e.op, e.acked, e.want)
}

// replication is a store's WAIT setting.
type replication struct {
	replicas int64
	timeout  time.Duration
}

// waitsFor says whether a call of op is followed by WAIT.
func (r replication) waitsFor(sc *script) bool {
	return r.replicas > 0 && !sc.readOnly && operations[sc.op].unwaited == ""
}

// runReplicated runs c's function and WAIT on one dedicated connection,
// so that WAIT counts the replicas that have this function's writes.
func (s *Store) runReplicated(ctx context.Context, run executor, c call) (valkey.ValkeyMessage, error) {
	var msg valkey.ValkeyMessage
	var runErr error
	err := s.client.Dedicated(func(dc valkey.DedicatedClient) error {
		msg, runErr = s.callOn(ctx, dc, run, c)
		if runErr != nil {
			return nil
		}
		acked, err := dc.Do(ctx, dc.B().Wait().Numreplicas(s.replication.replicas).
			Timeout(s.replication.timeout.Milliseconds()).Build()).AsInt64()
		if err != nil {
			return fmt.Errorf("valkey store: %s: WAIT: %w", c.op, err)
		}
		if acked < s.replication.replicas {
			return &unreplicatedError{op: c.op, acked: acked, want: s.replication.replicas}
		}
		return nil
	})
	if err == nil {
		err = runErr
	}
	if err != nil && !valkey.IsValkeyNil(err) {
		return msg, fmt.Errorf("valkey store: %s: %w", c.op, err)
	}
	return msg, nil
}

// callOn sends c's function on dc, loading the library (through the
// store's client, on every node) and sending it again when the server
// does not have it.
func (s *Store) callOn(ctx context.Context, dc valkey.DedicatedClient, run executor, c call) (valkey.ValkeyMessage, error) {
	f, ok := run.(*fcall)
	if !ok {
		return valkey.ValkeyMessage{}, fmt.Errorf("valkey store: %s: no function to call", c.op)
	}
	seen := f.lib.loads.Load()
	msg, err := dc.Do(ctx, f.command(dc.B(), c.keys, c.args)).ToMessage()
	if isMissingFunction(err) {
		if err := f.lib.reload(ctx, s.client, seen); err != nil {
			return msg, err
		}
		msg, err = dc.Do(ctx, f.command(dc.B(), c.keys, c.args)).ToMessage()
	}
	return msg, err
}
