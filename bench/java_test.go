package main

import "testing"

// ProducerPerformance counts only the records acknowledged without an
// error, prints the others' exceptions and exits 0: its shortfall is the
// run's failed records, so that the run does not count.
func TestParseJavaCountsFailedRecords(t *testing.T) {
	o := &options{records: 1_000_000, javaWarmup: 300_000}
	steady := "1299000 records sent, 240000.000000 records/sec (22.89 MB/sec), 4.10 ms avg latency, 80.00 ms max latency, 3 ms 50th, 10 ms 95th, 15 ms 99th, 30 ms 99.9th.\n" +
		"999000 steady state records sent, 250000.000000 records/sec (23.84 MB/sec), 4.20 ms avg latency, 80.00 ms max latency, 3 ms 50th, 10 ms 95th, 15 ms 99th, 30 ms 99.9th.\n"
	wr, err := parseJava([]byte(steady), o)
	if err != nil {
		t.Fatal(err)
	}
	if wr.Records != 999_000 || wr.Failed != 1_000 {
		t.Errorf("steady state of 999,000 of 1,000,000: Records %d, Failed %d; want 999000, 1000", wr.Records, wr.Failed)
	}
	res := runResult{workerResult: *wr, OnBroker: 1_299_000}
	if deliveryErr(&res, "java", o.records+o.javaWarmup) == "" {
		t.Error("a Java run that lost 1,000 records counts")
	}

	all := "1300000 records sent, 240000.000000 records/sec (22.89 MB/sec), 4.10 ms avg latency, 80.00 ms max latency, 3 ms 50th, 10 ms 95th, 15 ms 99th, 30 ms 99.9th.\n" +
		"1000000 steady state records sent, 250000.000000 records/sec (23.84 MB/sec), 4.20 ms avg latency, 80.00 ms max latency, 3 ms 50th, 10 ms 95th, 15 ms 99th, 30 ms 99.9th.\n"
	if wr, err := parseJava([]byte(all), o); err != nil || wr.Failed != 0 {
		t.Errorf("every record acknowledged: %+v, %v; want no failures", wr, err)
	}
}

// A run whose records are not all on the broker does not count, although
// the client acknowledged them all; the harness row sends none.
func TestDeliveryErrShortfallOnBroker(t *testing.T) {
	res := runResult{OnBroker: 900_000}
	if deliveryErr(&res, "kprod", 1_010_000) == "" {
		t.Error("900,000 of 1,010,000 records on the broker: the run counts")
	}
	res.OnBroker = 1_010_000
	if e := deliveryErr(&res, "kprod", 1_010_000); e != "" {
		t.Errorf("every record on the broker: %q", e)
	}
	res.OnBroker = -1 // unknown
	if e := deliveryErr(&res, "kprod", 1_010_000); e != "" {
		t.Errorf("count unknown: %q", e)
	}
	res.OnBroker = 0
	if e := deliveryErr(&res, "harness", 1_010_000); e != "" {
		t.Errorf("harness row: %q", e)
	}
}
