package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// runCLI runs the command in-process, as main does, and returns its exit
// status, stdout and stderr.
func runCLI(ctx context.Context, stdin io.Reader, args ...string) (int, string, string) {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var stdout, stderr bytes.Buffer
	code := Run(ctx, args, stdin, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func newTestCluster(t *testing.T, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// decodePerfJSON decodes perf --json's stdout, which must be exactly one
// JSON object, into the fields and the raw map.
func decodePerfJSON(t *testing.T, stdout string) (perfJSON, map[string]json.RawMessage) {
	t.Helper()
	var out perfJSON
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%q", err, stdout)
	}
	if dec.More() {
		t.Fatalf("stdout has more than one JSON value:\n%s", stdout)
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	return out, raw
}

// withTestGrace sets interruptGrace for one test.
func withTestGrace(t *testing.T, d time.Duration) {
	old := interruptGrace
	interruptGrace = d
	t.Cleanup(func() { interruptGrace = old })
}
