package protocol

import "testing"

// TestProduceOutcomes is the produce outcome table written out: for each code
// that a produce can be answered with, what the attempt wrote, whether the
// answer settles the batch or splits a joined request, whether the batch is
// resent, and whether a failure leaves the outcome open.
func TestProduceOutcomes(t *testing.T) {
	type row struct {
		appended       Appended
		settles, split bool
		resend, open   bool
	}
	for code, want := range map[Code]row{
		None:                         {},
		UnknownServerError:           {appended: AppendedMaybe, open: true},
		RequestTimedOut:              {appended: AppendedMaybe, resend: true, open: true},
		NetworkException:             {appended: AppendedMaybe, resend: true, open: true},
		NotEnoughReplicasAfterAppend: {appended: AppendedYes, resend: true},
		NotEnoughReplicas:            {resend: true, open: true},
		NotLeaderOrFollower:          {resend: true, open: true},
		LeaderNotAvailable:           {resend: true, open: true},
		FencedLeaderEpoch:            {resend: true, open: true},
		StorageError:                 {resend: true, open: true},
		ThrottlingQuotaExceeded:      {resend: true, open: true},
		UnknownTopicOrPartition:      {resend: true, open: true},
		CorruptRecord:                {settles: true, split: true},
		InvalidRecord:                {settles: true, split: true},
		MessageTooLarge:              {settles: true, split: true},
		RecordListTooLarge:           {settles: true, split: true},
		DuplicateSequenceNumber:      {settles: true, split: true},
		InvalidTimestamp:             {settles: true},
		InvalidRequiredAcks:          {settles: true},
		InvalidRequest:               {split: true},
		OutOfOrderSequenceNumber:     {split: true},
		InvalidProducerEpoch:         {split: true},
		UnknownProducerID:            {},
		TopicAuthorizationFailed:     {},
		UnsupportedForMessageFormat:  {},
		Code(4242):                   {appended: AppendedMaybe, open: true}, // a code this table does not know
	} {
		o := code.Produce()
		got := row{o.Appended, o.Settles, o.Split, code.Resend(), code.Open()}
		if got != want {
			t.Errorf("%v: %+v, want %+v", code, got, want)
		}
	}
}

// TestProduceOutcomesAgree: the columns do not contradict each other for any
// code: what is appended or settled is not open, a split refusal wrote
// nothing, and nothing settled is resent.
func TestProduceOutcomesAgree(t *testing.T) {
	for _, info := range Codes() {
		c, o := info.Code, info.Code.Produce()
		if o.Settles && (o.Appended != AppendedNo || c.Resend() || c.Open()) {
			t.Errorf("%s settles the batch but %+v, resend %v, open %v", info.Name, o, c.Resend(), c.Open())
		}
		if o.Split && o.Appended != AppendedNo {
			t.Errorf("%s splits a request that may have been written", info.Name)
		}
		if o.Appended == AppendedYes && c.Open() {
			t.Errorf("%s: appended yet open", info.Name)
		}
	}
}
