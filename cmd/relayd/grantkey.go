package main

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/byollm/relayd/admission"
)

// grantKeyUsage is `relayd grant-key`'s synopsis.
const grantKeyUsage = `usage: relayd grant-key generate --out PATH

Writes a fresh Ed25519 grant signing key to PATH as a PEM PKCS#8 file at
mode 0600, what --grant-key-file reads (docs/grants.md, "The key"). It
refuses a PATH that exists. Prints {"publicKey":...,"keyId":...} on
success: the public half devices are enrolled with, and its key id. The
private key goes only into the file.
`

// runGrantKey is `relayd grant-key` with args after "grant-key": it
// returns the exit status, 2 for a usage error.
func runGrantKey(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, grantKeyUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "generate" {
		fmt.Fprint(stderr, "relayd grant-key: want the subcommand generate\n\n"+grantKeyUsage)
		return 2
	}
	fs := flag.NewFlagSet("grant-key generate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "the key file to write")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, grantKeyUsage)
			return 0
		}
		fmt.Fprintf(stderr, "relayd grant-key generate: %v\n\n%s", err, grantKeyUsage)
		return 2
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprint(stderr, "relayd grant-key generate: want --out PATH and nothing else\n\n"+grantKeyUsage)
		return 2
	}
	half, err := admission.GenerateKeyFile(*out, rand.Reader)
	if err != nil {
		fmt.Fprintf(stderr, "relayd grant-key generate: %v\n", err)
		return 1
	}
	line, err := json.Marshal(half)
	if err != nil {
		fmt.Fprintf(stderr, "relayd grant-key generate: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", line)
	return 0
}

func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "-help" }
