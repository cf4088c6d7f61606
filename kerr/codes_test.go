package kerr

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestProducerCodes pins the codes the producer acts on; a wrong Retriable
// flag here would make kprod retry what Kafka says must not be retried, or
// give up on what may succeed.
func TestProducerCodes(t *testing.T) {
	tests := []struct {
		code      int16
		want      *BrokerError
		name      string
		retriable bool
	}{
		{-1, UnknownServerError, "UNKNOWN_SERVER_ERROR", false},
		{2, CorruptMessage, "CORRUPT_MESSAGE", true},
		{3, UnknownTopicOrPartition, "UNKNOWN_TOPIC_OR_PARTITION", true},
		{6, NotLeaderOrFollower, "NOT_LEADER_OR_FOLLOWER", true},
		{7, RequestTimedOut, "REQUEST_TIMED_OUT", true},
		{10, MessageTooLarge, "MESSAGE_TOO_LARGE", false},
		{19, NotEnoughReplicas, "NOT_ENOUGH_REPLICAS", true},
		{20, NotEnoughReplicasAfterAppend, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true},
		{29, TopicAuthorizationFailed, "TOPIC_AUTHORIZATION_FAILED", false},
		{45, OutOfOrderSequenceNumber, "OUT_OF_ORDER_SEQUENCE_NUMBER", false},
		{46, DuplicateSequenceNumber, "DUPLICATE_SEQUENCE_NUMBER", false},
		{47, InvalidProducerEpoch, "INVALID_PRODUCER_EPOCH", false},
		{51, ConcurrentTransactions, "CONCURRENT_TRANSACTIONS", true},
		{56, KafkaStorageError, "KAFKA_STORAGE_ERROR", true},
		{59, UnknownProducerID, "UNKNOWN_PRODUCER_ID", false},
		{87, InvalidRecord, "INVALID_RECORD", false},
		{90, ProducerFenced, "PRODUCER_FENCED", false},
		{120, TransactionAbortable, "TRANSACTION_ABORTABLE", false},
		{133, ShareSessionLimitReached, "SHARE_SESSION_LIMIT_REACHED", true},
		{136, ControllerIDNotRegistered, "CONTROLLER_ID_NOT_REGISTERED", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ForCode(tt.code)
			be, ok := err.(*BrokerError)
			if !ok {
				t.Fatalf("ForCode(%d) = %T %v, want *BrokerError", tt.code, err, err)
			}
			if be != tt.want {
				t.Errorf("ForCode(%d) = %s, want the package variable %s", tt.code, be.Name, tt.want.Name)
			}
			if be.Code != tt.code || be.Name != tt.name || be.Retriable != tt.retriable {
				t.Errorf("ForCode(%d) = {%d %s retriable=%v}, want {%d %s retriable=%v}",
					tt.code, be.Code, be.Name, be.Retriable, tt.code, tt.name, tt.retriable)
			}
			if got := IsRetriable(err); got != tt.retriable {
				t.Errorf("IsRetriable(%s) = %v, want %v", tt.name, got, tt.retriable)
			}
		})
	}
}

func TestForCodeNone(t *testing.T) {
	if err := ForCode(0); err != nil {
		t.Fatalf("ForCode(0) = %v, want nil", err)
	}
}

func TestForCodeUnknown(t *testing.T) {
	for _, code := range []int16{-2, 137, 999, 32767, -32768} {
		err := ForCode(code)
		var be *BrokerError
		if !errors.As(err, &be) {
			t.Fatalf("ForCode(%d) = %T, want *BrokerError", code, err)
		}
		wantName := fmt.Sprintf("UNKNOWN_CODE_%d", code)
		if be.Code != code || be.Name != wantName {
			t.Errorf("ForCode(%d) = {%d %s}, want {%d %s}", code, be.Code, be.Name, code, wantName)
		}
		if be.Retriable || IsRetriable(err) {
			t.Errorf("ForCode(%d) is retriable, want not retriable (unknown codes are not retried)", code)
		}
		if !strings.Contains(err.Error(), wantName) {
			t.Errorf("message %q does not name %s", err.Error(), wantName)
		}
		// Two calls build two values that still compare equal by code.
		if !errors.Is(ForCode(code), err) {
			t.Errorf("errors.Is(ForCode(%d), ForCode(%d)) = false", code, code)
		}
		if _, known := byCode[code]; known {
			t.Errorf("code %d must not be in the table", code)
		}
	}
}

// TestResponseErrorWrapping: callers hold a *ResponseError (with topic,
// partition and broker message) and test it against the package variables.
func TestResponseErrorWrapping(t *testing.T) {
	re := &ResponseError{
		Err:       NotLeaderOrFollower,
		Message:   "leader moved to 3",
		Broker:    1,
		Topic:     "orders",
		Partition: 7,
	}
	var err error = fmt.Errorf("produce: %w", re)

	if !errors.Is(err, NotLeaderOrFollower) {
		t.Error("errors.Is(wrapped NOT_LEADER_OR_FOLLOWER, NotLeaderOrFollower) = false")
	}
	if errors.Is(err, MessageTooLarge) {
		t.Error("errors.Is(wrapped NOT_LEADER_OR_FOLLOWER, MessageTooLarge) = true")
	}
	// A value built from the code (not the variable) matches too.
	if !errors.Is(err, &BrokerError{Code: 6}) {
		t.Error("errors.Is does not match a *BrokerError with the same code")
	}
	if !IsRetriable(err) {
		t.Error("IsRetriable(wrapped NOT_LEADER_OR_FOLLOWER) = false")
	}
	var got *ResponseError
	if !errors.As(err, &got) || got.Partition != 7 || got.Topic != "orders" {
		t.Errorf("errors.As(*ResponseError) = %v", got)
	}
	var be *BrokerError
	if !errors.As(err, &be) || be != NotLeaderOrFollower {
		t.Errorf("errors.As(*BrokerError) = %v, want NotLeaderOrFollower", be)
	}
	for _, want := range []string{"NOT_LEADER_OR_FOLLOWER", "(6)", "orders[7]", "broker 1", "leader moved to 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not contain %q", err.Error(), want)
		}
	}

	// A valid record of a batch refused for another record: send it again.
	if !IsRetriable(fmt.Errorf("%w: t[0]: its batch was refused (INVALID_RECORD)", ErrBatchRejected)) {
		t.Error("IsRetriable(ErrBatchRejected) = false")
	}

	// A record the producer gave up on: sending it again may succeed, as
	// Java's TimeoutException is a RetriableException, with or without
	// the last error it wraps.
	if !IsRetriable(fmt.Errorf("%w: 3 records for t[0] waited 2m0s", ErrDeliveryTimeout)) {
		t.Error("IsRetriable(ErrDeliveryTimeout) = false")
	}
	if !IsRetriable(fmt.Errorf("%w; last error: %w", ErrDeliveryTimeout, fmt.Errorf("%w: dial", ErrConnectionLost))) {
		t.Error("IsRetriable(ErrDeliveryTimeout wrapping ErrConnectionLost) = false")
	}
	// A last error the idempotent sender retries although its code is not
	// retriable (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER).
	if !IsRetriable(fmt.Errorf("%w; last error: %w", ErrDeliveryTimeout, &ResponseError{Err: OutOfOrderSequenceNumber, Broker: 1})) {
		t.Error("IsRetriable(ErrDeliveryTimeout wrapping OUT_OF_ORDER_SEQUENCE_NUMBER) = false")
	}

	fenced := fmt.Errorf("send: %w", &ResponseError{Err: ProducerFenced, Broker: -1})
	if IsRetriable(fenced) {
		t.Error("IsRetriable(PRODUCER_FENCED) = true")
	}
	if !errors.Is(fenced, ProducerFenced) {
		t.Error("errors.Is(wrapped PRODUCER_FENCED, ProducerFenced) = false")
	}
	if strings.Contains(fenced.Error(), "broker -1") {
		t.Errorf("message %q shows an unknown broker id", fenced.Error())
	}
}

// MESSAGE_TOO_LARGE is the broker's RecordTooLargeException: it matches
// ErrRecordTooLarge, which no other code does.
func TestMessageTooLargeIsRecordTooLarge(t *testing.T) {
	err := fmt.Errorf("send: %w", &ResponseError{Err: MessageTooLarge, Broker: 2, Topic: "t", Partition: 0})
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Error("errors.Is(wrapped MESSAGE_TOO_LARGE, ErrRecordTooLarge) = false")
	}
	if !errors.Is(err, MessageTooLarge) {
		t.Error("errors.Is(wrapped MESSAGE_TOO_LARGE, MessageTooLarge) = false")
	}
	for _, be := range []*BrokerError{RecordListTooLarge, NotLeaderOrFollower, ForCode(999).(*BrokerError)} {
		if errors.Is(&ResponseError{Err: be}, ErrRecordTooLarge) {
			t.Errorf("errors.Is(%s, ErrRecordTooLarge) = true", be.Name)
		}
	}
}

// TestCodesTable checks the table as a whole: every code from -1 to the
// highest known one is present once (0 excepted), names are unique and in
// Kafka's form, and every entry says what it means.
func TestCodesTable(t *testing.T) {
	const highest = 136
	codes := make(map[int16]string)
	names := make(map[string]int16)
	for _, e := range allCodes {
		if prev, dup := codes[e.Code]; dup {
			t.Errorf("code %d used by %s and %s", e.Code, prev, e.Name)
		}
		codes[e.Code] = e.Name
		if prev, dup := names[e.Name]; dup {
			t.Errorf("name %s used by codes %d and %d", e.Name, prev, e.Code)
		}
		names[e.Name] = e.Code
		if e.Name == "" || strings.ToUpper(e.Name) != e.Name || strings.ContainsAny(e.Name, " -") {
			t.Errorf("code %d: name %q is not in Kafka's UPPER_SNAKE form", e.Code, e.Name)
		}
		if len(e.Description) < 10 {
			t.Errorf("%s: description %q says too little", e.Name, e.Description)
		}
		if ForCode(e.Code) != e {
			t.Errorf("ForCode(%d) does not return the variable %s", e.Code, e.Name)
		}
	}
	if _, ok := codes[0]; ok {
		t.Error("code 0 (NONE) must not be an error")
	}
	for c := int16(-1); c <= highest; c++ {
		if _, ok := codes[c]; !ok && c != 0 {
			t.Errorf("code %d missing", c)
		}
	}
	if want := highest + 1; len(allCodes) != want { // -1 and 1..highest
		t.Errorf("%d codes, want %d", len(allCodes), want)
	}

	retriable := 0
	for _, e := range allCodes {
		if e.Retriable {
			retriable++
		}
	}
	// Counted from Kafka's exception classes extending RetriableException;
	// a change here needs a look at Errors.java.
	if retriable != 32 {
		t.Errorf("%d retriable codes, want 32", retriable)
	}
}
