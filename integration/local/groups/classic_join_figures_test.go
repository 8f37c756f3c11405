package groups

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// TestClassicJoinFigures measures a classic group of 1,000 members joining
// at once, for docs/dev/performance-log.md; it runs only with
// SLUICE_FIGURES=1:
//
//	SLUICE_FIGURES=1 go test -count=1 -timeout 30m -run TestClassicJoinFigures -v ./local/groups/
//
// Each member is a franz-go client of its own (its own connection, as every
// Kafka consumer has) sending the classic protocol's requests itself:
// JoinGroup (once more with the member id the first answer gives),
// then SyncGroup, the leader with an assignment for every member. The
// figures: the time until every member has its JoinGroup answer (one
// generation for all), until every member has its assignment, and the
// offsets leader's Raft entries and commands over the join.
func TestClassicJoinFigures(t *testing.T) {
	itest.FiguresOnly(t, "the classic join figures")
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("SLUICE_FIGURES_MEMBERS")); err == nil && v > 0 {
		n = v
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "joined", 4, 3)
	clients := make([]*kgo.Client, n)
	for i := range clients {
		clients[i] = itest.FranzClient(t, c)
	}
	meta := (&kmsg.ConsumerMemberMetadata{Version: 0, Topics: []string{"joined"}}).AppendTo(nil)
	const group = "thousand"
	entries0, commands0 := leaderEntries(t, c)
	start := time.Now()
	type joined struct {
		member, leader string
		generation     int32
		members        []kmsg.JoinGroupResponseMember
		at             time.Duration
		err            error
	}
	joins := make([]joined, n)
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() {
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version = 5
			req.Group, req.ProtocolType = group, "consumer"
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 60_000, 120_000
			req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta}}
			for range 3 {
				resp, err := req.RequestWith(ctx, cl)
				if err == nil && resp.ErrorCode == kerr.MemberIDRequired.Code {
					req.MemberID = resp.MemberID
					continue
				}
				if err == nil {
					err = kerr.ErrorForCode(resp.ErrorCode)
				}
				if err != nil {
					joins[i].err = err
					return
				}
				joins[i] = joined{member: resp.MemberID, leader: resp.LeaderID, generation: resp.Generation, members: resp.Members, at: time.Since(start)}
				return
			}
			joins[i].err = fmt.Errorf("member id required three times")
		})
	}
	wg.Wait()
	var joinTimes []time.Duration
	for i, j := range joins {
		if j.err != nil {
			t.Fatalf("member %d's join: %v", i, j.err)
		}
		if j.generation != joins[0].generation {
			t.Fatalf("member %d joined generation %d, member 0 %d: want one generation", i, j.generation, joins[0].generation)
		}
		joinTimes = append(joinTimes, j.at)
	}
	slices.Sort(joinTimes)
	syncStart := time.Since(start)
	syncErrs := make([]error, n)
	for i, cl := range clients {
		wg.Go(func() {
			j := joins[i]
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version = 3
			req.Group, req.MemberID, req.Generation = group, j.member, j.generation
			if j.member == j.leader {
				if len(j.members) != n {
					syncErrs[i] = fmt.Errorf("the leader was given %d members, want %d", len(j.members), n)
					return
				}
				for k, m := range j.members {
					a := kmsg.ConsumerMemberAssignment{Version: 0}
					if k < 4 {
						a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "joined", Partitions: []int32{int32(k)}}}
					}
					req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: a.AppendTo(nil)})
				}
			}
			resp, err := req.RequestWith(ctx, cl)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			syncErrs[i] = err
		})
	}
	wg.Wait()
	synced := time.Since(start)
	for i, err := range syncErrs {
		if err != nil {
			t.Fatalf("member %d's sync: %v", i, err)
		}
	}
	entries, commands := leaderEntries(t, c)
	t.Logf("FIGURE classic group of %d members joining at once: every JoinGroup answered after %v (first %v, median %v), every SyncGroup after %v more (%v in all); offsets leader: %.0f commands in %.0f Raft entries",
		n, joinTimes[n-1].Round(time.Millisecond), joinTimes[0].Round(time.Millisecond), joinTimes[n/2].Round(time.Millisecond),
		(synced - syncStart).Round(time.Millisecond), synced.Round(time.Millisecond), commands-commands0, entries-entries0)
}
