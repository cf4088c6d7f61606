package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildBadPropertyHidesValue: a property argument without "name="
// was repeated whole in the usage error, so "-X ssl.key.password:hunter2"
// or "-X =hunter2" printed the password.
func TestBuildBadPropertyHidesValue(t *testing.T) {
	const secret = "hunter2-Qx9"
	for _, tc := range []struct {
		name string
		pf   producerFlags
		want []string
	}{
		{"colon for equals", producerFlags{x: []string{"ssl.key.password:" + secret}},
			[]string{"-X needs PROP-NAME=PROP-VALUE", "write ssl.key.password=VALUE"}},
		{"space for equals", producerFlags{x: []string{"sasl.jaas.config " + secret}},
			[]string{"-X needs PROP-NAME=PROP-VALUE", "write sasl.jaas.config=VALUE"}},
		{"empty name", producerFlags{x: []string{"=" + secret}},
			[]string{"-X needs PROP-NAME=PROP-VALUE", "name before '=' is empty"}},
		{"blank name", producerFlags{x: []string{"  =" + secret}},
			[]string{"-X needs PROP-NAME=PROP-VALUE", "name before '=' is empty"}},
		{"bare value", producerFlags{x: []string{secret}},
			[]string{"-X needs PROP-NAME=PROP-VALUE", "has no '='"}},
		{"unknown name with a colon", producerFlags{x: []string{secret + ":x"}},
			[]string{"-X needs PROP-NAME=PROP-VALUE", "has no '='"}},
		{"--producer-property", producerFlags{propsFlag: "--producer-property", props: []string{"ssl.truststore.password:" + secret}},
			[]string{"--producer-property needs PROP-NAME=PROP-VALUE", "write ssl.truststore.password=VALUE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.pf.build(nil)
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("err %v (%T), want a *usageError", err, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the secret: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}

	// A known name without a value is named.
	pf := producerFlags{x: []string{"linger.ms"}}
	if _, err := pf.build(nil); err == nil || !strings.Contains(err.Error(), "linger.ms has no '=VALUE'") {
		t.Errorf("-X linger.ms: %v", err)
	}
	// A good one still works, and a bad value is the library's error.
	pf = producerFlags{x: []string{"linger.ms=7"}}
	if cfg, err := pf.build(nil); err != nil || cfg.Linger.Milliseconds() != 7 {
		t.Errorf("-X linger.ms=7: %v", err)
	}
	pf = producerFlags{x: []string{"linger.ms=soon"}}
	var ce *configError
	if _, err := pf.build(nil); !errors.As(err, &ce) {
		t.Errorf("-X linger.ms=soon: %v (%T), want a *configError", err, err)
	}
}

// Kafka 4.2's names for the property flags (KIP-1147) work as the older
// ones do, in both commands.
func TestCommandPropertyAliases(t *testing.T) {
	for _, multi := range []bool{true, false} {
		var pf producerFlags
		fs := newFlagSet("test")
		pf.register(fs, "--producer-props", multi)
		if _, err := fs.parse([]string{"--command-property", "acks=1", "--command-config", "/nonexistent.properties"}); err != nil {
			t.Fatalf("multi %v: %v", multi, err)
		}
		if len(pf.props) != 1 || pf.props[0] != "acks=1" || pf.configFile != "/nonexistent.properties" {
			t.Errorf("multi %v: props %q, config file %q", multi, pf.props, pf.configFile)
		}
	}
}

// TestEmptyBootstrapIsUsageError: an explicitly given but empty
// bootstrap list ("--bootstrap-server $BROKERS" with BROKERS unset) made
// perf run its embedded cluster, saying "no --bootstrap-server given".
func TestEmptyBootstrapIsUsageError(t *testing.T) {
	dir := t.TempDir()
	emptyFile := filepath.Join(dir, "empty.properties")
	if err := os.WriteFile(emptyFile, []byte("bootstrap.servers=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bootstrap-server", ""}, "--bootstrap-server is empty"},
		{[]string{"--brokers="}, "--brokers is empty"},
		{[]string{"-b", " "}, "-b is empty"},
		{[]string{"-X", "bootstrap.servers="}, "-X bootstrap.servers is empty"},
		{[]string{"--producer.config", emptyFile}, "bootstrap.servers in " + emptyFile + " is empty"},
		// The flag overrides the others, an empty one too.
		{[]string{"-X", "bootstrap.servers=127.0.0.1:1", "--bootstrap-server="}, "--bootstrap-server is empty"},
	} {
		for _, cmd := range []string{"perf", "produce"} {
			args := append([]string{cmd, "--topic", "t", "--num-records", "1"}, tc.args...)
			if cmd == "produce" {
				args = append([]string{cmd, "--topic", "t"}, tc.args...)
			}
			var stdout, stderr strings.Builder
			code := Run(context.Background(), args, strings.NewReader("x\n"), &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("%q: exit %d, want %d\nstderr: %s", args, code, exitUsage, stderr.String())
				continue
			}
			for _, w := range []string{tc.want, "give the brokers as HOST:PORT"} {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("%q: stderr lacks %q:\n%s", args, w, stderr.String())
				}
			}
			if hint := "leave it out to run against an embedded"; strings.Contains(stderr.String(), hint) != (cmd == "perf") {
				t.Errorf("%q: the embedded-cluster hint belongs to perf only:\n%s", args, stderr.String())
			}
		}
	}

	pf := producerFlags{propsFlag: "--producer-props", props: []string{"bootstrap.servers= "}}
	var ue *usageError
	if _, err := pf.build(nil); !errors.Is(err, errEmptyBootstrap) || !errors.As(err, &ue) {
		t.Errorf("build: %v (%T), want a *usageError wrapping errEmptyBootstrap", err, err)
	}
	// An empty value that a later flag overrides is no mistake, and no
	// value at all is for the command to judge.
	pf = producerFlags{propsFlag: "--producer-props", props: []string{"bootstrap.servers="}, x: []string{"bootstrap.servers=b:9092"}}
	if cfg, err := pf.build(nil); err != nil || len(cfg.BootstrapServers) != 1 {
		t.Errorf("overridden empty value: %v, %q", err, cfg.BootstrapServers)
	}
	if cfg, err := (&producerFlags{}).build(nil); err != nil || len(cfg.BootstrapServers) != 0 {
		t.Errorf("no value: %v, %q", err, cfg.BootstrapServers)
	}
}
