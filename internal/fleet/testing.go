package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/byollm/relayd/internal/child"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

// The helpers below tie the fleet to a test's lifetime. Everything else in
// the package takes a context and returns errors, so relaybench uses it too.

// testBinary is the relayd built for this test process, shared by all of its
// tests: building per test would cost seconds each.
var testBinary struct {
	once sync.Once
	path string
	err  error
}

// TestBinary returns the path of a relayd built from this checkout, building
// it on first use.
func TestBinary(t testing.TB) string {
	t.Helper()
	testBinary.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		dir, err := os.MkdirTemp("", "relayd-test-bin-")
		if err != nil {
			testBinary.err = err
			return
		}
		testBinary.path, testBinary.err = BuildCheckout(ctx, dir)
	})
	if testBinary.err != nil {
		t.Fatalf("build relayd: %v", testBinary.err)
	}
	return testBinary.path
}

// StartForTest starts a fleet with o (Binary defaults to TestBinary), kills
// it at the end of the test and prints the tail of every replica's logs if
// the test failed.
func StartForTest(t testing.TB, o Options) *Fleet {
	t.Helper()
	if o.Binary == "" {
		o.Binary = TestBinary(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		f.Close()
		if t.Failed() {
			for _, r := range f.Replicas() {
				t.Logf("replica %d (%s), last lines of its logs:\n%s", r.Index, r.PublicURL(), strings.Join(child.LastLines(r.Logs(), 40), "\n"))
			}
		}
	})
	return f
}

// HoldEnqueue sends a correctly signed enqueue of stub to base and holds
// back its body, so the request stays in flight until finish is called. It
// returns only once relayd's handler is waiting for the body: the request
// asks for "100 Continue", which the server sends when the handler starts
// reading. (Returning as soon as the bytes are written would race with
// relayd accepting the connection.)
func HoldEnqueue(t testing.TB, base string, site *peer.Site, stub protocol.JobStub) (finish func() *http.Response) {
	t.Helper()
	body, err := json.Marshal(protocol.EnqueueRequest{SiteID: site.SiteID(), Stub: stub})
	must(t, err, "encode the enqueue")
	u, err := url.Parse(base)
	must(t, err, "parse the base URL")
	conn, err := net.Dial("tcp", u.Host)
	must(t, err, "dial relayd")
	t.Cleanup(func() { conn.Close() })
	var head strings.Builder
	fmt.Fprintf(&head, "POST /relay/site/enqueue HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n", u.Host, len(body))
	for name, vals := range site.SignHeaders("site/enqueue", body) {
		fmt.Fprintf(&head, "%s: %s\r\n", name, vals[0])
	}
	head.WriteString("\r\n")
	_, err = io.WriteString(conn, head.String())
	must(t, err, "send the head")
	must(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)), "set a read deadline")
	br := bufio.NewReader(conn)
	cont, err := http.ReadResponse(br, nil)
	must(t, err, "read the interim answer")
	if cont.StatusCode != http.StatusContinue {
		t.Fatalf("hold enqueue: the handler is not reading the body: answered %d", cont.StatusCode)
	}
	return func() *http.Response {
		_, err := conn.Write(body)
		must(t, err, "send the body")
		resp, err := http.ReadResponse(br, nil)
		must(t, err, "read the answer")
		return resp
	}
}

// must fails t when err is set.
func must(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("hold enqueue: %s: %v", what, err)
	}
}
