package cli

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The flag package cannot parse what Kafka's tools accept: argparse's
// "--producer-props a=1 b=2" (several values after one flag) and long
// names with a dot ("--producer.config"). This small parser handles both,
// plus "--name=value", "-Xk=v" (value glued to a one-letter flag, as kcat
// and librdkafka tools take it) and "--" to end the flags.

// flagKind says how many values a flag takes.
type flagKind int

const (
	flagValue flagKind = iota // one value
	flagBool                  // no value ("--json"; "--json=false" also works)
	flagMulti                 // one or more values, up to the next "-..." (argparse nargs="+")
)

// flagDef is one flag of a command.
type flagDef struct {
	names   []string // "--bootstrap-server", "--brokers": the first is the one shown first
	metavar string   // what the value is, in the usage ("TOPIC")
	help    string
	def     string // the default shown in the usage; "" shows none
	kind    flagKind
	set     func(value string) error // called once per value
	wasSet  bool
	usedAs  string // the name it was last given by ("--brokers")
}

// flagSet holds the flags of one command.
type flagSet struct {
	cmd   string // "perf", for messages
	flags []*flagDef
	byKey map[string]*flagDef
	help  bool              // -h / --help was given
	hints map[string]string // unknown flag name -> what to say about it
}

func newFlagSet(cmd string) *flagSet {
	return &flagSet{cmd: cmd, byKey: map[string]*flagDef{}}
}

func (fs *flagSet) add(d *flagDef) *flagDef {
	for _, n := range d.names {
		if _, dup := fs.byKey[n]; dup {
			panic("cli: flag " + n + " defined twice")
		}
		fs.byKey[n] = d
	}
	fs.flags = append(fs.flags, d)
	return d
}

func (fs *flagSet) stringVar(p *string, names []string, metavar, help string) *flagDef {
	def := ""
	if *p != "" {
		def = *p
	}
	return fs.add(&flagDef{names: names, metavar: metavar, help: help, def: def,
		set: func(v string) error { *p = v; return nil }})
}

func (fs *flagSet) intVar(p *int64, names []string, metavar, help string) *flagDef {
	d := &flagDef{names: names, metavar: metavar, help: help, def: strconv.FormatInt(*p, 10)}
	d.set = func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		*p = n
		return nil
	}
	return fs.add(d)
}

func (fs *flagSet) floatVar(p *float64, names []string, metavar, help string) *flagDef {
	d := &flagDef{names: names, metavar: metavar, help: help, def: strconv.FormatFloat(*p, 'g', -1, 64)}
	d.set = func(v string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return fmt.Errorf("want a number")
		}
		*p = f
		return nil
	}
	return fs.add(d)
}

func (fs *flagSet) boolVar(p *bool, names []string, help string) *flagDef {
	d := &flagDef{names: names, help: help, kind: flagBool}
	d.set = func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		*p = b
		return nil
	}
	return fs.add(d)
}

// listVar appends each value; repeatable ("-X a=1 -X b=2"). With multi,
// one flag also takes several values ("--producer-props a=1 b=2").
func (fs *flagSet) listVar(p *[]string, names []string, metavar, help string, multi bool) *flagDef {
	d := &flagDef{names: names, metavar: metavar, help: help,
		set: func(v string) error { *p = append(*p, v); return nil }}
	if multi {
		d.kind = flagMulti
	}
	return fs.add(d)
}

// usageError is a mistake on the command line: exit status 2. err, if
// set, is a sentinel it wraps for errors.Is.
type usageError struct {
	msg string
	err error
}

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// parse sets the flags from args and returns the arguments that are not
// flags. Errors are *usageError.
func (fs *flagSet) parse(args []string) ([]string, error) {
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(rest, args[i+1:]...), nil
		}
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		if a == "-h" || a == "--help" || a == "-help" {
			fs.help = true
			continue
		}
		name, value, hasValue := strings.Cut(a, "=")
		d := fs.byKey[name]
		if d == nil && !strings.HasPrefix(a, "--") && len(a) > 2 {
			if fs.byKey["-"+name] != nil {
				// "-topic=x" would read as "-t opic=x": refuse it.
				return nil, usagef("%s: long flags take two dashes: -%s", a, a)
			}
			// "-Xlinger.ms=5": a one-letter flag with its value glued on.
			if d = fs.byKey[a[:2]]; d != nil && d.kind != flagBool {
				name, value, hasValue = a[:2], a[2:], true
			}
		}
		if d == nil {
			return nil, fs.unknown(name)
		}
		d.wasSet, d.usedAs = true, name
		switch {
		case d.kind == flagBool:
			if !hasValue {
				value = "true"
			}
			if err := d.set(value); err != nil {
				return nil, usagef("invalid value %q for %s: %v", value, name, err)
			}
		case hasValue:
			if err := d.set(value); err != nil {
				return nil, usagef("invalid value %q for %s: %v", value, name, err)
			}
		default:
			n := 0
			for i+1 < len(args) && (n == 0 || d.kind == flagMulti && !looksLikeFlag(args[i+1])) {
				if n == 0 && d.kind != flagMulti && looksLikeFlag(args[i+1]) && fs.byKey[flagName(args[i+1])] != nil {
					break // "--topic --json": the value is missing
				}
				i++
				if err := d.set(args[i]); err != nil {
					return nil, usagef("invalid value %q for %s: %v", args[i], name, err)
				}
				n++
			}
			if n == 0 {
				return nil, usagef("%s needs a value (%s)", name, d.metavar)
			}
		}
	}
	return rest, nil
}

func looksLikeFlag(s string) bool { return len(s) > 1 && s[0] == '-' }

func flagName(s string) string {
	n, _, _ := strings.Cut(s, "=")
	return n
}

// unknownHint sets the error for a flag the command does not have but
// users bring from another tool.
func (fs *flagSet) unknownHint(name, msg string) {
	if fs.hints == nil {
		fs.hints = map[string]string{}
	}
	fs.hints[name] = msg
}

func (fs *flagSet) unknown(name string) error {
	if h := fs.hints[name]; h != "" {
		return usagef("unknown flag %s: %s", name, h)
	}
	best, bestDist := "", 4
	// In sorted order, so that a tie gives the same suggestion every run.
	for _, k := range slices.Sorted(maps.Keys(fs.byKey)) {
		if d := editDistance(strings.TrimLeft(name, "-"), strings.TrimLeft(k, "-")); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return usagef("unknown flag %s (did you mean %s?)", name, best)
	}
	return usagef("unknown flag %s", name)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// printUsage writes the options in the two-column layout of Kafka's
// argparse tools: the flag and its value on the left, the help wrapped on
// the right, "(default: X)" at the end.
func (fs *flagSet) printUsage(w io.Writer) {
	const col, width = 32, 100
	fmt.Fprintln(w, "options:")
	left := func(d *flagDef) string {
		s := "  " + strings.Join(d.names, ", ")
		switch d.kind {
		case flagValue:
			s += " " + d.metavar
		case flagMulti:
			s += " " + d.metavar + " [" + d.metavar + " ...]"
		}
		return s
	}
	help := &flagDef{names: []string{"-h", "--help"}, kind: flagBool, help: "show this help message and exit"}
	for _, d := range append([]*flagDef{help}, fs.flags...) {
		l := left(d)
		text := d.help
		if d.def != "" {
			text += " (default: " + d.def + ")"
		}
		lines := wrap(text, width-col)
		if len(l) >= col-1 {
			fmt.Fprintln(w, l)
		} else if len(lines) > 0 {
			fmt.Fprintf(w, "%-*s%s\n", col, l, lines[0])
			lines = lines[1:]
		}
		for _, line := range lines {
			fmt.Fprintf(w, "%*s%s\n", col, "", line)
		}
	}
}

// wrap breaks text into lines of at most width characters at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// printWrapped writes a paragraph wrapped to the usage width.
func printWrapped(w io.Writer, text string) {
	for _, l := range wrap(text, 100) {
		fmt.Fprintln(w, l)
	}
}

// unescape turns the escapes people type in a shell for a delimiter
// ("\n", "\t", "\r", "\0", "\\") into the bytes they stand for, as Kafka's
// tools take "\t" for key.separator.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(s) {
			return "", errors.New(`a lone "\" at the end; write "\\" for a backslash`)
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case '\\':
			b.WriteByte('\\')
		default:
			return "", fmt.Errorf(`unknown escape "\%c" (known: \n \t \r \0 \\)`, s[i])
		}
	}
	return b.String(), nil
}
