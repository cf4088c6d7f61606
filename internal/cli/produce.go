package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod"
	"github.com/kprod/kprod/kerr"
)

const produceDescription = `Send records read from stdin, one per line (or per --delimiter), ` +
	`like Kafka's kafka-console-producer.sh. With --key-delimiter each line is KEY<delim>VALUE ` +
	`(parse.key=true); a line without the delimiter fails. Records are sent asynchronously: ` +
	`memory is bounded by buffer.memory, and a record longer than max.request.size fails alone. ` +
	`At the end (EOF, or SIGINT/SIGTERM: then reading stops and what was read is still delivered, ` +
	`for at most 10s in all, closing included; a second signal exits at once) it prints "N records sent, M failed" on stderr ` +
	`(followed by ", K not sent" when an error that would fail every record stopped the run with ` +
	`records read but not yet sent), with the first errors; ` +
	`the exit status is 1 if any record failed or was not sent, else 130 after SIGINT/SIGTERM; 2 for bad flags or settings.`

type produceCmd struct {
	topic        string
	delimiter    string
	keyDelimiter string
	headers      []string
	partition    int64
	pf           producerFlags

	fs           *flagSet
	partitionDef *flagDef
}

func newProduceCmd() *produceCmd {
	c := &produceCmd{delimiter: `\n`, partition: -1}
	fs := newFlagSet("produce")
	fs.stringVar(&c.topic, []string{"--topic", "-t"}, "TOPIC", "REQUIRED: the topic to produce to")
	c.pf.register(fs, "--producer-property", false)
	fs.defs("--bootstrap-server").help = "REQUIRED unless bootstrap.servers is in --producer.config, --producer-property or -X: " +
		"the brokers to connect to; overrides bootstrap.servers from the other flags"
	fs.stringVar(&c.delimiter, []string{"--delimiter"}, "DELIM",
		`what ends a record in the input; escapes \n \t \r \0 \\ are understood. With \n a trailing \r is dropped too`)
	fs.stringVar(&c.keyDelimiter, []string{"--key-delimiter"}, "SEP",
		`split each record at the first SEP into key and value (as parse.key=true key.separator=SEP); e.g. ":" or "\t". Default: no key`)
	fs.listVar(&c.headers, []string{"-H", "--header"}, "KEY=VALUE",
		"a header added to every record; repeatable. KEY alone (no =) is a header with a null value", false)
	c.partitionDef = fs.intVar(&c.partition, []string{"--partition"}, "N",
		"send every record to partition N instead of letting the partitioner choose")
	c.partitionDef.def = ""
	// kafka-console-producer takes its reader properties (parse.key=true,
	// key.separator, parse.headers, ...) with --property (Kafka 4.2:
	// --reader-property) or from a --reader-config file.
	for _, name := range []string{"--property", "--reader-property", "--reader-config"} {
		fs.unknownHint(name, "kprod produce has no "+name+": for parse.key=true key.separator=SEP give --key-delimiter SEP; "+
			"for a header on every record give -H KEY=VALUE (headers are not read from the input; null.marker and ignore.error do not exist here); "+
			"producer properties go in --producer-property or -X")
	}
	c.fs = fs
	return c
}

// defs returns the flag registered under name.
func (fs *flagSet) defs(name string) *flagDef { return fs.byKey[name] }

func (c *produceCmd) usage(w io.Writer) {
	printCommandUsage(w, []string{
		"usage: kprod produce --bootstrap-server HOST:PORT,... --topic TOPIC [--key-delimiter SEP]",
		"                     [--delimiter DELIM] [-H KEY=VALUE]... [--partition N]",
		"                     [--producer.config FILE] [-X PROP=VALUE]... < records",
	}, produceDescription, c.fs, []string{
		"printf 'k1:v1\\nk2:v2\\n' | kprod produce --brokers localhost:9092 --topic t --key-delimiter :",
		"kprod produce -b localhost:9092 -t t -H source=import -X acks=1 -X linger.ms=50 < records.txt",
	})
}

// printCommandUsage prints a command's help: its synopsis lines, its
// description, its flags and its examples.
func printCommandUsage(w io.Writer, synopsis []string, description string, fs *flagSet, examples []string) {
	for _, l := range synopsis {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
	printWrapped(w, description)
	fmt.Fprintln(w)
	fs.printUsage(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "examples:")
	for _, e := range examples {
		fmt.Fprintln(w, "  "+e)
	}
}

// inLine is one record read from stdin, or the read error that ended it.
type inLine struct {
	data    []byte
	n       int64 // 1-based
	tooLong int64 // > 0: the record had this many bytes, more than allowed; data is nil
	err     error
}

// produceRun is one run's state shared with the producer's callbacks.
type produceRun struct {
	acked    atomic.Int64
	fails    failures
	fatal    atomic.Pointer[error]
	lastAck  progress
	maxBlock time.Duration
}

func (c *produceCmd) run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	rest, err := c.fs.parse(args)
	if err != nil {
		return usageFail(stderr, "produce", err)
	}
	if c.fs.help {
		c.usage(stdout)
		return exitOK
	}
	if len(rest) > 0 {
		return usageFail(stderr, "produce", usagef("unexpected argument %q (records are read from stdin)", rest[0]))
	}
	if c.topic == "" {
		return usageFail(stderr, "produce", usagef("--topic is required"))
	}
	delim, err := unescape(c.delimiter)
	if err != nil || delim == "" {
		return usageFail(stderr, "produce", usagef("invalid --delimiter %q: %v", c.delimiter, orEmpty(err)))
	}
	keyDelim, err := unescape(c.keyDelimiter)
	if err != nil {
		return usageFail(stderr, "produce", usagef("invalid --key-delimiter %q: %v", c.keyDelimiter, err))
	}
	if c.partitionDef.wasSet && (c.partition < 0 || c.partition > math.MaxInt32) {
		return usageFail(stderr, "produce", usagef("--partition must be between 0 and %d", math.MaxInt32))
	}
	headers, err := parseHeaders(c.headers)
	if err != nil {
		return usageFail(stderr, "produce", err)
	}
	cfg, err := c.pf.build(produceDefaults)
	if err != nil {
		return usageFail(stderr, "produce", readerPropertyHint(err))
	}
	if len(cfg.BootstrapServers) == 0 {
		return usageFail(stderr, "produce", usagef("--bootstrap-server is required (or bootstrap.servers in --producer.config, --producer-property or -X)"))
	}
	if err := validate(&cfg); err != nil {
		return usageFail(stderr, "produce", err)
	}
	if cfg.TransactionalID != "" {
		// Every record would fail with "call InitTransactions", which a
		// command line cannot do.
		return usageFail(stderr, "produce", usagef("transactional.id %q: kprod produce does not send in transactions; remove it (kprod perf --transactional-id does)", cfg.TransactionalID))
	}
	if len(cfg.IgnoredProperties) > 0 {
		fmt.Fprintf(stderr, "kprod produce: ignored Java-only properties: %s\n", strings.Join(cfg.IgnoredProperties, ", "))
	}
	p, err := kprod.NewProducer(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "kprod produce: %v\n", err)
		return exitUsage
	}

	rr := startRecordReader(stdin, []byte(delim), cfg.MaxRequestSize)

	r := &produceRun{maxBlock: cfg.MaxBlock}
	r.lastAck.mark() // the stall clock starts with the run
	send := func(sctx context.Context, l inLine) {
		what := fmt.Sprintf("record %d", l.n)
		if delim == "\n" {
			what = fmt.Sprintf("line %d", l.n)
		}
		if l.tooLong > 0 {
			r.fails.add(what, fmt.Errorf("%w: %d bytes, more than max.request.size (%d); raise max.request.size (-X max.request.size=..., and the topic's max.message.bytes) or send it smaller", kerr.ErrRecordTooLarge, l.tooLong, cfg.MaxRequestSize))
			return
		}
		data := l.data
		if delim == "\n" {
			data = bytes.TrimSuffix(data, []byte{'\r'})
		}
		rec := &kprod.Record{Topic: c.topic, Value: data, Headers: headers}
		if keyDelim != "" {
			k, v, ok := bytes.Cut(data, []byte(keyDelim))
			if !ok {
				r.fails.add(what, fmt.Errorf("%w: no key delimiter %q found: %q", kerr.ErrInvalidRecord, keyDelim, truncate(data, 80)))
				return
			}
			rec.Key, rec.Value = k, v
		}
		if c.partitionDef.wasSet {
			rec.ToPartition(int32(c.partition))
		}
		p.Send(sctx, rec, func(_ *kprod.Record, err error) {
			if err != nil {
				if stopsTheRun(err, &r.lastAck, r.maxBlock) {
					r.fatal.CompareAndSwap(nil, &err)
				}
				r.fails.add(what, err)
				return
			}
			r.lastAck.mark()
			r.acked.Add(1)
		})
	}

	// Sends after SIGINT still get interruptGrace: a line that was read
	// is delivered even if Send has to wait for buffer memory. The close
	// gets what is left of the same grace, not one of its own.
	gctx, cancelGrace := withGrace(ctx, interruptGrace)
	defer cancelGrace()
	var readErr error
	interrupted := false
loop:
	for {
		select {
		case <-ctx.Done():
			interrupted = true
			break loop
		case l, ok := <-rr.lines:
			if !ok {
				break loop
			}
			if l.err != nil {
				readErr = l.err
				break loop
			}
			send(gctx, l)
			if r.fatal.Load() != nil {
				break loop
			}
		}
	}

	// The records already taken from stdin: those in the channel and the
	// complete lines still in the reader's buffer. After an interrupt they
	// are delivered. Once an error stopped the run they would fail as the
	// one before did, each after max.block.ms: they are counted as not
	// sent, so that the totals add up to what was read.
	var notSent int64
	if interrupted || r.fatal.Load() != nil {
		rr.drainRead(func(l inLine) {
			if r.fatal.Load() != nil {
				notSent++
				return
			}
			send(gctx, l)
		})
	} else {
		rr.abandon()
	}

	closeErr := closeProducer(gctx, p, cfg.DeliveryTimeout)
	if closeErr != nil {
		fmt.Fprintf(stderr, "kprod produce: %v\n", closeErr)
	}
	failed := r.fails.count()
	counts := fmt.Sprintf("%d records sent, %d failed", r.acked.Load(), failed)
	if notSent > 0 {
		counts += fmt.Sprintf(", %d not sent", notSent)
	}
	note := ""
	if interrupted {
		note = " (interrupted: stopped reading stdin)"
	}
	fmt.Fprintf(stderr, "%s%s\n", counts, note)
	if r.fatal.Load() != nil {
		more := ""
		if notSent > 0 {
			more = fmt.Sprintf("; %d records already read were not sent", notSent)
		}
		fmt.Fprintf(stderr, "kprod produce: stopped reading stdin: every further record would wait max.block.ms and fail the same way (the error is below)%s\n", more)
	}
	if readErr != nil {
		fmt.Fprintf(stderr, "kprod produce: reading stdin: %v\n", readErr)
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "errors by type: %s\n", r.fails.summary())
		r.fails.printFirst(stderr, "")
	}
	switch {
	case failed > 0 || readErr != nil || r.fatal.Load() != nil:
		return exitFail
	case interrupted:
		// As perf: the input was not read to its end.
		return exitInterrupted
	}
	return exitOK
}

// produceDefaults are the settings kafka-console-producer gives its
// producer unless told otherwise: its client.id, which broker-side quotas,
// request logs and metrics know it by (perf has ProducerPerformance's).
var produceDefaults = map[string]string{"client.id": "console-producer"}

// readerPropertyHint points a console-producer reader property given as
// a producer property (--producer-property parse.key=true, as
// kafka-console-producer's --property takes it) to the flag that does
// its job here.
func readerPropertyHint(err error) error {
	var ce *kprod.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	if hint := readerProperties[ce.Property]; hint != "" {
		return &configError{fmt.Errorf("%w; %s is a console producer reader property, not a producer one: %s", err, ce.Property, hint)}
	}
	return err
}

// readerProperties are kafka-console-producer's reader properties (its
// --property / --reader-property, LineMessageReader's settings), with what
// kprod produce has in their place.
var readerProperties = map[string]string{
	"parse.key":             keyDelimiterHint,
	"key.separator":         keyDelimiterHint,
	"parse.headers":         headersHint,
	"headers.delimiter":     headersHint,
	"headers.separator":     headersHint,
	"headers.key.separator": headersHint,
	"null.marker": "kprod produce has no null marker: every record's value is the line as it is (an empty line is an empty value); " +
		"-H KEY without '=' gives a header a null value",
	"ignore.error": "remove it: kprod produce has no such setting; a line without the --key-delimiter fails alone " +
		"(it is not sent with a null key), is reported by its line number, the lines after it are sent, and the exit status is 1",
}

const (
	keyDelimiterHint = "give --key-delimiter SEP instead (it is parse.key=true key.separator=SEP)"
	headersHint      = "kprod produce does not read headers from the input; -H KEY=VALUE (repeatable) adds a header to every record"
)

func parseHeaders(hs []string) ([]kprod.Header, error) {
	var out []kprod.Header
	for _, h := range hs {
		k, v, hasValue := strings.Cut(h, "=")
		if k == "" {
			return nil, usagef("invalid header %q: want KEY=VALUE", h)
		}
		hd := kprod.Header{Key: k}
		if hasValue {
			hd.Value = []byte(v)
		}
		out = append(out, hd)
	}
	return out, nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

func orEmpty(err error) string {
	if err == nil {
		return "must not be empty"
	}
	return err.Error()
}
