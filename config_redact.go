package kprod

import (
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
)

// hidden is what a printed Config shows for a secret that is set, as the
// Java client prints its Password-typed settings.
const hidden = "[hidden]"

// Format prints the Config with fmt, for every verb, with the values of
// the secret fields (SASLPassword, SASLJAASConfig, SSLKeyPassword,
// SSLKeystoreKey) replaced by "[hidden]" when they are set. Func,
// interface and pointer fields (Dial, Logger, TLSConfig,
// SASLOAuthTokenSource, Partitioner, Interceptors) show only their type,
// or <nil>: they can hold keys or credentials too (TLSConfig's
// certificates, a token source with an OAuth client secret).
//
// As for any struct, %v prints the field values, %+v and %s also their
// names, and %#v the Go syntax, which is not valid Go for the fields shown
// by type. Printing a *Config prints the Config.
func (c Config) Format(f fmt.State, verb rune) {
	sharp := verb == 'v' && f.Flag('#')
	named := sharp || verb == 's' || (verb == 'v' && f.Flag('+'))
	// Each field is printed with the verb and flags Format was given,
	// except that %s, meant for strings, prints them as %+v does.
	each := fmt.FormatString(f, verb)
	if verb == 's' {
		each = "%+v"
	}
	sep := " "
	if sharp {
		io.WriteString(f, "kprod.Config")
		sep = ", "
	}
	io.WriteString(f, "{")
	for i, fld := range c.shownFields() {
		if i > 0 {
			io.WriteString(f, sep)
		}
		if named {
			io.WriteString(f, fld.name+":")
		}
		fmt.Fprintf(f, each, fld.value)
	}
	io.WriteString(f, "}")
}

// String returns the Config as %+v prints it: every field by name, with
// secrets hidden (see Format).
func (c Config) String() string { return fmt.Sprintf("%+v", c) }

// LogValue makes a Config, or a *Config, a group of its fields by name
// when given to log/slog, with secrets hidden and func, interface and
// pointer fields shown by type as in Format. Durations and Acks appear as
// text ("5ms", "all").
func (c Config) LogValue() slog.Value {
	fields := c.shownFields()
	attrs := make([]slog.Attr, len(fields))
	for i, fld := range fields {
		attrs[i] = slog.Attr{Key: fld.name, Value: logValue(fld.value)}
	}
	return slog.GroupValue(attrs...)
}

func logValue(v any) slog.Value {
	switch v := v.(type) {
	case byType:
		return slog.StringValue(string(v))
	case byTypes:
		s := make([]string, len(v))
		for i, t := range v {
			s[i] = string(t)
		}
		return slog.AnyValue(s)
	case fmt.Stringer: // Acks, time.Duration
		return slog.StringValue(v.String())
	}
	return slog.AnyValue(v)
}

// byType stands, in a printed Config, for a func, interface or pointer
// field: its dynamic type, or <nil>. fmt would otherwise print a struct
// held in an interface field in full, secrets and all.
type byType string

func (t byType) Format(f fmt.State, _ rune) { io.WriteString(f, string(t)) }

// byTypes stands for a slice of them (Interceptors): [T1 T2].
type byTypes []byType

func (ts byTypes) Format(f fmt.State, _ rune) {
	io.WriteString(f, "[")
	for i, t := range ts {
		if i > 0 {
			io.WriteString(f, " ")
		}
		io.WriteString(f, string(t))
	}
	io.WriteString(f, "]")
}

func typeOf(v reflect.Value) byType {
	switch v.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Interface, reflect.Map, reflect.Chan, reflect.Slice, reflect.UnsafePointer:
		if v.IsNil() {
			return "<nil>"
		}
	}
	return byType(fmt.Sprintf("%T", v.Interface()))
}

// A shownField is a field of a Config as printing shows it.
type shownField struct {
	name  string
	value any
}

// shownFields returns the exported fields of c in declaration order, as
// printing shows them: reflection, so that fields added to Config are
// printed without anyone having to remember this file.
func (c *Config) shownFields() []shownField {
	v := reflect.ValueOf(c).Elem()
	secret := secretFields()
	out := make([]shownField, 0, v.NumField())
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		f := v.Field(i)
		var val any
		switch k := f.Kind(); {
		case secret[sf.Name]:
			val = ""
			if !f.IsZero() {
				val = hidden
			}
		case k == reflect.Pointer && !f.IsNil() && basic(f.Type().Elem().Kind()):
			val = f.Elem().Interface() // EnableIdempotence
		case !basic(k) && k != reflect.Slice && k != reflect.Array && k != reflect.Struct:
			val = typeOf(f)
		case k == reflect.Slice && !basic(f.Type().Elem().Kind()):
			types := make(byTypes, f.Len()) // Interceptors
			for j := range types {
				types[j] = typeOf(f.Index(j))
			}
			val = types
		default:
			val = f.Interface()
		}
		out = append(out, shownField{sf.Name, val})
	}
	return out
}

// basic reports whether values of kind k are printed as they are: they
// cannot refer to anything else.
func basic(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	}
	return false
}

// secretFields names the Config fields whose values printing hides: the
// fields that the secret properties (isSecret, the same list that keeps
// secrets out of errors) set, found by setting each property to a marker
// and looking for it, plus SASLPassword, which no property sets. A secret
// property added later is then hidden here too.
var secretFields = sync.OnceValue(func() map[string]bool {
	secret := map[string]bool{"SASLPassword": true}
	const marker = "kprod-secret-marker"
	for prop, set := range properties {
		if !isSecret(prop) {
			continue
		}
		var c Config
		if set(&c, prop, marker) != nil {
			continue // TestRedactSecretFields fails on such a property
		}
		v := reflect.ValueOf(c)
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.String && f.String() == marker {
				secret[v.Type().Field(i).Name] = true
			}
		}
	}
	return secret
})
