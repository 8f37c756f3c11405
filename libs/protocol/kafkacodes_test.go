package protocol

import (
	"cmp"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestKafkaCodes holds the Sluice and Kafka code tables together: a code
// given as it is carries Kafka's name for that number; every code, in every
// kind of answer, becomes one Kafka defines; a retriable condition stays
// retriable for a Kafka client in data and coordinator answers (where
// clients retry by the code); and the conditions of an unreachable leader
// or coordinator get the codes Kafka clients look them up again on.
func TestKafkaCodes(t *testing.T) {
	// franz-go's names that are not Sluice's: Kafka's older name for code
	// 6, and Kafka's name for code 2, which Sluice calls by what it is.
	kafkaName := map[int16]string{2: "CORRUPT_MESSAGE", 6: "NOT_LEADER_FOR_PARTITION"}
	// Conditions Kafka clients act on by name rather than retry as such:
	// a producer retries its AddPartitionsToTxn on CONCURRENT_TRANSACTIONS,
	// a share consumer opens a new session on SHARE_SESSION_NOT_FOUND.
	handled := map[Code]bool{ConcurrentTransactions: true, ShareSessionNotFound: true}
	for _, info := range Codes() {
		for a := AdminAnswer; a < answers; a++ {
			k := info.Code.Kafka(a)
			if k == 0 {
				if info.Code != None {
					t.Errorf("%s in answer %d: no error for Kafka", info.Name, a)
				}
				continue
			}
			var ke *kerr.Error
			if !errors.As(kerr.ErrorForCode(k), &ke) || ke.Code != k {
				t.Errorf("%s in answer %d: Kafka code %d is not one Kafka defines", info.Name, a, k)
				continue
			}
			if want := cmp.Or(kafkaName[k], info.Name); int16(info.Code) == k && ke.Message != want {
				t.Errorf("code %d is %s here and %s in Kafka", k, info.Name, ke.Message)
			}
			if info.Retriable && a != AdminAnswer && !ke.Retriable && !handled[info.Code] {
				t.Errorf("%s is retriable but a Kafka client is given %s in answer %d, which it does not retry", info.Name, ke.Message, a)
			}
		}
	}
	for _, c := range []Code{BrokerNotAvailable, NetworkException, UnknownNode, TooManyConnections, LeaderNotAvailable} {
		if got := c.Kafka(DataAnswer); got != int16(NotLeaderOrFollower) && c != LeaderNotAvailable {
			t.Errorf("%s in a data answer: %d, want NOT_LEADER_OR_FOLLOWER", c, got)
		}
		if got := c.Kafka(CoordinatorAnswer); got != int16(CoordinatorNotAvailable) {
			t.Errorf("%s in a coordinator answer: %d, want COORDINATOR_NOT_AVAILABLE", c, got)
		}
	}
	if KafkaOf(nil, DataAnswer) != 0 || KafkaOf(errors.New("plain"), AdminAnswer) != int16(UnknownServerError) ||
		KafkaOf(GroupIDNotFound.Err("g"), CoordinatorAnswer) != int16(GroupIDNotFound) || Code(4242).Kafka(AdminAnswer) != int16(UnknownServerError) {
		t.Error("KafkaOf: nil is no error, a plain error UNKNOWN_SERVER_ERROR, a coded one its code, an unknown code UNKNOWN_SERVER_ERROR")
	}
}
