package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// serveKfake runs an in-memory kfake cluster in this process, prints its
// listen addresses as one line "kfake ADDR,ADDR,...", and serves until
// stdin closes (the coordinator's end of the pipe).
func serveKfake(brokers int) error {
	opts := []kfake.Opt{kfake.NumBrokers(brokers), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(6)}
	if os.Getenv("BENCH_KFAKE_STORE") == "" {
		// Acknowledge without storing: the broker stays cheap and its
		// memory flat, whatever the number of runs.
		opts = append(opts, kfake.BlackholeProduce())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Printf("kfake %s\n", strings.Join(c.ListenAddrs(), ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// kfakeProc is a kfake cluster the coordinator started.
type kfakeProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addrs []string
}

func startKfake(brokers int, store bool) (*kfakeProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-kfake-serve", fmt.Sprintf("-kfake-brokers=%d", brokers))
	cmd.Stderr = os.Stderr
	cmd.Env = os.Environ()
	if store {
		cmd.Env = append(cmd.Env, "BENCH_KFAKE_STORE=1")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &kfakeProc{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-line:
		addrs, found := strings.CutPrefix(l, "kfake ")
		if !ok || !found {
			p.stop()
			return nil, fmt.Errorf("kfake server did not start (said %q)", l)
		}
		p.addrs = strings.Split(addrs, ",")
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("kfake server did not start within 30s")
	}
	return p, nil
}

func (p *kfakeProc) stop() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}
