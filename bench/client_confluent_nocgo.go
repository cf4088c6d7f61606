//go:build !cgo

package main

func init() {
	goClients["confluent"] = nil
	unavailable["confluent"] = "built without cgo (CGO_ENABLED=0): confluent-kafka-go needs cgo to link librdkafka"
}
