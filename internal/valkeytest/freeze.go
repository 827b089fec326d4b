package valkeytest

import (
	"syscall"
	"testing"
)

// Freeze stops every node with SIGSTOP: the process stays, its sockets stay
// open and the kernel still accepts connections, but nothing is answered.
// That is how a Valkey stuck in a long script, a swapping host or a paused
// VM looks to a client, and unlike Stop it gives no connection error to
// react to. Cleanup thaws the nodes, so a failed test leaves no stopped
// process behind.
func (s *Server) Freeze(t testing.TB) {
	t.Helper()
	if !s.CanRestart() {
		t.Skip("valkeytest: this server was not started here and cannot be frozen")
	}
	for _, p := range s.procs {
		if err := p.proc.Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("valkeytest: freezing %s: %v", p.addr, err)
		}
	}
	t.Cleanup(func() { s.thaw() })
}

// Thaw resumes nodes stopped by Freeze with SIGCONT.
func (s *Server) Thaw(t testing.TB) {
	t.Helper()
	if err := s.thaw(); err != nil {
		t.Fatalf("valkeytest: thawing: %v", err)
	}
}

func (s *Server) thaw() error {
	var first error
	for _, p := range s.procs {
		if err := p.proc.Signal(syscall.SIGCONT); err != nil && first == nil {
			first = err
		}
	}
	return first
}
