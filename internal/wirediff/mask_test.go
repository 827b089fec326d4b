package main

import (
	"bytes"
	"testing"
)

func TestMaskerKeepsAllButRandomAndTime(t *testing.T) {
	m := newMasker()
	got := m.body([]byte(`{"jobs":[{"id":"j1","deadlineAt":1700000000000,"lease":{"id":"L-a","expiresAt":17}}],"leaseId":"L-a","ciphertext":"x","state":"ok"}`))
	want := `{"jobs":[{"id":"j1","deadlineAt":<time>,"lease":{"id":<leaseId#1>,"expiresAt":<time>}}],"leaseId":<leaseId#1>,"ciphertext":<ciphertext#2>,"state":"ok"}`
	if string(got) != want {
		t.Fatalf("masked\n got %s\nwant %s", got, want)
	}
	if other := newMasker().body([]byte(`{"leaseId":"L-b","state":"ok"}`)); !bytes.Equal(other, []byte(`{"leaseId":<leaseId#1>,"state":"ok"}`)) {
		t.Fatalf("a fresh masker numbers from one: %s", other)
	}
	if page := newMasker().body([]byte(`<td>54ms ago</td>`)); string(page) != `<td><age> ago</td>` {
		t.Fatalf("the debug page's age is masked: %s", page)
	}
}

func TestReportCountsADifferentStatus(t *testing.T) {
	same := exchange{Step: "s", Method: "GET", Path: "/p", Status: 200, Body: []byte(`{"a":1}`)}
	moved := same
	moved.Status = 404
	var out bytes.Buffer
	if n := report(&out, "memory", "old", side{exchanges: []exchange{same, same}}, side{exchanges: []exchange{same, moved}}, false); n != 1 {
		t.Fatalf("%d differences, want 1:\n%s", n, &out)
	}
	if !bytes.Contains(out.Bytes(), []byte("exchange 1")) {
		t.Fatalf("the report names the exchange:\n%s", &out)
	}
}
