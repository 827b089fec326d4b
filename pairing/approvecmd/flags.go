package approvecmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Usage is the command's synopsis.
const Usage = `usage: relayd approve --admin http://HOST:PORT --fixture PATH --owner OWNER [--runner-id ID] [--grant-key KEY|none] USER-CODE

Approves the device behind USER-CODE (as "byollm connect" printed it) for
OWNER: looks the code up on a relay's admin listener, then writes the
device into the fixture every replica loads (atomic rename). Without
--runner-id the device keeps the runner id it has under OWNER, or gets a
new one ("runner_" and 12 random hex digits). A new device is enrolled
for grants with the relay's current grant key when it has one (GET
/grant-keys on the admin listener); a re-approved one keeps the key its
record has. --grant-key writes KEY, or none, either way. Prints
{"runnerId":...,"owner":...,"keyId":...,"grantKey":...} on success
(grantKey omitted when the device is not enrolled).
`

var errHelp = errors.New("help requested")

// parseArgs reads the flags and the one user code, in any order.
func parseArgs(args []string, stderr io.Writer) (Request, error) {
	var r Request
	fs := flag.NewFlagSet("approve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&r.AdminURL, "admin", "", "the admin listener's URL")
	fs.StringVar(&r.Fixture, "fixture", "", "the fixture file")
	fs.StringVar(&r.Owner, "owner", "", "the owner the device is approved for")
	fs.StringVar(&r.RunnerID, "runner-id", "", "the runner id to give the device")
	fs.StringVar(&r.GrantKey, "grant-key", "", `the grant key to enrol the device with, or "none"`)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stderr, Usage)
				return Request{}, errHelp
			}
			return Request{}, fmt.Errorf("%w (see relayd approve --help)", err)
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(positional) != 1:
		return Request{}, fmt.Errorf("want exactly one USER-CODE, got %d (see relayd approve --help)", len(positional))
	case r.AdminURL == "" || r.Fixture == "" || r.Owner == "":
		return Request{}, errors.New("--admin, --fixture and --owner are required (see relayd approve --help)")
	}
	r.UserCode = positional[0]
	return r, nil
}
