package policy

import (
	"testing"
	"time"
)

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in   string
		want Limit
		ok   bool
	}{
		{"100/1h", Limit{100, time.Hour}, true},
		{"5/30s", Limit{5, 30 * time.Second}, true},
		{"1000/1d", Limit{1000, 24 * time.Hour}, true},
		{"20/15m", Limit{20, 15 * time.Minute}, true},
		{"3/h", Limit{3, time.Hour}, true},
		{"366/366d", Limit{366, 366 * 24 * time.Hour}, true},
		{"100", Limit{}, false},
		{"100/1w", Limit{}, false},
		{"100/1H", Limit{}, false},
		{"0/1h", Limit{}, false},
		{"-1/1h", Limit{}, false},
		{"+5/1h", Limit{}, false},
		{"05/1h", Limit{}, false},
		{"5/0h", Limit{}, false},
		{"5/1.5h", Limit{}, false},
		{"5/367d", Limit{}, false},
		{"5/ 1h", Limit{}, false},
		{"1000000001/1h", Limit{}, false},
		{"/1h", Limit{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLimit(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseLimit(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
			if tt.ok && tt.in != "3/h" && got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestWindowAtIsAlignedToTheEpoch(t *testing.T) {
	at := time.Date(2026, 6, 1, 12, 34, 56, 789, time.UTC)
	tests := []struct {
		w          time.Duration
		start, end time.Time
	}{
		{time.Hour, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC)},
		{24 * time.Hour, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)},
		{30 * time.Second, time.Date(2026, 6, 1, 12, 34, 30, 0, time.UTC), time.Date(2026, 6, 1, 12, 35, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		start, end := WindowAt(at, tt.w)
		if !start.Equal(tt.start) || !end.Equal(tt.end) {
			t.Errorf("WindowAt(%s) = [%s, %s), want [%s, %s)", tt.w, start, end, tt.start, tt.end)
		}
		// Every instant of the window, in any zone, gives the same one.
		s2, e2 := WindowAt(end.Add(-time.Nanosecond).In(time.FixedZone("x", 5*3600)), tt.w)
		if !s2.Equal(start) || !e2.Equal(end) {
			t.Errorf("the window's last instant gives [%s, %s)", s2, e2)
		}
	}
}
