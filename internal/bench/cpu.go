package bench

import (
	"syscall"
	"time"
)

// selfCPU is this process's CPU time so far, user and system: in a
// lifecycle run, what the load generator (the site and the daemons) spent.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
