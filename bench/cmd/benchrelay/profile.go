package main

import (
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/bench/internal/synth"
)

// scenarios are what -profile runs: one path of a relay at a time, so that
// a profiler wrapped around the peer (-wrap) sees that path and little
// else. Each returns the times it measured.
var scenarios = map[string]func(p peer, ks kernels, o options) ([]time.Duration, error){
	"cold": func(p peer, ks kernels, o options) ([]time.Duration, error) {
		var ds []time.Duration
		for range o.cold {
			d, _, err := coldStart(p, ks.synth[catalogueSizes[0]], 1)
			if err != nil {
				return nil, err
			}
			ds = append(ds, d)
		}
		return ds, nil
	},
	"calls": func(p peer, ks kernels, o options) ([]time.Duration, error) {
		t := callTarget{socket: ks.synth[catalogueSizes[0]], tool: synth.FirstTool, args: `{"query":"relay"}`, want: synth.Answer}
		if p.echo {
			t.want = ""
		}
		s, _, err := calls(p, t, callLoad{warmup: o.load.warmup, sequential: o.load.sequential, pipelined: 1})
		return []time.Duration{s.p50}, err
	},
	"pipelined": func(p peer, ks kernels, o options) ([]time.Duration, error) {
		t := callTarget{socket: ks.synth[catalogueSizes[0]], tool: synth.FirstTool, args: `{"query":"relay"}`, want: synth.Answer}
		if p.echo {
			t.want = ""
		}
		s, _, err := calls(p, t, callLoad{warmup: 1, sequential: 1, pipelined: o.load.pipelined})
		return []time.Duration{time.Duration(float64(time.Second) / s.rate)}, err
	},
	"list": func(p peer, ks kernels, o options) ([]time.Duration, error) {
		if p.echo {
			return nil, nil // echo answers no tools/list
		}
		var ds []time.Duration
		last := catalogueSizes[len(catalogueSizes)-1]
		for range o.cold {
			first, _, _, err := listTimes(p, ks.synth[last], last)
			if err != nil {
				return nil, err
			}
			ds = append(ds, first)
		}
		return ds, nil
	},
	"argument": payloadScenario(argument),
	"content":  payloadScenario(resultContent),
	"output":   payloadScenario(resultOutput),
}

// payloadScenario relays o.payloadReps+1 calls of kind k with a payload of
// targetPayload bytes in one session, and returns the first call's time
// and the median of the others.
func payloadScenario(k payloadKind) func(p peer, ks kernels, o options) ([]time.Duration, error) {
	return func(p peer, ks kernels, o options) ([]time.Duration, error) {
		if p.echo && k != argument {
			return nil, nil // echo carries arguments only
		}
		s := sample{payload: map[payloadKey]payloadStats{}, rssLoad: map[int]int64{}}
		err := payloadSession(p, ks.payload, payloads{}, targetPayload, o.payloadReps, []payloadKind{k}, &s)
		st := s.payload[payloadKey{k, targetPayload}]
		return []time.Duration{st.first, st.warm}, err
	}
}

// lockstepScenarios are those the lockstep relay can run: it answers
// nothing but initialize and tools/call.
var lockstepScenarios = map[string]bool{"cold": true, "calls": true, "pipelined": true}

func scenarioNames() []string {
	var names []string
	for n := range scenarios {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// profileScenario runs o.profile once for each peer, under o.wrap, and
// prints the median of what it measured.
func profileScenario(o options, peers []peer, ks kernels, out io.Writer) error {
	run, ok := scenarios[o.profile]
	if !ok {
		return fmt.Errorf("unknown scenario %q: use %s", o.profile, strings.Join(scenarioNames(), ", "))
	}
	for _, p := range peers {
		if p.lockstep && !lockstepScenarios[o.profile] {
			continue
		}
		if p.command != nil && o.wrap != "" {
			inner := p.command
			p.command = func(socket string) *exec.Cmd {
				c := inner(socket)
				w := strings.Fields(o.wrap)
				return exec.Command(w[0], append(w[1:], c.Args...)...)
			}
		}
		progress("%s: %s", o.profile, p.label)
		ds, err := run(p, ks, o)
		if err != nil {
			return fmt.Errorf("%s: %w", p.label, err)
		}
		fmt.Fprintf(out, "%s\t%s\t%v\n", o.profile, p.label, ds)
	}
	return nil
}
