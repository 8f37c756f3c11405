package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
)

// run runs a command with stdin and a timeout and returns its stdout; a
// failure ends the test with its stderr.
func run(t *testing.T, timeout time.Duration, stdin string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, errb.String(), out.String())
	}
	return out.String()
}

// TestKafkaClients drives a cluster with Kafka clients no one here wrote:
// kcat (librdkafka) lists the cluster, produces keyed lines with acks=all
// in every codec and consumes them back in per-key order through the
// storage nodes' Kafka listeners (KIP-392), reading records produced over
// HTTP too, while sluicectl reads what kcat wrote; kafka-python round-trips
// 1,000 records, and writes 1,000 more as Kafka 0.10.1 did (message sets
// in Produce v2); Produce v1 with message format v0 is written or refused
// whole; a kcat consume is served by sendfile on the storage node; and
// garbage on every Kafka listener leaves every process serving.
func TestKafkaClients(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	kcat := itest.NeedTool(t, "kcat", "kcat")
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	boot := c.KafkaAddrs()[0]

	t.Run("kcat", func(t *testing.T) {
		itest.CreateTopic(t, ctx, c, "kcat", 3, 3)
		listing := run(t, time.Minute, "", kcat, "-b", boot, "-L")
		for _, want := range []string{"4 brokers:", "broker 1 at", "broker 2 at", "broker 3 at", `topic "kcat" with 3 partitions`} {
			if !strings.Contains(listing, want) {
				t.Fatalf("kcat -L lacks %q:\n%s", want, listing)
			}
		}
		codecs := []string{"none", "gzip", "snappy", "lz4", "zstd"}
		const keys, perCodec = 10, 200
		seq := make([]int, keys)
		for _, codec := range codecs {
			var in strings.Builder
			for i := 0; i < perCodec; i++ {
				k := i % keys
				fmt.Fprintf(&in, "key-%d:key-%d:%d\n", k, k, seq[k])
				seq[k]++
			}
			run(t, time.Minute, in.String(), kcat, "-b", boot, "-P", "-t", "kcat", "-K:", "-X", "acks=all", "-z", codec)
		}
		httpValue := "over-http-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		reply := itest.PostJSON(t, c.FrontendURL()+"/v1/topics/kcat/records?acks=all", map[string]any{
			"records": []map[string]string{{"key": "http", "value": httpValue}}})
		if len(reply.Offsets) != 1 || reply.Offsets[0].ErrorCode != 0 {
			t.Fatalf("HTTP produce: %+v", reply)
		}
		out := run(t, time.Minute, "", kcat, "-b", boot, "-C", "-t", "kcat", "-e", "-o", "beginning", "-q", "-f", "%p %o %k %s\n")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if want := len(codecs)*perCodec + 1; len(lines) != want {
			t.Fatalf("kcat consumed %d records, want %d", len(lines), want)
		}
		last := map[string]int{}
		sawHTTP := false
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("kcat line %q is not 'partition offset key value'", line)
			}
			if f[3] == httpValue {
				sawHTTP = true
				continue
			}
			k, s, _ := strings.Cut(f[3], ":")
			n, _ := strconv.Atoi(s)
			if k != f[2] {
				t.Fatalf("record %q under key %q", f[3], f[2])
			}
			if prev, ok := last[k]; ok && n != prev+1 {
				t.Fatalf("key %s: %d after %d: per-key order broken or a record lost or doubled", k, n, prev)
			}
			last[k] = n
		}
		if !sawHTTP {
			t.Fatal("kcat did not read the record produced over HTTP")
		}
		for k := 0; k < keys; k++ {
			if last["key-"+strconv.Itoa(k)] != seq[k]-1 {
				t.Fatalf("key-%d ended at %d, %d were sent", k, last["key-"+strconv.Itoa(k)], seq[k])
			}
		}
		// What kcat wrote, sluicectl reads.
		out, errOut, code := itest.Sluicectl(t, c, "", "consume", "kcat", "--from-beginning", "--exit-at-end", "--format", "%k=%s\n")
		if code != 0 || !strings.Contains(out, "key-3=key-3:0\n") || strings.Count(out, "\n") != len(lines) {
			t.Fatalf("sluicectl consume of kcat's records: exit %d, %d lines (want %d): %s", code, strings.Count(out, "\n"), len(lines), errOut)
		}
	})

	t.Run("kafka-python", func(t *testing.T) {
		python := itest.NeedPython(t, "kafka", "python3-kafka")
		itest.CreateTopic(t, ctx, c, "python", 2, 3)
		out := run(t, 2*time.Minute, "", python, "-c", pythonRoundTrip, boot, "python", "1000")
		if strings.TrimSpace(out) != "consumed 1000 of 1000 in order" {
			t.Fatalf("kafka-python round trip: %s", out)
		}
	})

	t.Run("kafka-python message sets", func(t *testing.T) {
		// kafka-python speaking Kafka 0.10.1's protocol: Produce v2 with
		// message sets of format v1, plain and gzip-compressed.
		python := itest.NeedPython(t, "kafka", "python3-kafka")
		itest.CreateTopic(t, ctx, c, "python-old", 2, 3)
		out := run(t, 2*time.Minute, "", python, "-c", pythonMessageSets, boot, "python-old", "500")
		if strings.TrimSpace(out) != "read 1000 of 1000 as written" {
			t.Fatalf("kafka-python with message sets: %s", out)
		}
	})

	t.Run("produce v1", func(t *testing.T) { produceMessageSetV0(t, ctx, c) })

	t.Run("sendfile", func(t *testing.T) { kcatFetchUsesSendfile(t, ctx, c, kcat) })

	t.Run("bad input", func(t *testing.T) {
		targets := append([]string{}, c.KafkaAddrs()...)
		for i := 1; i <= 3; i++ {
			targets = append(targets, c.StorageKafkaAddr(i))
		}
		for _, addr := range targets {
			itest.SendBadKafkaInput(t, addr)
		}
		for _, p := range c.Procs {
			if !alive(p) {
				t.Fatalf("%s died on bad input", p.Name)
			}
		}
		// Every listener still serves a correct produce and consume.
		run(t, time.Minute, "after:garbage\n", kcat, "-b", boot, "-P", "-t", "kcat", "-K:", "-X", "acks=all")
		out := run(t, time.Minute, "", kcat, "-b", strings.Join(targets, ","), "-C", "-t", "kcat", "-e", "-o", "beginning", "-q", "-f", "%s\n")
		if !strings.Contains(out, "garbage\n") {
			t.Fatal("the record produced after the bad input was not read back")
		}
		for _, p := range c.Procs {
			if p.Name != "frontend" && !strings.HasPrefix(p.Name, "storage") {
				continue
			}
			b, _ := os.ReadFile(p.LogPath)
			if !strings.Contains(string(b), "kafka request refused: its size is out of bounds") {
				t.Fatalf("%s logged no reason for the oversized frame", p.Name)
			}
		}
	})
}

// alive reports whether a process of the cluster still runs.
func alive(p *localcluster.Proc) bool {
	pid := p.Pid()
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// kcatFetchUsesSendfile traces the storage node leading a partition while
// kcat consumes it: the records leave the node by sendfile(2).
func kcatFetchUsesSendfile(t *testing.T, ctx context.Context, c *localcluster.Cluster, kcat string) {
	strace := itest.NeedTool(t, "strace", "strace")
	itest.CreateTopic(t, ctx, c, "sendfile", 1, 1)
	var in strings.Builder
	value := strings.Repeat("v", 1000)
	for i := 0; i < 4000; i++ {
		fmt.Fprintf(&in, "%d:%s\n", i, value)
	}
	run(t, time.Minute, in.String(), kcat, "-b", c.KafkaAddrs()[0], "-P", "-t", "sendfile", "-K:", "-X", "acks=all", "-X", "linger.ms=20")
	snap, err := cluster.NewClient(c.MetadataURLs()).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	topic, _ := snap.Topic("sendfile")
	leader := c.Proc(fmt.Sprintf("storage-%d", topic.Partitions[0].Leader))
	trace := filepath.Join(t.TempDir(), "trace.txt")
	st := exec.Command(strace, "-f", "-qq", "-e", "trace=sendfile", "-o", trace, "-p", strconv.Itoa(leader.Pid()))
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // strace attaches to every thread
	out := run(t, time.Minute, "", kcat, "-b", c.KafkaAddrs()[0], "-C", "-t", "sendfile", "-e", "-o", "beginning", "-q", "-f", "%k\n")
	_ = st.Process.Signal(os.Interrupt)
	_ = st.Wait()
	if n := strings.Count(out, "\n"); n != 4000 {
		t.Fatalf("kcat consumed %d records, want 4000", n)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var sent int64
	for _, m := range regexp.MustCompile(`sendfile\(.*\) = (\d+)`).FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		sent += n
	}
	if sent < 4000*1000 {
		t.Fatalf("the storage node sent %d bytes by sendfile during the consume, less than the 4 MB of values:\n%.2000s", sent, b)
	}
	t.Logf("storage node %s sent %d bytes by sendfile for kcat", leader.Name, sent)
}

// pythonMessageSets produces n records without compression and n with
// gzip with kafka-python speaking Kafka 0.10.1's protocol (Produce v2,
// message format v1), then reads them with today's protocol: argv is
// bootstrap servers, topic, n.
const pythonMessageSets = `
import sys, time
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
boot, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
start = int(time.time() * 1000)
sent = {}
for codec in (None, 'gzip'):
    p = KafkaProducer(bootstrap_servers=boot, acks='all', api_version=(0, 10, 1), compression_type=codec)
    for i in range(n):
        key = b'%s-%d' % ((codec or 'none').encode(), i)
        value = b'v' * (i % 50)
        ts = None if i % 2 else 1600000000000 + i
        sent[key] = (value, ts)
        p.send(topic, key=key, value=value, timestamp_ms=ts).get(timeout=60)
    p.close()
c = KafkaConsumer(bootstrap_servers=boot, group_id=None, enable_auto_commit=False, consumer_timeout_ms=10000)
parts = [TopicPartition(topic, q) for q in sorted(c.partitions_for_topic(topic))]
c.assign(parts)
c.seek_to_beginning(*parts)
got = 0
for m in c:
    value, ts = sent.pop(m.key)
    if m.value != value:
        print('key', m.key, 'value', m.value, 'want', value)
        sys.exit(1)
    if (ts is not None and m.timestamp != ts) or (ts is None and m.timestamp < start - 1000):
        print('key', m.key, 'timestamp', m.timestamp, 'want', ts or 'about %d' % start)
        sys.exit(1)
    got += 1
    if got == 2 * n:
        break
c.close()
print('read %d of %d as written' % (got, 2 * n))
`

// produceMessageSetV0 sends Produce v1 requests (message format v0, what a
// Kafka 0.9 client writes) to the frontend's Kafka listener by hand: a
// message set of two records is written and reads back with the receive
// time as timestamp; one with a bad CRC is refused with CORRUPT_MESSAGE and
// writes nothing.
func produceMessageSetV0(t *testing.T, ctx context.Context, c *localcluster.Cluster) {
	itest.CreateTopic(t, ctx, c, "v0", 1, 3)
	message := func(key, value string) []byte {
		m := kmsg.MessageV0{Key: []byte(key), Value: []byte(value)}
		b := m.AppendTo(nil)
		binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
		binary.BigEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[16:]))
		return b
	}
	produce := func(set []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 1, -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "v0"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = set
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 1
		kafkaRequest(t, c.KafkaAddrs()[0], req, resp)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("produce v1 answer: %+v", resp)
		}
		return resp.Topics[0].Partitions[0]
	}
	before := time.Now().UnixMilli()
	if p := produce(append(message("a", "one"), message("b", "two")...)); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce v1 of two messages: error %d, base offset %d", p.ErrorCode, p.BaseOffset)
	}
	bad := message("c", "three")
	bad[len(bad)-1] ^= 0xff
	if p := produce(bad); p.ErrorCode != 2 {
		t.Fatalf("produce v1 with a bad CRC: error %d, want CORRUPT_MESSAGE (2)", p.ErrorCode)
	}
	cl := itest.FranzClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"v0": {0: kgo.NewOffset().AtStart()}}))
	var got []string
	for len(got) < 2 {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if pctx.Err() != nil && fs.NumRecords() == 0 {
			t.Fatalf("read %v of the two records", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if ms := r.Timestamp.UnixMilli(); ms < before || ms > time.Now().UnixMilli() {
				t.Errorf("record %s timestamp %d, want the receive time (after %d)", r.Key, ms, before)
			}
			got = append(got, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Offset))
		})
	}
	if strings.Join(got, " ") != "a=one@0 b=two@1" {
		t.Fatalf("read %v, want a=one@0 b=two@1 and nothing of the refused set", got)
	}
}

// kafkaRequest sends req to a Kafka listener on a connection of its own and
// reads the answer into resp (of the request's version).
func kafkaRequest(t *testing.T, addr string, req kmsg.Request, resp kmsg.Response) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("sluice-test")).AppendRequest(nil, req, 7)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatal(err)
	}
	if len(body) < 4 || binary.BigEndian.Uint32(body) != 7 {
		t.Fatalf("answer of %d bytes with another correlation id", len(body))
	}
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
}

// pythonRoundTrip is a kafka-python producer and plain (group-less)
// consumer: argv is bootstrap servers, topic, count.
const pythonRoundTrip = `
import sys
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
boot, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = KafkaProducer(bootstrap_servers=boot, acks='all')
futures = [p.send(topic, key=b'k%d' % (i % 7), value=b'%d' % i) for i in range(n)]
for f in futures:
    f.get(timeout=60)
p.flush()
p.close()
c = KafkaConsumer(bootstrap_servers=boot, group_id=None, enable_auto_commit=False, consumer_timeout_ms=10000)
parts = [TopicPartition(topic, q) for q in sorted(c.partitions_for_topic(topic))]
c.assign(parts)
c.seek_to_beginning(*parts)
last, got = {}, 0
for m in c:
    v = int(m.value)
    if m.key in last and v <= last[m.key]:
        print('order broken for', m.key, v, 'after', last[m.key])
        sys.exit(1)
    last[m.key] = v
    got += 1
    if got == n:
        break
c.close()
print('consumed %d of %d in order' % (got, n))
`
