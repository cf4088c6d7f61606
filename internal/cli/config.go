package cli

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/kprod/kprod"
)

// producerFlags are the ways both commands take producer settings, in
// increasing precedence: the properties file, then --producer-props
// (perf) or --producer-property (produce), then -X, then
// --bootstrap-server. Later ones win, as in Kafka's tools where
// --producer-props "take precedence over those passed via
// --producer.config".
type producerFlags struct {
	configFile string
	props      []string // k=v from --producer-props / --producer-property
	propsFlag  string   // which of the two
	x          []string // k=v from -X
	brokers    string
	brokersDef *flagDef // nil when not registered (tests)

	// embedded: the command runs an embedded cluster when no
	// bootstrap.servers is given at all (perf), which an explicitly empty
	// value's error mentions.
	embedded bool
}

func (pf *producerFlags) register(fs *flagSet, propsFlag string, multi bool) {
	pf.propsFlag = propsFlag
	pf.brokersDef = fs.stringVar(&pf.brokers, []string{"--bootstrap-server", "--brokers", "-b"}, "HOST:PORT[,HOST:PORT...]",
		"the brokers to connect to (bootstrap.servers); overrides bootstrap.servers from the other flags")
	// Kafka 4.2's tools (KIP-1147) call both flags --command-property and
	// --command-config; the older names stay.
	if multi {
		fs.listVar(&pf.props, []string{propsFlag, "--command-property"}, "PROP-NAME=PROP-VALUE",
			"producer properties by their Java names (acks=1 linger.ms=10 ...); several may follow the flag. They take precedence over --producer.config", true)
	} else {
		fs.listVar(&pf.props, []string{propsFlag, "--command-property"}, "PROP-NAME=PROP-VALUE",
			"a producer property by its Java name (acks=1, linger.ms=10, ...); repeatable. Takes precedence over --producer.config", false)
	}
	fs.stringVar(&pf.configFile, []string{"--producer.config", "--command-config"}, "CONFIG-FILE",
		"a Java producer.properties file; Java-only properties (serializers, interceptors, ...) are accepted and ignored")
	fs.listVar(&pf.x, []string{"-X"}, "PROP-NAME=PROP-VALUE",
		"a producer property by its Java name, like "+propsFlag+"; repeatable, wins over both", false)
}

// configError is a bad producer setting: exit status 2 with the library's
// message, which names the property.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// errEmptyBootstrap is wrapped by the usage error for a bootstrap.servers
// that was given but is empty ("--bootstrap-server $BROKERS" with BROKERS
// unset): perf would otherwise quietly run its embedded cluster, and
// produce would say the flag is missing.
var errEmptyBootstrap = errors.New("bootstrap.servers is empty")

// build returns the producer Config. defaults are properties applied
// before everything else (perf's client.id). The bootstrap list comes out
// empty only when no flag gave one (the caller decides whether that is an
// error); an explicitly empty one is a usage error wrapping
// errEmptyBootstrap.
func (pf *producerFlags) build(defaults map[string]string) (kprod.Config, error) {
	cfg := kprod.DefaultConfig()
	emptyFrom := "" // who set bootstrap.servers to nothing, if that setting stands
	set := func(source, name, value string) error {
		if err := cfg.Set(name, value); err != nil {
			if source == "" {
				return &configError{err}
			}
			return &configError{fmt.Errorf("%s: %w", source, err)}
		}
		return nil
	}
	noteBootstrap := func(name, from string) {
		if strings.TrimSpace(name) == "bootstrap.servers" {
			emptyFrom = ""
			if len(cfg.BootstrapServers) == 0 {
				emptyFrom = from
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(defaults)) {
		if err := set("", k, defaults[k]); err != nil {
			return cfg, err
		}
	}
	if pf.configFile != "" {
		props, err := kprod.LoadProperties(pf.configFile)
		if err != nil {
			return cfg, &configError{err}
		}
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if err := set(pf.configFile, k, props[k]); err != nil {
				return cfg, err
			}
			noteBootstrap(k, "bootstrap.servers in "+pf.configFile)
		}
	}
	for _, group := range []struct {
		flag string
		kvs  []string
	}{{pf.propsFlag, pf.props}, {"-X", pf.x}} {
		for _, kv := range group.kvs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return cfg, badProperty(group.flag, kv)
			}
			if err := set("", k, v); err != nil {
				return cfg, err
			}
			noteBootstrap(k, strings.TrimSpace(group.flag+" bootstrap.servers"))
		}
	}
	if pf.brokers != "" || pf.brokersDef != nil && pf.brokersDef.wasSet {
		if err := set("", "bootstrap.servers", pf.brokers); err != nil {
			return cfg, err
		}
		flag := "--bootstrap-server"
		if pf.brokersDef != nil && pf.brokersDef.usedAs != "" {
			flag = pf.brokersDef.usedAs
		}
		noteBootstrap("bootstrap.servers", flag)
	}
	if emptyFrom != "" {
		hint := ""
		if pf.embedded {
			hint = ", or leave it out to run against an embedded in-process cluster"
		}
		return cfg, &usageError{err: errEmptyBootstrap,
			msg: fmt.Sprintf("%s is empty: give the brokers as HOST:PORT[,HOST:PORT...]%s", emptyFrom, hint)}
	}
	return cfg, nil
}

// badProperty is the usage error for a property argument without
// "name=": it never repeats the argument, which may hold a password
// ("-X ssl.key.password:hunter2", "-X =hunter2", or a bare "-X hunter2").
// It names the property only when the text before the first ':' or
// whitespace is one kprod knows.
func badProperty(flag, kv string) error {
	if flag == "" {
		flag = "a producer property"
	}
	if strings.HasPrefix(strings.TrimSpace(kv), "=") {
		return usagef("invalid property: %s needs PROP-NAME=PROP-VALUE: the name before '=' is empty (the argument is not shown in case it holds a secret)", flag)
	}
	name, _, sep := strings.Cut(kv, ":")
	if i := strings.IndexFunc(name, unicode.IsSpace); i >= 0 {
		name, sep = name[:i], true
	}
	if knownProperty(name) {
		if sep {
			return usagef("invalid property %q: %s needs PROP-NAME=PROP-VALUE: write %s=VALUE, with '=' after the name (the value is not shown in case it is a secret)", name, flag, name)
		}
		return usagef("invalid property %q: %s needs PROP-NAME=PROP-VALUE: %s has no '=VALUE'", name, flag, name)
	}
	return usagef("invalid property: %s needs PROP-NAME=PROP-VALUE: the argument has no '=' (it is not shown in case it holds a secret)", flag)
}

// knownProperty reports whether name is a property kprod knows (or
// accepts and ignores, as Java-only): only such a name is safe to show,
// any other text may be a password.
func knownProperty(name string) bool {
	if name == "" || name != strings.TrimSpace(name) {
		return false
	}
	var probe kprod.Config
	err := probe.Set(name, "")
	var ce *kprod.ConfigError
	return err == nil || errors.As(err, &ce) && !strings.HasPrefix(ce.Reason, "unknown producer property")
}

// validate checks the Config as NewProducer will, so that a bad setting
// is a usage error (exit 2) and not a failure of the run.
func validate(cfg *kprod.Config) error {
	if err := cfg.Validate(); err != nil {
		return &configError{err}
	}
	return nil
}
