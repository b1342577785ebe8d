// pause is the pod sandbox's process: it holds the pod's namespaces, reaps orphaned children
// (it is PID 1 of the pod when the PID namespace is shared) and exits on SIGTERM or SIGINT.
// Kubernetes' own pause is C in kubernetes/build/pause, which is not published as a Go module.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
