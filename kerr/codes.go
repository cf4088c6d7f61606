package kerr

import (
	"fmt"
	"strconv"
)

// Every error code a Kafka 4.x broker can return (Errors.java: -1 and 1
// through 136, the highest as of Kafka 4.4; 0 means no error and has no
// variable).
//
// Retriable is true exactly where the Java client's exception for the code
// extends RetriableException: the same request may succeed if sent again,
// possibly after a metadata refresh. Whether kprod actually resends is the
// producer's decision (delivery.timeout.ms, retries, idempotence); a
// non-retriable code is never retried.
//
// Names are Kafka's, so they can be searched for in broker logs and Kafka's
// documentation. Codes that only admin, consumer-group, share-group, Streams
// or controller requests return are listed for completeness: a producer
// seeing one means the broker answered something unexpected.
var (
	UnknownServerError = &BrokerError{Code: -1, Name: "UNKNOWN_SERVER_ERROR", Retriable: false,
		Description: "the broker hit an unexpected error handling the request; its log says why"}
	OffsetOutOfRange = &BrokerError{Code: 1, Name: "OFFSET_OUT_OF_RANGE", Retriable: false,
		Description: "the requested offset is outside the range the broker holds for the partition"}
	CorruptMessage = &BrokerError{Code: 2, Name: "CORRUPT_MESSAGE", Retriable: true,
		Description: "the broker rejected a record batch: bad CRC, invalid size, a null key on a compacted topic, or otherwise malformed"}
	UnknownTopicOrPartition = &BrokerError{Code: 3, Name: "UNKNOWN_TOPIC_OR_PARTITION", Retriable: true,
		Description: "the broker does not host this topic-partition; the client's metadata is stale or the topic does not exist (yet); metadata is refreshed before a retry"}
	InvalidFetchSize = &BrokerError{Code: 4, Name: "INVALID_FETCH_SIZE", Retriable: false,
		Description: "the fetch size in the request is invalid"}
	LeaderNotAvailable = &BrokerError{Code: 5, Name: "LEADER_NOT_AVAILABLE", Retriable: true,
		Description: "the partition has no leader right now, usually during a leader election; retried after a metadata refresh"}
	NotLeaderOrFollower = &BrokerError{Code: 6, Name: "NOT_LEADER_OR_FOLLOWER", Retriable: true,
		Description: "the broker is not the leader of the partition (or not a replica of it); leadership moved, so metadata is refreshed and the request sent to the new leader"}
	RequestTimedOut = &BrokerError{Code: 7, Name: "REQUEST_TIMED_OUT", Retriable: true,
		Description: "the broker timed out handling the request, e.g. waiting for acks=all replication within the produce timeout"}
	BrokerNotAvailable = &BrokerError{Code: 8, Name: "BROKER_NOT_AVAILABLE", Retriable: false,
		Description: "the broker is not available"}
	ReplicaNotAvailable = &BrokerError{Code: 9, Name: "REPLICA_NOT_AVAILABLE", Retriable: true,
		Description: "a replica of the partition is not available on the broker"}
	MessageTooLarge = &BrokerError{Code: 10, Name: "MESSAGE_TOO_LARGE", Retriable: false,
		Description: "a record batch is larger than the broker accepts (message.max.bytes, or the topic's max.message.bytes); lower batch.size or max.request.size, or raise the topic limit"}
	StaleControllerEpoch = &BrokerError{Code: 11, Name: "STALE_CONTROLLER_EPOCH", Retriable: false,
		Description: "the controller moved to another node"}
	OffsetMetadataTooLarge = &BrokerError{Code: 12, Name: "OFFSET_METADATA_TOO_LARGE", Retriable: false,
		Description: "the metadata string of an offset commit is too large"}
	NetworkException = &BrokerError{Code: 13, Name: "NETWORK_EXCEPTION", Retriable: true,
		Description: "the connection broke before a response arrived"}
	CoordinatorLoadInProgress = &BrokerError{Code: 14, Name: "COORDINATOR_LOAD_IN_PROGRESS", Retriable: true,
		Description: "the group or transaction coordinator is still loading its state; retry shortly"}
	CoordinatorNotAvailable = &BrokerError{Code: 15, Name: "COORDINATOR_NOT_AVAILABLE", Retriable: true,
		Description: "the group or transaction coordinator is not available (its internal topic may not exist yet or be under-replicated); the coordinator is looked up again"}
	NotCoordinator = &BrokerError{Code: 16, Name: "NOT_COORDINATOR", Retriable: true,
		Description: "the broker is not the coordinator for this group or transactional id; the coordinator is looked up again"}
	InvalidTopicException = &BrokerError{Code: 17, Name: "INVALID_TOPIC_EXCEPTION", Retriable: false,
		Description: "the topic name is invalid, or the operation is not allowed on it (e.g. producing to an internal topic)"}
	RecordListTooLarge = &BrokerError{Code: 18, Name: "RECORD_LIST_TOO_LARGE", Retriable: false,
		Description: "a record batch is larger than the broker's log segment size"}
	NotEnoughReplicas = &BrokerError{Code: 19, Name: "NOT_ENOUGH_REPLICAS", Retriable: true,
		Description: "the partition has fewer in-sync replicas than min.insync.replicas, so the acks=all write was rejected; nothing was written"}
	NotEnoughReplicasAfterAppend = &BrokerError{Code: 20, Name: "NOT_ENOUGH_REPLICAS_AFTER_APPEND", Retriable: true,
		Description: "the records were written to the leader, but fewer than min.insync.replicas replicas have them; a retry may write duplicates unless the producer is idempotent"}
	InvalidRequiredAcks = &BrokerError{Code: 21, Name: "INVALID_REQUIRED_ACKS", Retriable: false,
		Description: "the produce request's acks value is not one the broker accepts (-1, 0 or 1)"}
	IllegalGeneration = &BrokerError{Code: 22, Name: "ILLEGAL_GENERATION", Retriable: false,
		Description: "the consumer group generation id is not valid"}
	InconsistentGroupProtocol = &BrokerError{Code: 23, Name: "INCONSISTENT_GROUP_PROTOCOL", Retriable: false,
		Description: "the member's group protocols are incompatible with those of the other members"}
	InvalidGroupID = &BrokerError{Code: 24, Name: "INVALID_GROUP_ID", Retriable: false,
		Description: "the group id is invalid"}
	UnknownMemberID = &BrokerError{Code: 25, Name: "UNKNOWN_MEMBER_ID", Retriable: false,
		Description: "the coordinator does not know this group member"}
	InvalidSessionTimeout = &BrokerError{Code: 26, Name: "INVALID_SESSION_TIMEOUT", Retriable: false,
		Description: "the session timeout is outside the broker's group.min.session.timeout.ms..group.max.session.timeout.ms"}
	RebalanceInProgress = &BrokerError{Code: 27, Name: "REBALANCE_IN_PROGRESS", Retriable: false,
		Description: "the group is rebalancing; the member must rejoin"}
	InvalidCommitOffsetSize = &BrokerError{Code: 28, Name: "INVALID_COMMIT_OFFSET_SIZE", Retriable: false,
		Description: "the offset commit data has an invalid size"}
	TopicAuthorizationFailed = &BrokerError{Code: 29, Name: "TOPIC_AUTHORIZATION_FAILED", Retriable: false,
		Description: "the client's principal may not perform this operation on the topic (e.g. WRITE); grant the ACL"}
	GroupAuthorizationFailed = &BrokerError{Code: 30, Name: "GROUP_AUTHORIZATION_FAILED", Retriable: false,
		Description: "the client's principal may not access the group; grant the ACL"}
	ClusterAuthorizationFailed = &BrokerError{Code: 31, Name: "CLUSTER_AUTHORIZATION_FAILED", Retriable: false,
		Description: "the client's principal lacks a cluster-level permission the request needs (older brokers require IDEMPOTENT_WRITE for idempotent producers)"}
	InvalidTimestamp = &BrokerError{Code: 32, Name: "INVALID_TIMESTAMP", Retriable: false,
		Description: "a record timestamp is outside the range the topic accepts (message.timestamp.before.max.ms / after.max.ms)"}
	UnsupportedSaslMechanism = &BrokerError{Code: 33, Name: "UNSUPPORTED_SASL_MECHANISM", Retriable: false,
		Description: "the broker does not support the requested SASL mechanism"}
	IllegalSaslState = &BrokerError{Code: 34, Name: "ILLEGAL_SASL_STATE", Retriable: false,
		Description: "the request is not valid in the current SASL state"}
	UnsupportedVersion = &BrokerError{Code: 35, Name: "UNSUPPORTED_VERSION", Retriable: false,
		Description: "the broker does not support this version of the request"}
	TopicAlreadyExists = &BrokerError{Code: 36, Name: "TOPIC_ALREADY_EXISTS", Retriable: false,
		Description: "a topic with this name already exists"}
	InvalidPartitions = &BrokerError{Code: 37, Name: "INVALID_PARTITIONS", Retriable: false,
		Description: "the number of partitions is invalid"}
	InvalidReplicationFactor = &BrokerError{Code: 38, Name: "INVALID_REPLICATION_FACTOR", Retriable: false,
		Description: "the replication factor is invalid"}
	InvalidReplicaAssignment = &BrokerError{Code: 39, Name: "INVALID_REPLICA_ASSIGNMENT", Retriable: false,
		Description: "the replica assignment is invalid"}
	InvalidConfig = &BrokerError{Code: 40, Name: "INVALID_CONFIG", Retriable: false,
		Description: "a topic or broker configuration in the request is invalid"}
	NotController = &BrokerError{Code: 41, Name: "NOT_CONTROLLER", Retriable: true,
		Description: "the request went to a node that is not the active controller"}
	InvalidRequest = &BrokerError{Code: 42, Name: "INVALID_REQUEST", Retriable: false,
		Description: "the request is malformed or violates the protocol; the broker log says what it rejected"}
	UnsupportedForMessageFormat = &BrokerError{Code: 43, Name: "UNSUPPORTED_FOR_MESSAGE_FORMAT", Retriable: false,
		Description: "the topic's message format version does not support the request"}
	PolicyViolation = &BrokerError{Code: 44, Name: "POLICY_VIOLATION", Retriable: false,
		Description: "the request violates a policy configured on the broker"}
	OutOfOrderSequenceNumber = &BrokerError{Code: 45, Name: "OUT_OF_ORDER_SEQUENCE_NUMBER", Retriable: false,
		Description: "the broker received a batch whose sequence number does not follow the last one it wrote for this producer; records may have been lost between them, so the idempotent producer cannot guarantee ordering for the partition"}
	DuplicateSequenceNumber = &BrokerError{Code: 46, Name: "DUPLICATE_SEQUENCE_NUMBER", Retriable: false,
		Description: "the broker already wrote a batch with this sequence number for this producer; the batch is a duplicate and was not written again"}
	InvalidProducerEpoch = &BrokerError{Code: 47, Name: "INVALID_PRODUCER_EPOCH", Retriable: false,
		Description: "the producer's epoch is older than the one the broker knows for its producer id: another producer with the same id (or a newer session of this one) took over"}
	InvalidTxnState = &BrokerError{Code: 48, Name: "INVALID_TXN_STATE", Retriable: false,
		Description: "the operation is not valid in the transaction's current state"}
	InvalidProducerIDMapping = &BrokerError{Code: 49, Name: "INVALID_PRODUCER_ID_MAPPING", Retriable: false,
		Description: "the producer id does not match the one the coordinator has for this transactional id (it may have expired after transactional.id.expiration.ms)"}
	InvalidTransactionTimeout = &BrokerError{Code: 50, Name: "INVALID_TRANSACTION_TIMEOUT", Retriable: false,
		Description: "transaction.timeout.ms is larger than the broker's transaction.max.timeout.ms (or not positive); lower it"}
	ConcurrentTransactions = &BrokerError{Code: 51, Name: "CONCURRENT_TRANSACTIONS", Retriable: true,
		Description: "the coordinator is still completing an earlier transaction for this transactional id; retry after a short backoff"}
	TransactionCoordinatorFenced = &BrokerError{Code: 52, Name: "TRANSACTION_COORDINATOR_FENCED", Retriable: false,
		Description: "the transaction coordinator sending the request has been replaced by a newer one"}
	TransactionalIDAuthorizationFailed = &BrokerError{Code: 53, Name: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", Retriable: false,
		Description: "the client's principal may not use this transactional.id; grant WRITE on the transactional id"}
	SecurityDisabled = &BrokerError{Code: 54, Name: "SECURITY_DISABLED", Retriable: false,
		Description: "a security feature was requested but security is disabled on the broker"}
	OperationNotAttempted = &BrokerError{Code: 55, Name: "OPERATION_NOT_ATTEMPTED", Retriable: false,
		Description: "the broker did not attempt this operation, typically because another part of the same batch failed"}
	KafkaStorageError = &BrokerError{Code: 56, Name: "KAFKA_STORAGE_ERROR", Retriable: true,
		Description: "a disk error on the broker: the log directory holding the partition is offline; leadership moves to another replica, so metadata is refreshed before a retry"}
	LogDirNotFound = &BrokerError{Code: 57, Name: "LOG_DIR_NOT_FOUND", Retriable: false,
		Description: "the log directory named in the request does not exist on the broker"}
	SaslAuthenticationFailed = &BrokerError{Code: 58, Name: "SASL_AUTHENTICATION_FAILED", Retriable: false,
		Description: "SASL authentication failed; check the credentials"}
	UnknownProducerID = &BrokerError{Code: 59, Name: "UNKNOWN_PRODUCER_ID", Retriable: false,
		Description: "the broker has no state for this producer id, usually because retention deleted all records it wrote; the Java idempotent producer then bumps its epoch and restarts the partition's sequence numbers (KIP-360)"}
	ReassignmentInProgress = &BrokerError{Code: 60, Name: "REASSIGNMENT_IN_PROGRESS", Retriable: false,
		Description: "a partition reassignment is in progress"}
	DelegationTokenAuthDisabled = &BrokerError{Code: 61, Name: "DELEGATION_TOKEN_AUTH_DISABLED", Retriable: false,
		Description: "delegation token authentication is not enabled on the broker"}
	DelegationTokenNotFound = &BrokerError{Code: 62, Name: "DELEGATION_TOKEN_NOT_FOUND", Retriable: false,
		Description: "the delegation token does not exist on the broker"}
	DelegationTokenOwnerMismatch = &BrokerError{Code: 63, Name: "DELEGATION_TOKEN_OWNER_MISMATCH", Retriable: false,
		Description: "the principal is not the owner or a renewer of the delegation token"}
	DelegationTokenRequestNotAllowed = &BrokerError{Code: 64, Name: "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", Retriable: false,
		Description: "delegation token requests are not allowed on plaintext or 1-way TLS connections, nor with delegation-token authentication"}
	DelegationTokenAuthorizationFailed = &BrokerError{Code: 65, Name: "DELEGATION_TOKEN_AUTHORIZATION_FAILED", Retriable: false,
		Description: "the principal may not perform this delegation token operation"}
	DelegationTokenExpired = &BrokerError{Code: 66, Name: "DELEGATION_TOKEN_EXPIRED", Retriable: false,
		Description: "the delegation token has expired"}
	InvalidPrincipalType = &BrokerError{Code: 67, Name: "INVALID_PRINCIPAL_TYPE", Retriable: false,
		Description: "the principal type is not supported"}
	NonEmptyGroup = &BrokerError{Code: 68, Name: "NON_EMPTY_GROUP", Retriable: false,
		Description: "the group still has members, so it cannot be deleted"}
	GroupIDNotFound = &BrokerError{Code: 69, Name: "GROUP_ID_NOT_FOUND", Retriable: false,
		Description: "the group id does not exist"}
	FetchSessionIDNotFound = &BrokerError{Code: 70, Name: "FETCH_SESSION_ID_NOT_FOUND", Retriable: true,
		Description: "the fetch session id was not found"}
	InvalidFetchSessionEpoch = &BrokerError{Code: 71, Name: "INVALID_FETCH_SESSION_EPOCH", Retriable: true,
		Description: "the fetch session epoch is invalid"}
	ListenerNotFound = &BrokerError{Code: 72, Name: "LISTENER_NOT_FOUND", Retriable: true,
		Description: "the partition leader has no listener with the name the request arrived on; the brokers' listener configurations differ"}
	TopicDeletionDisabled = &BrokerError{Code: 73, Name: "TOPIC_DELETION_DISABLED", Retriable: false,
		Description: "topic deletion is disabled on the broker"}
	FencedLeaderEpoch = &BrokerError{Code: 74, Name: "FENCED_LEADER_EPOCH", Retriable: true,
		Description: "the leader epoch in the request is older than the broker's; metadata is refreshed before a retry"}
	UnknownLeaderEpoch = &BrokerError{Code: 75, Name: "UNKNOWN_LEADER_EPOCH", Retriable: true,
		Description: "the leader epoch in the request is newer than the broker's; the broker has not caught up yet"}
	UnsupportedCompressionType = &BrokerError{Code: 76, Name: "UNSUPPORTED_COMPRESSION_TYPE", Retriable: false,
		Description: "the broker (or the request version) does not support the compression type used; choose another compression.type"}
	StaleBrokerEpoch = &BrokerError{Code: 77, Name: "STALE_BROKER_EPOCH", Retriable: false,
		Description: "the broker epoch has changed"}
	OffsetNotAvailable = &BrokerError{Code: 78, Name: "OFFSET_NOT_AVAILABLE", Retriable: true,
		Description: "the leader's high watermark has not caught up since its election, so the offset is not available yet"}
	MemberIDRequired = &BrokerError{Code: 79, Name: "MEMBER_ID_REQUIRED", Retriable: false,
		Description: "the group member must rejoin with the member id the coordinator returned"}
	PreferredLeaderNotAvailable = &BrokerError{Code: 80, Name: "PREFERRED_LEADER_NOT_AVAILABLE", Retriable: true,
		Description: "the preferred leader was not available"}
	GroupMaxSizeReached = &BrokerError{Code: 81, Name: "GROUP_MAX_SIZE_REACHED", Retriable: false,
		Description: "the group already has its configured maximum number of members"}
	FencedInstanceID = &BrokerError{Code: 82, Name: "FENCED_INSTANCE_ID", Retriable: false,
		Description: "another consumer with the same group.instance.id fenced this one"}
	EligibleLeadersNotAvailable = &BrokerError{Code: 83, Name: "ELIGIBLE_LEADERS_NOT_AVAILABLE", Retriable: true,
		Description: "no eligible leader is available for the partition"}
	ElectionNotNeeded = &BrokerError{Code: 84, Name: "ELECTION_NOT_NEEDED", Retriable: true,
		Description: "no leader election was needed for the partition"}
	NoReassignmentInProgress = &BrokerError{Code: 85, Name: "NO_REASSIGNMENT_IN_PROGRESS", Retriable: false,
		Description: "no partition reassignment is in progress"}
	GroupSubscribedToTopic = &BrokerError{Code: 86, Name: "GROUP_SUBSCRIBED_TO_TOPIC", Retriable: false,
		Description: "the group is subscribed to the topic, so its offsets for it cannot be deleted"}
	InvalidRecord = &BrokerError{Code: 87, Name: "INVALID_RECORD", Retriable: false,
		Description: "the broker rejected a record, e.g. it has no key but the topic is compacted, or it fails broker-side validation; the response names the offending record"}
	UnstableOffsetCommit = &BrokerError{Code: 88, Name: "UNSTABLE_OFFSET_COMMIT", Retriable: true,
		Description: "the group has pending transactional offset commits for the partition"}
	ThrottlingQuotaExceeded = &BrokerError{Code: 89, Name: "THROTTLING_QUOTA_EXCEEDED", Retriable: true,
		Description: "the request exceeded a throttling quota (e.g. topic-mutation rate)"}
	ProducerFenced = &BrokerError{Code: 90, Name: "PRODUCER_FENCED", Retriable: false,
		Description: "another producer started with the same transactional.id and a newer epoch; this producer is fenced and must be closed"}
	ResourceNotFound = &BrokerError{Code: 91, Name: "RESOURCE_NOT_FOUND", Retriable: false,
		Description: "a resource the request refers to does not exist"}
	DuplicateResource = &BrokerError{Code: 92, Name: "DUPLICATE_RESOURCE", Retriable: false,
		Description: "the request names the same resource more than once"}
	UnacceptableCredential = &BrokerError{Code: 93, Name: "UNACCEPTABLE_CREDENTIAL", Retriable: false,
		Description: "the requested credential does not meet the broker's criteria"}
	InconsistentVoterSet = &BrokerError{Code: 94, Name: "INCONSISTENT_VOTER_SET", Retriable: false,
		Description: "the sender or receiver of a KRaft request is not in the current voter set"}
	InvalidUpdateVersion = &BrokerError{Code: 95, Name: "INVALID_UPDATE_VERSION", Retriable: false,
		Description: "the update version is invalid"}
	FeatureUpdateFailed = &BrokerError{Code: 96, Name: "FEATURE_UPDATE_FAILED", Retriable: false,
		Description: "the finalized features could not be updated because of a broker error"}
	PrincipalDeserializationFailure = &BrokerError{Code: 97, Name: "PRINCIPAL_DESERIALIZATION_FAILURE", Retriable: false,
		Description: "a forwarded request's principal could not be deserialized; the cluster's security setup is broken"}
	SnapshotNotFound = &BrokerError{Code: 98, Name: "SNAPSHOT_NOT_FOUND", Retriable: false,
		Description: "the requested KRaft snapshot was not found"}
	PositionOutOfRange = &BrokerError{Code: 99, Name: "POSITION_OUT_OF_RANGE", Retriable: false,
		Description: "the requested snapshot position is negative or beyond the snapshot's size"}
	UnknownTopicID = &BrokerError{Code: 100, Name: "UNKNOWN_TOPIC_ID", Retriable: true,
		Description: "the broker does not host a topic with this id; metadata is refreshed before a retry"}
	DuplicateBrokerRegistration = &BrokerError{Code: 101, Name: "DUPLICATE_BROKER_REGISTRATION", Retriable: false,
		Description: "this broker id is already registered"}
	BrokerIDNotRegistered = &BrokerError{Code: 102, Name: "BROKER_ID_NOT_REGISTERED", Retriable: false,
		Description: "the broker id is not registered"}
	InconsistentTopicID = &BrokerError{Code: 103, Name: "INCONSISTENT_TOPIC_ID", Retriable: true,
		Description: "the topic id in the request does not match the log's topic id (the topic may have been deleted and recreated); metadata is refreshed before a retry"}
	InconsistentClusterID = &BrokerError{Code: 104, Name: "INCONSISTENT_CLUSTER_ID", Retriable: false,
		Description: "the cluster id in the request does not match the broker's"}
	TransactionalIDNotFound = &BrokerError{Code: 105, Name: "TRANSACTIONAL_ID_NOT_FOUND", Retriable: false,
		Description: "the transactional id was not found"}
	FetchSessionTopicIDError = &BrokerError{Code: 106, Name: "FETCH_SESSION_TOPIC_ID_ERROR", Retriable: true,
		Description: "the fetch session's topic ids are inconsistent"}
	IneligibleReplica = &BrokerError{Code: 107, Name: "INELIGIBLE_REPLICA", Retriable: false,
		Description: "the new ISR contains at least one ineligible replica"}
	NewLeaderElected = &BrokerError{Code: 108, Name: "NEW_LEADER_ELECTED", Retriable: false,
		Description: "a new leader was elected for the partition while the request was handled"}
	OffsetMovedToTieredStorage = &BrokerError{Code: 109, Name: "OFFSET_MOVED_TO_TIERED_STORAGE", Retriable: false,
		Description: "the requested offset has moved to tiered storage"}
	FencedMemberEpoch = &BrokerError{Code: 110, Name: "FENCED_MEMBER_EPOCH", Retriable: false,
		Description: "the group coordinator fenced the member epoch; the member must give up its partitions and rejoin"}
	UnreleasedInstanceID = &BrokerError{Code: 111, Name: "UNRELEASED_INSTANCE_ID", Retriable: false,
		Description: "another member of the consumer group still uses this instance id; it must leave first"}
	UnsupportedAssignor = &BrokerError{Code: 112, Name: "UNSUPPORTED_ASSIGNOR", Retriable: false,
		Description: "the consumer group does not support the assignor or its version range"}
	StaleMemberEpoch = &BrokerError{Code: 113, Name: "STALE_MEMBER_EPOCH", Retriable: false,
		Description: "the member epoch is stale; retry after the heartbeat returns the current one"}
	MismatchedEndpointType = &BrokerError{Code: 114, Name: "MISMATCHED_ENDPOINT_TYPE", Retriable: false,
		Description: "the request was sent to an endpoint of the wrong type (broker vs controller)"}
	UnsupportedEndpointType = &BrokerError{Code: 115, Name: "UNSUPPORTED_ENDPOINT_TYPE", Retriable: false,
		Description: "this endpoint type is not supported yet"}
	UnknownControllerID = &BrokerError{Code: 116, Name: "UNKNOWN_CONTROLLER_ID", Retriable: false,
		Description: "the controller id is not known"}
	UnknownSubscriptionID = &BrokerError{Code: 117, Name: "UNKNOWN_SUBSCRIPTION_ID", Retriable: false,
		Description: "a client telemetry push used an invalid or outdated subscription id"}
	TelemetryTooLarge = &BrokerError{Code: 118, Name: "TELEMETRY_TOO_LARGE", Retriable: false,
		Description: "a client telemetry push was larger than the broker accepts"}
	InvalidRegistration = &BrokerError{Code: 119, Name: "INVALID_REGISTRATION", Retriable: false,
		Description: "the controller considers the broker registration invalid"}
	TransactionAbortable = &BrokerError{Code: 120, Name: "TRANSACTION_ABORTABLE", Retriable: false,
		Description: "the broker hit an error in the current transaction; abort the transaction, after which the transactional id can be used again"}
	InvalidRecordState = &BrokerError{Code: 121, Name: "INVALID_RECORD_STATE", Retriable: false,
		Description: "the record state is invalid, so the share-group acknowledgement failed"}
	ShareSessionNotFound = &BrokerError{Code: 122, Name: "SHARE_SESSION_NOT_FOUND", Retriable: true,
		Description: "the share session was not found"}
	InvalidShareSessionEpoch = &BrokerError{Code: 123, Name: "INVALID_SHARE_SESSION_EPOCH", Retriable: true,
		Description: "the share session epoch is invalid"}
	FencedStateEpoch = &BrokerError{Code: 124, Name: "FENCED_STATE_EPOCH", Retriable: false,
		Description: "the share coordinator rejected the request because the share-group state epoch did not match"}
	InvalidVoterKey = &BrokerError{Code: 125, Name: "INVALID_VOTER_KEY", Retriable: false,
		Description: "the voter key does not match the receiving replica's key"}
	DuplicateVoter = &BrokerError{Code: 126, Name: "DUPLICATE_VOTER", Retriable: false,
		Description: "the voter is already in the voter set"}
	VoterNotFound = &BrokerError{Code: 127, Name: "VOTER_NOT_FOUND", Retriable: false,
		Description: "the voter is not in the voter set"}
	InvalidRegularExpression = &BrokerError{Code: 128, Name: "INVALID_REGULAR_EXPRESSION", Retriable: false,
		Description: "the regular expression is not valid"}
	RebootstrapRequired = &BrokerError{Code: 129, Name: "REBOOTSTRAP_REQUIRED", Retriable: false,
		Description: "the client's metadata is too stale to be refreshed from the brokers it knows; it must bootstrap again from bootstrap.servers"}
	StreamsInvalidTopology = &BrokerError{Code: 130, Name: "STREAMS_INVALID_TOPOLOGY", Retriable: false,
		Description: "the Streams topology in the request is invalid"}
	StreamsInvalidTopologyEpoch = &BrokerError{Code: 131, Name: "STREAMS_INVALID_TOPOLOGY_EPOCH", Retriable: false,
		Description: "the Streams topology epoch is invalid"}
	StreamsTopologyFenced = &BrokerError{Code: 132, Name: "STREAMS_TOPOLOGY_FENCED", Retriable: false,
		Description: "the Streams topology epoch is outdated"}
	ShareSessionLimitReached = &BrokerError{Code: 133, Name: "SHARE_SESSION_LIMIT_REACHED", Retriable: true,
		Description: "no new share session could be opened: the broker's limit of share sessions is reached"}
	GroupDeletionFailed = &BrokerError{Code: 134, Name: "GROUP_DELETION_FAILED", Retriable: false,
		Description: "the group could not be deleted; the broker's error message gives the cause"}
	StreamsTopologyDescriptionUpdateFailed = &BrokerError{Code: 135, Name: "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED", Retriable: false,
		Description: "the broker could not process the Streams topology description update; the error message gives the cause"}
	ControllerIDNotRegistered = &BrokerError{Code: 136, Name: "CONTROLLER_ID_NOT_REGISTERED", Retriable: false,
		Description: "the controller id is not registered"}
)

// allCodes lists every known code once, in code order. Keep it in step with
// the variables above; TestCodesTable checks that codes and names are unique.
var allCodes = []*BrokerError{
	UnknownServerError, OffsetOutOfRange, CorruptMessage, UnknownTopicOrPartition,
	InvalidFetchSize, LeaderNotAvailable, NotLeaderOrFollower, RequestTimedOut,
	BrokerNotAvailable, ReplicaNotAvailable, MessageTooLarge, StaleControllerEpoch,
	OffsetMetadataTooLarge, NetworkException, CoordinatorLoadInProgress,
	CoordinatorNotAvailable, NotCoordinator, InvalidTopicException, RecordListTooLarge,
	NotEnoughReplicas, NotEnoughReplicasAfterAppend, InvalidRequiredAcks,
	IllegalGeneration, InconsistentGroupProtocol, InvalidGroupID, UnknownMemberID,
	InvalidSessionTimeout, RebalanceInProgress, InvalidCommitOffsetSize,
	TopicAuthorizationFailed, GroupAuthorizationFailed, ClusterAuthorizationFailed,
	InvalidTimestamp, UnsupportedSaslMechanism, IllegalSaslState, UnsupportedVersion,
	TopicAlreadyExists, InvalidPartitions, InvalidReplicationFactor,
	InvalidReplicaAssignment, InvalidConfig, NotController, InvalidRequest,
	UnsupportedForMessageFormat, PolicyViolation, OutOfOrderSequenceNumber,
	DuplicateSequenceNumber, InvalidProducerEpoch, InvalidTxnState,
	InvalidProducerIDMapping, InvalidTransactionTimeout, ConcurrentTransactions,
	TransactionCoordinatorFenced, TransactionalIDAuthorizationFailed, SecurityDisabled,
	OperationNotAttempted, KafkaStorageError, LogDirNotFound, SaslAuthenticationFailed,
	UnknownProducerID, ReassignmentInProgress, DelegationTokenAuthDisabled,
	DelegationTokenNotFound, DelegationTokenOwnerMismatch,
	DelegationTokenRequestNotAllowed, DelegationTokenAuthorizationFailed,
	DelegationTokenExpired, InvalidPrincipalType, NonEmptyGroup, GroupIDNotFound,
	FetchSessionIDNotFound, InvalidFetchSessionEpoch, ListenerNotFound,
	TopicDeletionDisabled, FencedLeaderEpoch, UnknownLeaderEpoch,
	UnsupportedCompressionType, StaleBrokerEpoch, OffsetNotAvailable, MemberIDRequired,
	PreferredLeaderNotAvailable, GroupMaxSizeReached, FencedInstanceID,
	EligibleLeadersNotAvailable, ElectionNotNeeded, NoReassignmentInProgress,
	GroupSubscribedToTopic, InvalidRecord, UnstableOffsetCommit,
	ThrottlingQuotaExceeded, ProducerFenced, ResourceNotFound, DuplicateResource,
	UnacceptableCredential, InconsistentVoterSet, InvalidUpdateVersion,
	FeatureUpdateFailed, PrincipalDeserializationFailure, SnapshotNotFound,
	PositionOutOfRange, UnknownTopicID, DuplicateBrokerRegistration,
	BrokerIDNotRegistered, InconsistentTopicID, InconsistentClusterID,
	TransactionalIDNotFound, FetchSessionTopicIDError, IneligibleReplica,
	NewLeaderElected, OffsetMovedToTieredStorage, FencedMemberEpoch,
	UnreleasedInstanceID, UnsupportedAssignor, StaleMemberEpoch,
	MismatchedEndpointType, UnsupportedEndpointType, UnknownControllerID,
	UnknownSubscriptionID, TelemetryTooLarge, InvalidRegistration,
	TransactionAbortable, InvalidRecordState, ShareSessionNotFound,
	InvalidShareSessionEpoch, FencedStateEpoch, InvalidVoterKey, DuplicateVoter,
	VoterNotFound, InvalidRegularExpression, RebootstrapRequired,
	StreamsInvalidTopology, StreamsInvalidTopologyEpoch, StreamsTopologyFenced,
	ShareSessionLimitReached, GroupDeletionFailed,
	StreamsTopologyDescriptionUpdateFailed, ControllerIDNotRegistered,
}

// byCode indexes allCodes. Built once at init and never written again, so
// ForCode may be called from any goroutine.
var byCode = func() map[int16]*BrokerError {
	m := make(map[int16]*BrokerError, len(allCodes))
	for _, e := range allCodes {
		m[e.Code] = e
	}
	return m
}()

// ForCode returns the error for a Kafka error code: nil for 0 (no error),
// the package variable for a known code, and for a code this version of
// kprod does not know a new *BrokerError named UNKNOWN_CODE_<n>, which is
// not retriable (the Java client treats unknown codes as UNKNOWN_SERVER_ERROR,
// which is not retriable either).
//
// The returned variables are shared: do not modify them. To attach the
// broker's message or the partition, wrap the result in a *ResponseError.
func ForCode(code int16) error {
	if code == 0 {
		return nil
	}
	if e, ok := byCode[code]; ok {
		return e
	}
	return &BrokerError{
		Code:        code,
		Name:        "UNKNOWN_CODE_" + strconv.Itoa(int(code)),
		Description: fmt.Sprintf("the broker returned error code %d, which this version of kprod does not know; the broker is newer than kprod, see its documentation for the code", code),
	}
}
