package main

import (
	"runtime/debug"
	"slices"
	"strings"
)

// allClients is every client the coordinator knows, in table order.
// java is not a Go client: the coordinator runs ProducerPerformance itself.
// harness is not a client either (client_harness.go): the worker's own
// cost per record, run only when -clients names it.
var allClients = []string{"kprod", "franz-go", "sarama", "kafka-go", "confluent", "java", "harness"}

// goClients maps a Go client's name to its constructor; a nil constructor
// means the client is not in this build (see unavailable).
var goClients = map[string]newProducerFunc{
	"kprod":    newKprod,
	"franz-go": newKgo,
	"sarama":   newSarama,
	"kafka-go": newKafkaGo,
	"harness":  newHarness,
}

// unavailable says why a client is missing from this build.
var unavailable = map[string]string{}

// modulePath is the Go module each client comes from, for its version.
var modulePath = map[string]string{
	"kprod":     "github.com/kprod/kprod",
	"franz-go":  "github.com/twmb/franz-go",
	"sarama":    "github.com/IBM/sarama",
	"kafka-go":  "github.com/segmentio/kafka-go",
	"confluent": "github.com/confluentinc/confluent-kafka-go/v2",
}

// baseline is the client the ratios are taken against.
const baseline = "franz-go"

func goClientNames() []string {
	var out []string
	for n := range goClients {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// moduleVersion is the version of the module a client comes from, as
// built into this binary ("(devel)" or a replace target for kprod).
func moduleVersion(client string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	path := modulePath[client]
	for _, d := range bi.Deps {
		if d.Path != path {
			continue
		}
		if d.Replace != nil {
			if d.Replace.Version != "" {
				return d.Replace.Path + " " + d.Replace.Version
			}
			return "working tree (replace " + d.Replace.Path + ")"
		}
		return d.Version
	}
	return ""
}

func yes(b bool) *bool { return &b }

func isLZ4(c string) bool { return strings.EqualFold(c, "lz4") }
