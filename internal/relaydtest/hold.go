package relaydtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
)

// HoldEnqueue sends a correctly signed enqueue of stub to base and holds
// back its body, so the request stays in flight until finish is called. It
// returns only once relayd's handler is waiting for the body: the request
// asks for "100 Continue", which the server sends when the handler starts
// reading. (Returning as soon as the bytes are written would race with
// relayd accepting the connection.)
func HoldEnqueue(t testing.TB, base string, site *peer.Site, stub protocol.JobStub) (finish func() *http.Response) {
	t.Helper()
	body, err := json.Marshal(protocol.EnqueueRequest{SiteID: site.SiteID(), Stub: stub})
	require.NoError(t, err)
	h := site.SignHeaders("site/enqueue", body)
	u, err := url.Parse(base)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	var head strings.Builder
	fmt.Fprintf(&head, "POST /relay/site/enqueue HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n", u.Host, len(body))
	for name, vals := range h {
		fmt.Fprintf(&head, "%s: %s\r\n", name, vals[0])
	}
	head.WriteString("\r\n")
	_, err = io.WriteString(conn, head.String())
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	br := bufio.NewReader(conn)
	cont, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusContinue, cont.StatusCode, "the handler is reading the body")
	return func() *http.Response {
		_, err := conn.Write(body)
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		return resp
	}
}
