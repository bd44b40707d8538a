package status

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestAReportReadsBackAsWritten: what the kernel writes, doctor, catalog
// and kernel check read back whole; a state directory without a report
// says so with ErrNoReport.
func TestAReportReadsBackAsWritten(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); !errors.Is(err, ErrNoReport) {
		t.Fatalf("Read of an empty state directory = %v, want ErrNoReport", err)
	}
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	want := Report{Written: at, PID: 42, Upstreams: []Upstream{{
		Name: "memory", State: "ready", Since: at,
		Published: []Published{{Name: "memory.read_graph", Action: "call", Resource: "memory:/read_graph"},
			{Name: "memory.open", Action: "read", Resource: "memory:/{path}", Arguments: []Argument{{Name: "path", Kind: "segment", Format: "path", Takes: "path", By: "format"}}}},
		Withheld: []Withheld{{Name: "memory.delete", Reason: "quarantined", Detail: "its definition changed", Changed: []string{"description"}}},
	}}}
	if err := Write(filepath.Join(dir, File), want); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Read = %+v, %v; want %+v", got, err, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("the state directory holds %v (%v), want only %s: no temporary file left", entries, err, File)
	}
}
