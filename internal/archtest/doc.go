// Package archtest holds the test that keeps relayd's packages in the
// shape docs/architecture.md draws: which package may import which, and
// where the HTTP framework and the Valkey client may appear. It has no
// code of its own.
package archtest
