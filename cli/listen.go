package cli

import (
	"fmt"
	"net"
)

// checkListen refuses an address net.Listen could not bind before any
// check reads its host: "8080" (a port alone) would otherwise be taken
// for a non-loopback host and refused "without auth", which sends the
// user to configure tokens instead of to write 127.0.0.1:8080. from names
// where the address came from (--http, [console] listen).
func checkListen(addr, from string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return &usageError{fmt.Sprintf("%s %q: want HOST:PORT, e.g. 127.0.0.1:8080 (%v)", from, addr, err)}
	}
	return nil
}
