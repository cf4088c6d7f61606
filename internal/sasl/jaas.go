package sasl

import (
	"fmt"
	"strings"
	"unicode"
)

// Kafka's client login modules, the classes sasl.jaas.config names.
const (
	PlainLoginModule       = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule       = "org.apache.kafka.common.security.scram.ScramLoginModule"
	OAuthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
	krb5LoginModule        = "com.sun.security.auth.module.Krb5LoginModule"
)

// JAAS is one login module entry of a sasl.jaas.config value.
type JAAS struct {
	Module  string            // the login module class
	Flag    string            // required, requisite, sufficient or optional
	Options map[string]string // name=value pairs, e.g. username, password
}

// ParseJAAS parses a sasl.jaas.config value the way Kafka's JaasConfig
// does: a login module class, a control flag, options name=value (values
// quoted with "..." where they hold spaces or special characters, with
// backslash escapes), and a terminating ';'. Kafka allows exactly one
// login module here. /* */ and // comments are skipped.
//
// Errors never quote text from s except a known login module class (see
// ModuleName) and known option names (username, password, OAuth's
// unsecuredLogin*): s holds a password, and any other word may be one or a
// piece of one. A bare password given as sasl.jaas.config parses as the
// module class; an unquoted value with a space splits into words that
// parse as option names.
func ParseJAAS(s string) (*JAAS, error) {
	p := &jaasParser{in: []rune(s)}
	p.space()
	if p.eof() {
		return nil, fmt.Errorf("empty: expected a login module class, e.g. %s required username=\"...\" password=\"...\";", PlainLoginModule)
	}
	module, err := p.name()
	if err != nil {
		return nil, fmt.Errorf("login module class: %w", err)
	}
	j := &JAAS{Module: module, Options: map[string]string{}}
	if j.Module == "" {
		return nil, fmt.Errorf("expected a login module class at character %d", p.i+1)
	}
	mod := ModuleName(j.Module)
	p.space()
	flag, err := p.name()
	if err != nil {
		return nil, fmt.Errorf("control flag of %s: %w", mod, err)
	}
	j.Flag = strings.ToLower(flag)
	switch j.Flag {
	case "required", "requisite", "sufficient", "optional":
	case "":
		if !knownModule(j.Module) {
			return nil, fmt.Errorf("no control flag after %s: expected a login module class, a flag and options, e.g. %s required username=\"...\" password=\"...\"; not a bare password", mod, PlainLoginModule)
		}
		return nil, fmt.Errorf("no control flag after %s: expected required, requisite, sufficient or optional", mod)
	default:
		return nil, fmt.Errorf("control flag of %s is not required, requisite, sufficient or optional", mod)
	}
	for n := 1; ; n++ {
		p.space()
		if p.eof() {
			return nil, fmt.Errorf("missing ';' at the end of the entry of %s", mod)
		}
		if p.peek() == ';' {
			p.i++
			break
		}
		name, err := p.name()
		if err != nil {
			return nil, fmt.Errorf("option %d of %s: name: %w", n, mod, err)
		}
		if name == "" {
			return nil, fmt.Errorf("option %d of %s has no name (a stray '=' or an empty quoted name?)", n, mod)
		}
		p.space()
		if p.eof() || p.peek() != '=' {
			// Not even a known name is shown: "password=hunter username;"
			// would show a piece of the password.
			return nil, fmt.Errorf("option %d of %s has no '=value'; a value that holds spaces or special characters must be quoted (password=\"...\")", n, mod)
		}
		p.i++
		p.space()
		var value string
		if !p.eof() && (p.peek() == '"' || p.peek() == '\'') {
			value, err = p.quoted()
			if err != nil {
				return nil, fmt.Errorf("%s of %s: %w", optionName(n, name), mod, err)
			}
		} else {
			value = p.word()
			if value == "" {
				return nil, fmt.Errorf("%s of %s has an empty value; quote it (\"\") if it is meant to be empty", optionName(n, name), mod)
			}
		}
		j.Options[name] = value
	}
	p.space()
	if !p.eof() {
		return nil, fmt.Errorf("more than one login module: Kafka's sasl.jaas.config takes exactly one, ended by ';'")
	}
	return j, nil
}

// ModuleName is module for error messages: the class name if it is one
// of the login modules Kafka's clients know, else "an unknown login
// module class" without the text, which may be a password given where
// the class belongs (sasl.jaas.config=hunter2).
func ModuleName(module string) string {
	if knownModule(module) {
		return module
	}
	return "an unknown login module class (not shown: it may be a secret; check its spelling)"
}

func knownModule(module string) bool {
	switch module {
	case PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule, krb5LoginModule:
		return true
	}
	return false
}

// optionName is the n-th option for error messages, with its name if it
// is one kprod reads: any other name may be a piece of an unquoted value
// ("password=a b=" makes an option b).
func optionName(n int, name string) string {
	if name == "username" || name == "password" || strings.HasPrefix(name, "unsecuredLogin") {
		return fmt.Sprintf("option %d (%s)", n, name)
	}
	return fmt.Sprintf("option %d", n)
}

type jaasParser struct {
	in []rune
	i  int
}

func (p *jaasParser) eof() bool  { return p.i >= len(p.in) }
func (p *jaasParser) peek() rune { return p.in[p.i] }

// space skips whitespace and comments.
func (p *jaasParser) space() {
	for !p.eof() {
		switch {
		case unicode.IsSpace(p.peek()):
			p.i++
		case p.peek() == '/' && p.i+1 < len(p.in) && p.in[p.i+1] == '/':
			for !p.eof() && p.peek() != '\n' {
				p.i++
			}
		case p.peek() == '/' && p.i+1 < len(p.in) && p.in[p.i+1] == '*':
			p.i += 2
			for !p.eof() && !(p.peek() == '*' && p.i+1 < len(p.in) && p.in[p.i+1] == '/') {
				p.i++
			}
			p.i = min(p.i+2, len(p.in))
		default:
			return
		}
	}
}

// name reads a login module class, a control flag or an option name:
// quoted or not, as Java's StreamTokenizer reads any of them.
func (p *jaasParser) name() (string, error) {
	if !p.eof() && (p.peek() == '"' || p.peek() == '\'') {
		return p.quoted()
	}
	return p.word(), nil
}

// word reads an unquoted token: up to whitespace, '=', ';' or a quote.
func (p *jaasParser) word() string {
	start := p.i
	for !p.eof() {
		r := p.peek()
		if unicode.IsSpace(r) || r == '=' || r == ';' || r == '"' || r == '\'' {
			break
		}
		p.i++
	}
	return string(p.in[start:p.i])
}

// quoted reads a "..." or '...' value with Java StreamTokenizer's
// escapes (JaasConfig parses sasl.jaas.config with one): \a \b \f \n \r
// \t \v, octal \0 to \377, and a backslash before any other character
// stands for that character.
func (p *jaasParser) quoted() (string, error) {
	q := p.peek()
	p.i++ // the opening quote
	var b strings.Builder
	for !p.eof() {
		r := p.peek()
		p.i++
		switch r {
		case q:
			return b.String(), nil
		case '\\':
			if p.eof() {
				return "", fmt.Errorf("unterminated quoted value")
			}
			e := p.peek()
			p.i++
			if e >= '0' && e <= '7' {
				// Up to three octal digits, the first of three at most 3.
				v, digits := e-'0', 1
				for digits < 3 && !p.eof() && p.peek() >= '0' && p.peek() <= '7' && (digits < 2 || e <= '3') {
					v = v<<3 + (p.peek() - '0')
					p.i++
					digits++
				}
				b.WriteRune(v)
				continue
			}
			switch e {
			case 'a':
				b.WriteByte(0x07)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte(0x0b)
			default:
				b.WriteRune(e)
			}
		default:
			b.WriteRune(r)
		}
	}
	return "", fmt.Errorf("unterminated quoted value (no closing %c)", q)
}

// IsKerberos reports whether module is Java's Kerberos login module,
// which kprod does not implement (GSSAPI).
func IsKerberos(module string) bool { return module == krb5LoginModule }
