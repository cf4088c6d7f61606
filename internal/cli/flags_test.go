package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func testFlags() (*flagSet, *struct {
	s     string
	n     int64
	f     float64
	b     bool
	list  []string
	multi []string
}) {
	v := &struct {
		s     string
		n     int64
		f     float64
		b     bool
		list  []string
		multi []string
	}{s: "dflt", n: 7, f: -1}
	fs := newFlagSet("test")
	fs.stringVar(&v.s, []string{"--str", "-s"}, "S", "a string")
	fs.intVar(&v.n, []string{"--num"}, "N", "a number")
	fs.floatVar(&v.f, []string{"--rate"}, "R", "a rate")
	fs.boolVar(&v.b, []string{"--json"}, "a switch")
	fs.listVar(&v.list, []string{"-X"}, "K=V", "repeatable", false)
	fs.listVar(&v.multi, []string{"--props", "--producer.props"}, "K=V", "several", true)
	return fs, v
}

func TestFlagParse(t *testing.T) {
	fs, v := testFlags()
	rest, err := fs.parse([]string{"--str=a=b", "--num", "42", "--rate", "-1.5", "--json",
		"pos", "-X", "a=1", "-Xb=2", "--props", "c=3", "d=4", "--producer.props", "e=5", "--", "--num"})
	if err != nil {
		t.Fatal(err)
	}
	if v.s != "a=b" || v.n != 42 || v.f != -1.5 || !v.b {
		t.Errorf("got %+v", v)
	}
	if !slices.Equal(v.list, []string{"a=1", "b=2"}) || !slices.Equal(v.multi, []string{"c=3", "d=4", "e=5"}) {
		t.Errorf("lists %q %q", v.list, v.multi)
	}
	if !slices.Equal(rest, []string{"pos", "--num"}) {
		t.Errorf("rest %q", rest)
	}
	if !fs.byKey["--num"].wasSet || fs.byKey["--str"].wasSet != true {
		t.Error("wasSet not recorded")
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, "unknown flag --nope"},
		{[]string{"--nmu", "3"}, "did you mean --num?"},
		{[]string{"--num"}, "--num needs a value"},
		{[]string{"--str", "--json"}, "--str needs a value"},
		{[]string{"--num", "x"}, `invalid value "x" for --num`},
		{[]string{"--rate=fast"}, `invalid value "fast" for --rate`},
		{[]string{"--json=maybe"}, `invalid value "maybe" for --json`},
		{[]string{"--props"}, "--props needs a value"},
		// Not "-s tr=x" with the value glued on: a long flag, one dash short.
		{[]string{"-str=x"}, "long flags take two dashes: --str=x"},
		{[]string{"-str", "x"}, "long flags take two dashes: --str"},
	} {
		fs, _ := testFlags()
		_, err := fs.parse(tc.args)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want a usage error saying %q", tc.args, err, tc.want)
		}
	}
}

func TestFlagHelp(t *testing.T) {
	fs, _ := testFlags()
	if _, err := fs.parse([]string{"--num", "1", "-h"}); err != nil || !fs.help {
		t.Fatalf("help %v, err %v", fs.help, err)
	}
	var b strings.Builder
	fs.printUsage(&b)
	for _, w := range []string{"-h, --help", "--str, -s S", "(default: dflt)", "--props, --producer.props K=V [K=V ...]", "(default: -1)"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("usage lacks %q:\n%s", w, b.String())
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`\t`: "\t", `a\nb`: "a\nb", `\\t`: `\t`, `\0`: "\x00", `|`: "|", `\r\n`: "\r\n"} {
		if got, err := unescape(in); err != nil || got != want {
			t.Errorf("unescape(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`\`, `a\q`} {
		if _, err := unescape(bad); err == nil {
			t.Errorf("unescape(%q) accepted", bad)
		}
	}
}
