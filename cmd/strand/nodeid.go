package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// hostname is os.Hostname; tests replace it.
var hostname = os.Hostname

// nodeIDFromHostname derives --node-id from a host name ending in -N, as
// a Kubernetes StatefulSet names its pods (strand-0, strand-1, ...): each
// agent needs a unique broker id that stays the same across restarts,
// and the pod ordinal is exactly that. A Deployment's random pod names
// carry no such number, which is why the Helm chart runs a StatefulSet.
func nodeIDFromHostname(host string) (int32, error) {
	// A fully qualified name's first label is the pod's.
	label, _, _ := strings.Cut(host, ".")
	i := strings.LastIndexByte(label, '-')
	if i < 0 || i == len(label)-1 {
		return 0, fmt.Errorf("node-id-from-hostname: host name %q does not end in -N", host)
	}
	n, err := strconv.ParseUint(label[i+1:], 10, 31)
	if err != nil {
		return 0, fmt.Errorf("node-id-from-hostname: host name %q does not end in -N (N a non-negative 31-bit number)", host)
	}
	return int32(n), nil
}
