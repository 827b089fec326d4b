package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"

	vk "github.com/valkey-io/valkey-go"
)

// relayCounters are what a run reads off every replica's /metrics.
type relayCounters struct {
	// opsByName counts store operations by operation.
	opsByName map[string]float64
	// cpuSeconds is the replicas' process CPU time, user and system.
	cpuSeconds float64
}

func (c relayCounters) ops() float64 {
	var n float64
	for _, v := range c.opsByName {
		n += v
	}
	return n
}

// scrapeRelays sums the counters a run is measured by over every
// replica's /metrics.
func scrapeRelays(ctx context.Context, adminURLs []string) (relayCounters, error) {
	total := relayCounters{opsByName: map[string]float64{}}
	for _, u := range adminURLs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/metrics", nil)
		if err != nil {
			return total, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return total, fmt.Errorf("scrape %s: %w", u, err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			value := func() float64 { return parseFloat(line[strings.LastIndexByte(line, ' ')+1:]) }
			switch {
			case strings.HasPrefix(line, `relayd_store_operation_duration_seconds_count{op="`):
				name, _, _ := strings.Cut(strings.TrimPrefix(line, `relayd_store_operation_duration_seconds_count{op="`), `"`)
				total.opsByName[name] += value()
			case strings.HasPrefix(line, "process_cpu_seconds_total "):
				total.cpuSeconds += value()
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			return total, fmt.Errorf("scrape %s: %w", u, err)
		}
	}
	return total, nil
}

// valkeyStats are the server-wide counters a run is measured by.
type valkeyStats struct {
	commands      int64
	input, output int64
	// cpuSeconds is the server's CPU time, user and system.
	cpuSeconds float64
}

func (s valkeyStats) bytes() int64 { return s.input + s.output }

func readValkeyStats(ctx context.Context, addr string) (valkeyStats, error) {
	c, err := vk.NewClient(vk.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		return valkeyStats{}, fmt.Errorf("valkey stats: %w", err)
	}
	defer c.Close()
	var info string
	for _, section := range []string{"stats", "cpu"} {
		text, err := c.Do(ctx, c.B().Info().Section(section).Build()).ToString()
		if err != nil {
			return valkeyStats{}, fmt.Errorf("valkey stats: %w", err)
		}
		info += text
	}
	var s valkeyStats
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "total_commands_processed":
			s.commands = int64(parseFloat(v))
		case "total_net_input_bytes":
			s.input = int64(parseFloat(v))
		case "total_net_output_bytes":
			s.output = int64(parseFloat(v))
		case "used_cpu_sys", "used_cpu_user":
			s.cpuSeconds += parseFloat(v)
		}
	}
	return s, nil
}

// Limit is what one Valkey can do at best: EVALSHA of a trivial script,
// measured with redis-benchmark (or valkey-benchmark) against the server.
type Limit struct {
	Tool              string  `json:"tool"`
	Clients           int     `json:"clients"`
	Requests          int     `json:"requests"`
	EvalshaPerSecond  float64 `json:"evalshaPerSecond"`
	StoreOpsPerSecond float64 `json:"storeOpsPerSecond,omitempty"`
	Ratio             float64 `json:"ratio,omitempty"`
}

var rpsLine = regexp.MustCompile(`([0-9.]+) requests per second`)

// MeasureLimit loads a trivial script and runs the benchmark tool on it.
func MeasureLimit(ctx context.Context, addr string, clients, requests int) (Limit, error) {
	tool := ""
	for _, name := range []string{"valkey-benchmark", "redis-benchmark"} {
		if p, err := exec.LookPath(name); err == nil {
			tool = p
			break
		}
	}
	if tool == "" {
		return Limit{}, errors.New("limit: neither valkey-benchmark nor redis-benchmark is on PATH")
	}
	c, err := vk.NewClient(vk.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		return Limit{}, fmt.Errorf("limit: %w", err)
	}
	sha, err := c.Do(ctx, c.B().ScriptLoad().Script("return 1").Build()).ToString()
	c.Close()
	if err != nil {
		return Limit{}, fmt.Errorf("limit: load script: %w", err)
	}
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		return Limit{}, fmt.Errorf("limit: address %q is not host:port", addr)
	}
	out, err := exec.CommandContext(ctx, tool, "-h", host, "-p", port, "-c", fmt.Sprint(clients), "-n", fmt.Sprint(requests),
		"-q", "EVALSHA", sha, "0").CombinedOutput()
	if err != nil {
		return Limit{}, fmt.Errorf("limit: %s: %w\n%s", tool, err, out)
	}
	m := rpsLine.FindAllStringSubmatch(string(out), -1)
	if len(m) == 0 {
		return Limit{}, fmt.Errorf("limit: no rate in %s output: %q", tool, out)
	}
	return Limit{Tool: tool, Clients: clients, Requests: requests, EvalshaPerSecond: parseFloat(m[len(m)-1][1])}, nil
}

// cpuProfile saves a CPU profile of one replica, taken over seconds.
func cpuProfile(ctx context.Context, admin string, seconds int, path string) error {
	if seconds <= 0 {
		seconds = 10
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", admin, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cpu profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("cpu profile: %w", err)
	}
	return f.Close()
}
