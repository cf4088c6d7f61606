// Package javacompat runs the Java side of kprod's compatibility tests:
// the Kafka jars that scripts/kafka-cluster.sh installs from Maven Central
// (the Java client itself and the console consumer of kafka-tools), and
// small Java programs compiled at test time against them.
//
// Gating follows internal/testcluster: without KPROD_INTEGRATION=1 or
// CI=true the tests skip; with either, a missing java, javac or jar fails
// the test (CI never skips).
package javacompat

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// DefaultKafkaVersion is the version kafka-cluster.sh installs unless
// KPROD_KAFKA_VERSION says otherwise.
const DefaultKafkaVersion = "4.4.0"

// Wanted reports whether integration tests run (KPROD_INTEGRATION=1 or
// CI=true) and whether they must not skip (CI).
func Wanted() (wanted, inCI bool) {
	ci := os.Getenv("CI")
	inCI = ci == "true" || ci == "1"
	return os.Getenv("KPROD_INTEGRATION") == "1" || inCI, inCI
}

// LibsDir is where kafka-cluster.sh puts the Kafka jars: $KPROD_CACHE/libs,
// by default $HOME/.cache/kprod/kafka-$KPROD_KAFKA_VERSION/libs.
func LibsDir() string {
	cache := os.Getenv("KPROD_CACHE")
	if cache == "" {
		v := os.Getenv("KPROD_KAFKA_VERSION")
		if v == "" {
			v = DefaultKafkaVersion
		}
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "kprod", "kafka-"+v)
	}
	return filepath.Join(cache, "libs")
}

// Libs skips the test unless integration tests are wanted, and returns the
// jar directory after checking that java, javac and the client jar are
// there (failing the test if not).
func Libs(t testing.TB) string {
	t.Helper()
	if wanted, _ := Wanted(); !wanted {
		t.Skip("set KPROD_INTEGRATION=1 (Java compatibility tests need the jars of `bash scripts/kafka-cluster.sh install`)")
	}
	for _, tool := range []string{javaCmd("java"), javaCmd("javac")} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed for the Java compatibility tests: %v (scripts/kafka-cluster.sh install sets up java 17+)", tool, err)
		}
	}
	dir := LibsDir()
	jars, _ := filepath.Glob(filepath.Join(dir, "kafka-clients-*.jar"))
	if len(jars) == 0 {
		t.Fatalf("no kafka-clients jar in %s: run `bash scripts/kafka-cluster.sh install` (or set KPROD_CACHE)", dir)
	}
	return dir
}

func javaCmd(name string) string {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		return filepath.Join(home, "bin", name)
	}
	return name
}

// Program is a compiled Java program.
type Program struct {
	classes string // directory of the compiled classes
	libs    string
	main    string // fully qualified main class
}

// Compile compiles the Java source file src (e.g. testdata/x/Y.java)
// against the Kafka jars into a temporary directory of the test; main is
// the fully qualified name of its class with main.
func Compile(t testing.TB, src, main string) *Program {
	t.Helper()
	libs := Libs(t)
	out := t.TempDir()
	cmd := exec.Command(javaCmd("javac"), "-nowarn", "-cp", filepath.Join(libs, "*"), "-d", out, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("javac %s: %v\n%s", src, err, b)
	}
	return &Program{classes: out, libs: libs, main: main}
}

// Run runs the program with args, feeds it stdin and returns its standard
// output, failing the test if it fails or runs longer than timeout.
func (p *Program) Run(t testing.TB, timeout time.Duration, stdin []byte, args ...string) []byte {
	t.Helper()
	cp := p.classes + string(os.PathListSeparator) + filepath.Join(p.libs, "*")
	return RunJava(t, timeout, stdin, cp, p.main, args...)
}

// RunJava runs a Java main class with the classpath cp and returns its
// standard output; the test fails if the program fails.
func RunJava(t testing.TB, timeout time.Duration, stdin []byte, cp, main string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, javaCmd("java"), append([]string{"-cp", cp, main}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("java %s %s: %v\nstderr:\n%s", main, strings.Join(args, " "), err, tail(stderr.String(), 4000))
	}
	return stdout.Bytes()
}

// Classpath is the classpath of every Kafka jar (for kafka-tools' main
// classes such as the console consumer).
func Classpath(t testing.TB) string {
	t.Helper()
	return filepath.Join(Libs(t), "*")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
