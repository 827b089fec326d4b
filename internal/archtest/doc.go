// Package archtest holds the tests that keep relayd's packages in the
// shape docs/architecture.md draws: which package may import which, and
// where the HTTP framework and the Valkey client may appear; and the
// house rules a reader can check by parsing, such as no function over 80
// lines. It has no code of its own.
package archtest
