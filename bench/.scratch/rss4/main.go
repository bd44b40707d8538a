// Scratch: one 4 MiB payload session against the synthetic kernel, as
// benchrelay runs it, with serve's stderr passed through (GODEBUG=gctrace=1)
// and its VmHWM printed at the end.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/bench/internal/synth"
)

func main() {
	shim := flag.String("shim", "", "binary")
	n := flag.Int("n", 4<<20, "payload")
	reps := flag.Int("reps", 8, "calls per kind")
	kinds := flag.String("kinds", "argument,content,output", "")
	flag.Parse()
	dir, _ := os.MkdirTemp("", "rss4")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "p.sock")
	k, err := synth.Listen(sock, synth.PayloadTools())
	if err != nil {
		panic(err)
	}
	defer k.Close()
	cmd := exec.Command(*shim, "serve", "--integration", "bench", "--socket", sock, "--log-level", "error")
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	w := bufio.NewWriterSize(in, 64<<10)
	r := synth.NewLineReader(outp, 1<<20)
	w.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}` + "\n")
	w.Flush()
	r.ReadLine()
	payload := synth.PayloadString(*n)
	id := 1
	for _, kind := range strings.Split(*kinds, ",") {
		var ds []time.Duration
		for range *reps {
			id++
			start := time.Now()
			head := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + synth.PayloadTool + `","arguments":`
			done := make(chan struct{})
			go func() {
				w.WriteString(head)
				if kind == "argument" {
					w.WriteString(`{"text":`)
					w.Write(payload)
					w.WriteString(`}`)
				} else {
					w.WriteString(`{"result":"` + kind + `","bytes":` + strconv.Itoa(*n) + `}`)
				}
				w.WriteString("}}\n")
				w.Flush()
				close(done)
			}()
			line, err := r.ReadLine()
			<-done
			if err != nil || strings.Contains(string(line[:min(len(line), 300)]), "isError") {
				panic(fmt.Sprint(err, string(line[:min(300, len(line))])))
			}
			ds = append(ds, time.Since(start))
		}
		sorted := slices.Clone(ds[1:])
		slices.Sort(sorted)
		fmt.Fprintln(os.Stderr, kind, "first", ds[0].Round(10*time.Microsecond), "median", sorted[len(sorted)/2].Round(10*time.Microsecond))
	}
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "VmHWM") || strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "RssAnon") || strings.HasPrefix(l, "RssFile") {
			fmt.Println(l)
		}
	}
	in.Close()
	cmd.Wait()
}
