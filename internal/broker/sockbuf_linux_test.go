package broker

import (
	"net"
	"syscall"
	"testing"
)

// sockopt reads an int socket option of the connection's socket.
func sockopt(t *testing.T, c *Conn, opt int) int {
	t.Helper()
	rc, err := c.nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// send.buffer.bytes and receive.buffer.bytes size the socket's buffers, as
// Java's Selector does; 0 (the producer's -1) leaves the OS default.
// Linux reports twice the size set (man 7 socket).
func TestSocketBufferSizes(t *testing.T) {
	kc := newCluster(t)
	addr := kc.ListenAddrs()[0]
	cfg := testConfig()
	cfg.SendBuffer, cfg.ReceiveBuffer = 96*1024, 48*1024
	c := dialTest(t, addr, cfg)
	if got := sockopt(t, c, syscall.SO_SNDBUF); got != 2*cfg.SendBuffer {
		t.Errorf("SO_SNDBUF = %d, want %d (twice send.buffer.bytes)", got, 2*cfg.SendBuffer)
	}
	if got := sockopt(t, c, syscall.SO_RCVBUF); got != 2*cfg.ReceiveBuffer {
		t.Errorf("SO_RCVBUF = %d, want %d (twice receive.buffer.bytes)", got, 2*cfg.ReceiveBuffer)
	}

	def := dialTest(t, addr, testConfig())
	if got := sockopt(t, def, syscall.SO_RCVBUF); got == 2*cfg.ReceiveBuffer {
		t.Errorf("SO_RCVBUF = %d with no size set: want the OS default", got)
	}
}
