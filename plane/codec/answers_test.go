package codec

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
)

func finishedJobs(n int) []protocol.FinishedJob {
	out := make([]protocol.FinishedJob, n)
	for i := range out {
		id := "job-" + strconv.Itoa(i)
		out[i] = protocol.FinishedJob{JobID: id, Disposition: "ok", RunnerID: "r<1>", LeaseID: "l&" + id, RunnerOwner: "alice \u00e9",
			Envelope: protocol.SealedEnvelope{Ciphertext: "ct-" + id, RecipientKeyID: "S", SenderKeyID: "D", Direction: protocol.DirectionResult, DeadlineAt: int64(i)},
			Device:   protocol.PublicIdentity{Identity: "id", Encryption: "enc", EncryptionSig: "sig"}}
	}
	return out
}

// encoded is what the writer sends for a results answer encoded whole.
func encoded(t *testing.T, jobs []protocol.FinishedJob) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(protocol.ResultsResponse{Jobs: jobs}))
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestResultsAnswersAreTheEncodersBytes: a rendered answer, whole or
// pieced together from a previous one, is byte for byte the encoding of
// the answer, HTML characters and empty listings included.
func TestResultsAnswersAreTheEncodersBytes(t *testing.T) {
	a := NewResultsAnswers(1 << 20)
	for _, jobs := range [][]protocol.FinishedJob{{}, finishedJobs(1), finishedJobs(30), finishedJobs(31)[1:], finishedJobs(2)} {
		got, err := a.Render("site", jobs)
		require.NoError(t, err)
		require.Equal(t, string(encoded(t, jobs)), string(got))
	}
}

// TestResultsAnswersReuseWhatDidNotChange: an unchanged listing is
// answered with the very bytes of the last answer, nothing encoded; one
// changed and one new job are the only ones encoded.
func TestResultsAnswersReuseWhatDidNotChange(t *testing.T) {
	a := NewResultsAnswers(1 << 20)
	jobs := finishedJobs(100)
	first, err := a.Render("site", jobs)
	require.NoError(t, err)
	require.Equal(t, 100, a.Encoded())

	again, err := a.Render("site", finishedJobs(100))
	require.NoError(t, err)
	require.Same(t, &first[0], &again[0], "the same bytes")
	require.Equal(t, 100, a.Encoded())

	changed := append(finishedJobs(100), finishedJobs(101)[100])
	changed[7].Disposition = "error"
	got, err := a.Render("site", changed)
	require.NoError(t, err)
	require.Equal(t, string(encoded(t, changed)), string(got))
	require.Equal(t, 102, a.Encoded())

	// Another site's answer is its own.
	other, err := a.Render("other", finishedJobs(3))
	require.NoError(t, err)
	require.Equal(t, string(encoded(t, finishedJobs(3))), string(other))
}

// TestResultsAnswersLargerThanTheLimitAreNotKept: an answer above the
// limit is rendered whole on every poll, and right.
func TestResultsAnswersLargerThanTheLimitAreNotKept(t *testing.T) {
	jobs := finishedJobs(50)
	a := NewResultsAnswers(int64(len(encoded(t, jobs)) - 1))
	for range 2 {
		got, err := a.Render("site", jobs)
		require.NoError(t, err)
		require.Equal(t, string(encoded(t, jobs)), string(got))
	}
	require.Equal(t, 100, a.Encoded())
}

// BenchmarkResultsAnswers renders the answer of 100,000 finished jobs of
// 1 KiB results (143 MB): whole, as every poll did before answers were
// kept; unchanged; and with one job more.
func BenchmarkResultsAnswers(b *testing.B) {
	jobs := finishedJobs(100_000)
	pad := string(bytes.Repeat([]byte("x"), 1024))
	for i := range jobs {
		jobs[i].Envelope.Ciphertext += pad
	}
	b.Run("whole", func(b *testing.B) {
		for range b.N {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(protocol.ResultsResponse{Jobs: jobs}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		a := NewResultsAnswers(1 << 30)
		if _, err := a.Render("site", jobs); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			if _, err := a.Render("site", append([]protocol.FinishedJob(nil), jobs...)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-new", func(b *testing.B) {
		a := NewResultsAnswers(1 << 30)
		if _, err := a.Render("site", jobs[:len(jobs)-1]); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			next := jobs[:len(jobs)-1+i%2]
			if _, err := a.Render("site", append([]protocol.FinishedJob(nil), next...)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
