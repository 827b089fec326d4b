package valkeytest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// formCluster joins fresh nodes into one cluster owning all 16384
// slots: with valkey-cli/redis-cli --cluster create when present and
// there are three primaries at least (its minimum), else by hand with
// CLUSTER ADDSLOTSRANGE and CLUSTER MEET.
func formCluster(ctx context.Context, addrs []string) error {
	if cli := cliBinary(); cli != "" && len(addrs) >= 3 {
		args := append([]string{"--cluster", "create"}, addrs...)
		args = append(args, "--cluster-replicas", "0", "--cluster-yes")
		out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s --cluster create: %v: %s", cli, err, lastLines(string(out), 5))
		}
	} else if err := formByHand(ctx, addrs); err != nil {
		return err
	}
	return waitClusterOK(ctx, addrs, 30*time.Second)
}

func formByHand(ctx context.Context, addrs []string) error {
	const slots = 16384
	per := slots / len(addrs)
	for i, a := range addrs {
		lo, hi := i*per, (i+1)*per-1
		if i == len(addrs)-1 {
			hi = slots - 1
		}
		if _, err := command(ctx, a, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE on %s: %w", a, err)
		}
	}
	host, port, err := net.SplitHostPort(addrs[0])
	if err != nil {
		return err
	}
	for _, a := range addrs[1:] {
		if _, err := command(ctx, a, "CLUSTER", "MEET", host, port); err != nil {
			return fmt.Errorf("CLUSTER MEET from %s: %w", a, err)
		}
	}
	return nil
}

// waitClusterOK polls CLUSTER INFO on every node until each reports
// cluster_state:ok and knows every other node.
func waitClusterOK(ctx context.Context, addrs []string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		ready := true
		var last string
		for _, a := range addrs {
			info, err := command(ctx, a, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(addrs))) {
				ready = false
				last = fmt.Sprintf("%s: %v %s", a, err, strings.ReplaceAll(info, "\r\n", " "))
				break
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready: %s", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
